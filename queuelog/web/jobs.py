"""Pages for everyone logged in: the dashboard, submitting jobs, lists of jobs and a job's page."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import get_timezone
from flask_babel import gettext as _
from flask_login import current_user, login_required
from wtforms import SelectChoice

from queuelog.inputs import ascii_int
from queuelog.models import PRIORITIES, PRIORITY_NAMES, STATUSES
from queuelog.queue import Code, JobRecord, JobSpec, JobValidationError, QueueError
from queuelog.queue.inputs import (
    MAX_KEY_LENGTH,
    check_document,
    check_label,
    check_start_time,
    read_json,
)
from queuelog.queue.limits import running_of
from queuelog.queue.monitor import ConsoleStats
from queuelog.queue.stats import QueueStats
from queuelog.web.context import console, principal, queue
from queuelog.web.forms import ConfirmForm, SubmitJobForm
from queuelog.web.refusals import form_field, refusal_text
from queuelog.web.search import parse_search
from queuelog.web.types import flow_rows

bp = Blueprint("web_jobs", __name__)
JOB_PAGE_REFRESH_SECONDS = 5  # how often the page of a pending or running job reloads itself
PAGE_SIZE = 50


def _visible_job(job_id: int) -> JobRecord:
    """The job if the person may see it (the principal says), else 404: others' jobs stay hidden."""
    job = queue().get(job_id)
    if job is None or not principal().may_see(job):
        abort(404)
    return job


@bp.get("/")
@login_required
def dashboard():
    overview = QueueStats(queue()).overview(owner=principal().owner_scope)
    admin = principal().is_admin  # an admin's overview counts every owner's jobs: the panels reuse them
    return render_template(
        "jobs/dashboard.html",
        overview=overview,
        chart=_chart(overview["throughput"]),
        busiest=ConsoleStats(queue()).busiest(overview["by_type"]) if admin else [],
        next_schedules=_next_schedules() if admin else [],
        flow=flow_rows(running_of(overview["by_type"])) if admin else [],
    )


def _next_schedules(count: int = 5) -> list:
    """The active schedules whose next run comes first (the dashboard shows them to admins)."""
    active = [
        s for s in current_app.extensions["queuelog"]["schedules"].all() if not s.paused and s.next_fire_at
    ]
    return sorted(active, key=lambda s: s.next_fire_at)[:count]


def _chart(series: list[dict]) -> dict:
    """Coordinates of an SVG bar chart (drawn by the template, no script): completed and failed per minute.

    The SVG holds the bars only and is stretched to its frame; the template puts the labels beside and
    below it in HTML, so that they keep the page's font size on a phone. The time labels are six, one
    every tenth of the hour's minutes, each at the left edge of its bar (one sixth of the width apart),
    and the last minute's at the right end."""
    width, height = 600, 140
    peak = max([1] + [p["completed"] + p["failed"] for p in series])
    slot = width / len(series)
    bars = []
    for i, point in enumerate(series):
        h_done = height * point["completed"] / peak
        h_fail = height * point["failed"] / peak
        bars.append(
            {
                "x": round(i * slot, 1),
                "w": round(slot * 0.8, 1),
                "done_y": round(height - h_done, 1),
                "done_h": round(h_done, 1),
                "fail_y": round(height - h_done - h_fail, 1),
                "fail_h": round(h_fail, 1),
                **point,
            }
        )
    step = len(bars) // 6
    return {
        "width": width,
        "height": height,
        "peak": peak,
        "bars": bars,
        "ticks": [bars[i * step] for i in range(6)],
        "last": bars[-1],
        "total_completed": sum(p["completed"] for p in series),
        "total_failed": sum(p["failed"] for p in series),
    }


def _priority_choices() -> list[SelectChoice]:
    ceiling = principal().priority_ceiling
    return [SelectChoice(name, _(name)) for name, value in PRIORITIES.items() if value <= ceiling]


@bp.route("/submit", methods=["GET", "POST"])
@login_required
def submit():
    form = SubmitJobForm()
    enabled = [t for t in queue().types.all() if t.enabled]
    form.type.choices = [SelectChoice(t.name, t.name) for t in enabled]
    form.priority.choices = _priority_choices()
    if form.validate_on_submit():
        job = _enqueue_from_form(form)
        if job is not None:
            flash(_("Job %(id)s submitted.", id=job["id"]), "success")
            return redirect(url_for("web_jobs.job_page", job_id=job["id"]))
    status = 422 if request.method == "POST" else 200
    return render_template("jobs/submit.html", form=form, types=enabled), status


def _enqueue_from_form(form: SubmitJobForm) -> JobRecord | None:
    """Enqueue under the queue's own rules; put each refusal, in the page's language, beside its field."""
    try:
        payload = read_json(form.payload.data or "{}", "payload")
    except JobValidationError as exc:  # a number that would read as 0 (1e-400)
        form.payload.errors.append(refusal_text(exc))
        return None
    except ValueError as exc:
        form.payload.errors.append(_("Not valid JSON: %(reason)s", reason=str(exc)))
        return None
    except RecursionError:
        form.payload.errors.append(_("The JSON is nested too deeply."))
        return None
    run_at = None
    if form.run_at.data:
        zone = ZoneInfo(str(get_timezone()))
        try:
            run_at = form.run_at.data.replace(tzinfo=zone).astimezone(UTC)
        except (OverflowError, ValueError):  # e.g. 9999-12-31 west of UTC is past the last datetime
            form.run_at.errors.append(_("Enter a valid start time."))
            return None
    priority = PRIORITIES.get(form.priority.data)
    if priority is None:
        form.priority.errors.append(_("Choose one of the priorities offered."))
        return None
    try:
        spec = _job_spec(form, payload, priority, run_at)
        job, _created = queue().enqueue(current_user.username, spec)
        return job
    except QueueError as exc:
        name = form_field(exc)
        field = form[name] if name in form else form.payload
        field.errors.append(refusal_text(exc))
        return None


