"""Pages for everyone logged in: the dashboard, submitting jobs, lists of jobs and a job's page."""

from __future__ import annotations

import json
from datetime import UTC
from zoneinfo import ZoneInfo

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import get_timezone
from flask_babel import gettext as _
from flask_login import current_user, login_required
from wtforms import SelectChoice

from queuelog.api.problems import ApiError
from queuelog.api.validation import parse_job
from queuelog.auth import PRODUCER_MAX_PRIORITY
from queuelog.inputs import ascii_int
from queuelog.models import PRIORITIES, PRIORITY_NAMES, STATUSES
from queuelog.queue import IdempotencyKeyReused, InvalidState, JobNotFound, JobValidationError
from queuelog.queue.stats import QueueStats
from queuelog.web import queue
from queuelog.web.forms import ConfirmForm, SubmitJobForm

bp = Blueprint("web_jobs", __name__)
JOB_PAGE_REFRESH_SECONDS = 5  # how often the page of a pending or running job reloads itself
PAGE_SIZE = 50


def _owner_scope() -> str | None:
    """Admins see every job; producers only their own."""
    return None if current_user.is_admin else current_user.username


def _visible_job(job_id: int) -> dict:
    job = queue().get(job_id)
    if job is None or (not current_user.is_admin and job["owner"] != current_user.username):
        abort(404)
    return job


@bp.get("/")
@login_required
def dashboard():
    overview = QueueStats(queue()).overview(owner=_owner_scope())
    return render_template("jobs/dashboard.html", overview=overview, chart=_chart(overview["throughput"]))


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
    ceiling = 30 if current_user.is_admin else PRODUCER_MAX_PRIORITY
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


def _enqueue_from_form(form: SubmitJobForm) -> dict | None:
    """Enqueue through the same validation as the API; put each problem beside its field."""
    try:
        payload = json.loads(form.payload.data or "{}")
    except ValueError as exc:
        form.payload.errors.append(_("Not valid JSON: %(reason)s", reason=str(exc)))
        return None
    except RecursionError:
        form.payload.errors.append(_("The JSON is nested too deeply."))
        return None
    body = {
        "type": form.type.data,
        "payload": payload,
        "priority": form.priority.data,
        "max_retries": form.max_retries.data,
    }
    if form.idempotency_key.data:
        body["idempotency_key"] = form.idempotency_key.data
    if form.run_at.data:
        zone = ZoneInfo(str(get_timezone()))
        try:
            body["run_at"] = form.run_at.data.replace(tzinfo=zone).astimezone(UTC).isoformat()
        except (OverflowError, ValueError):  # e.g. 9999-12-31 west of UTC is past the last datetime
            form.run_at.errors.append(_("Enter a valid start time."))
            return None
    try:
        spec = parse_job(body)
        job, _created = queue().enqueue(current_user.username, spec)
        return job
    except ApiError as exc:
        errors = exc.errors or [{"field": "payload", "message": exc.detail}]
    except JobValidationError as exc:
        errors = exc.errors
    except IdempotencyKeyReused as exc:
        errors = [{"field": "idempotency_key", "message": exc.detail}]
    for error in errors:
        name = error["field"].split(".")[0].split("[")[0]
        field = getattr(form, name, form.payload)
        field.errors.append(_form_message(error))
    return None


def _form_message(error: dict) -> str:
    """The API's (English) validation messages, said in the page's language."""
    field, message = error["field"], error["message"]
    if field == "payload" and "JSON object" in message:
        return _("The payload must be a JSON object.")
    if field == "payload" and ("bytes" in message or "deep" in message):
        return _("The payload is too large or nested too deeply.")
    if field.startswith("payload"):
        return _("%(path)s does not match the job type's schema: %(message)s", path=field, message=message)
    if field == "type":
        return _("This job type is unknown or disabled.")
    if field == "idempotency_key" and "already used" in message:
        return _("This idempotency key was already used with other parameters.")
    if field == "run_at":
        return _("Enter a valid start time.")
    return message


@bp.get("/queue")
@login_required
def job_list():
    args = request.args
    filters = {}
    if args.get("status") in STATUSES:
        filters["status"] = args["status"]
    if args.get("priority") in PRIORITIES:
        filters["priority"] = PRIORITIES[args["priority"]]
    if args.get("type"):
        filters["type"] = args["type"][:64]
    before = ascii_int(args.get("before"))
    jobs = queue().list_jobs(owner=_owner_scope(), before_id=before, limit=PAGE_SIZE + 1, **filters)
    older = jobs[PAGE_SIZE - 1]["id"] if len(jobs) > PAGE_SIZE else None
    query = {k: v for k, v in args.items() if k in ("status", "priority", "type") and v}
    return render_template(
        "jobs/list.html",
        jobs=jobs[:PAGE_SIZE],
        older=older,
        query=query,
        statuses=STATUSES,
        priorities=list(PRIORITIES),
        types=[t.name for t in queue().types.all()],
        first_page=before is None,
        priority_names=PRIORITY_NAMES,
    )


@bp.get("/queue/<jobid:job_id>")
@login_required
def job_page(job_id: int):
    job = _visible_job(job_id)
    events = queue().events(job_id)
    return render_template(
        "jobs/detail.html",
        job=job,
        events=events,
        form=ConfirmForm(),
        priority_names=PRIORITY_NAMES,
        refresh_seconds=JOB_PAGE_REFRESH_SECONDS,
    )


@bp.post("/queue/<jobid:job_id>/cancel")
@login_required
def cancel(job_id: int):
    _visible_job(job_id)
    if ConfirmForm().validate_on_submit():
        try:
            job = queue().cancel(job_id, current_user.username, owner=_owner_scope())
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
        except InvalidState:
            flash(_("Only pending or running jobs can be cancelled."), "error")
        except JobNotFound:
            abort(404)
    return redirect(url_for("web_jobs.job_page", job_id=job_id))


@bp.post("/queue/<jobid:job_id>/retry")
@login_required
def retry(job_id: int):
    if not current_user.is_admin:
        abort(403)
    _visible_job(job_id)
    if ConfirmForm().validate_on_submit():
        try:
            queue().retry(job_id, current_user.username)
            flash(_("Job %(id)s is pending again.", id=job_id), "success")
        except InvalidState:
            flash(_("Only failed or cancelled jobs can be retried."), "error")
    return redirect(url_for("web_jobs.job_page", job_id=job_id))