def _job_spec(form: SubmitJobForm, payload: Any, priority: int, run_at: datetime | None) -> JobSpec:
    """The job the form asks for, judged by the rules the API's shapes declare (queuelog/queue/inputs.py)."""
    config = current_app.config["QUEUELOG"]
    limits = {"max_bytes": config["MAX_PAYLOAD_BYTES"], "max_depth": config["MAX_PAYLOAD_DEPTH"]}
    payload_json = check_document(payload, "payload", **limits)
    principal().check_priority(priority)
    key = form.idempotency_key.data or None
    if key is not None:
        check_label(key, "idempotency_key", MAX_KEY_LENGTH)
    if run_at is not None:
        check_start_time(run_at, "run_at")
    return JobSpec(
        type=form.type.data,
        payload=payload,
        payload_json=payload_json,
        priority=priority,
        max_retries=form.max_retries.data,
        idempotency_key=key,
        run_at=run_at,
    )


@bp.get("/queue")
@login_required
def job_list():
    """The jobs list and its search (queuelog/web/search.py); admins choose rows for bulk actions here."""
    who = principal()
    parsed = parse_search(request.args, admin=who.sees_errors, username=who.name)
    before = ascii_int(request.args.get("before"))
    page, search = None, console()
    if not parsed.errors:
        page = search.search(parsed.search, before_id=before, limit=PAGE_SIZE)
    return render_template(
        "jobs/list.html",
        jobs=page.jobs if page else [],
        page=page,
        scan=search.scan,
        errors=parsed.errors,
        query=parsed.query,
        group=parsed.group,
        back=urlencode(parsed.query),
        statuses=STATUSES,
        priorities=list(PRIORITIES),
        # Translated once per page rather than once per row: a page has 50 rows.
        status_names={status: _(status) for status in STATUSES},
        priority_labels={name: _(name) for name in PRIORITIES},
        types=[t.name for t in queue().types.all()],
        first_page=before is None,
        priority_names=PRIORITY_NAMES,
    ), (422 if parsed.errors else 200)


@bp.get("/queue/<jobid:job_id>")
@login_required
def job_page(job_id: int):
    job = _visible_job(job_id)
    events = queue().events(job_id)
    return render_template(
        "jobs/detail.html",
        job=job,
        events=events,
        workflow=_workflow(job),
        form=ConfirmForm(),
        priority_names=PRIORITY_NAMES,
        refresh_seconds=JOB_PAGE_REFRESH_SECONDS,
    )


DEPENDENTS_SHOWN = 50  # dependents a job's page links; it says how many more there are


def _workflow(job: JobRecord) -> dict[str, Any]:
    """The job's place in a workflow (docs/batches.md): its batch, the jobs it waits for (those still
    unfinished among them), and the jobs that wait for it, which only its dependents count tells of."""
    depends_on = tuple(json.loads(job.depends_on)) if job.depends_on else ()
    waiting_on = frozenset(json.loads(job.waiting_on)) if job.waiting_on else frozenset()
    dependents: list[int] = []
    if job.dependents:
        dependents = queue().dependents(job.id, limit=DEPENDENTS_SHOWN)
    return {
        "batch_id": job.batch_id if job.batch_id is not None else job.callback_of,
        "callback": job.callback_of is not None,
        "depends_on": depends_on,
        "waiting_on": waiting_on,
        "dependents": dependents,
        "more_dependents": max(0, job.dependents - len(dependents)),
    }


@bp.post("/queue/<jobid:job_id>/cancel")
@login_required
def cancel(job_id: int):
    _visible_job(job_id)
    if ConfirmForm().validate_on_submit():
        who = principal()
        try:
            job = queue().cancel(job_id, who.name, owner=who.cancel_scope)
            if job.status == "running":  # docs/running-jobs.md
                flash(
                    _(
                        "Cancellation of job %(id)s requested: its worker stops it at its next check.",
                        id=job_id,
                    ),
                    "success",
                )
            else:
                flash(_("Job %(id)s cancelled.", id=job_id), "success")
        except QueueError as exc:
            if exc.code is Code.JOB_NOT_FOUND:
                abort(404)
            flash(refusal_text(exc), "error")
    return redirect(url_for("web_jobs.job_page", job_id=job_id))


@bp.post("/queue/<jobid:job_id>/retry")
@login_required
def retry(job_id: int):
    if not principal().may_retry_jobs:
        abort(403)
    _visible_job(job_id)
    if ConfirmForm().validate_on_submit():
        try:
            queue().retry(job_id, current_user.username)
            flash(_("Job %(id)s is pending again.", id=job_id), "success")
        except QueueError as exc:
            if exc.code is Code.JOB_NOT_FOUND:
                abort(404)
            flash(refusal_text(exc), "error")
    return redirect(url_for("web_jobs.job_page", job_id=job_id))
