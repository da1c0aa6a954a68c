"""The admins' schedules page (docs/schedules.md): list, create, edit, pause and resume, "run now",
delete. A "Preview" submit shows the next five fire times before saving, without JavaScript."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user
from wtforms import SelectChoice

from queuelog.i18n import timezone_choices
from queuelog.models import PRIORITIES, PRIORITY_NAMES, Schedule
from queuelog.queue import JobValidationError, QueueError
from queuelog.queue.cron import Timing, zone
from queuelog.queue.errors import each_refusal
from queuelog.queue.inputs import check_document, read_json
from queuelog.queue.schedules import ScheduleNotFound, Schedules, ScheduleValues, timing_refusals
from queuelog.web.context import admin_required, queue
from queuelog.web.forms import ConfirmForm, ScheduleForm
from queuelog.web.refusals import form_field, refusal_text, show_beside_fields

bp = Blueprint("web_schedules", __name__, url_prefix="/admin")


def schedules() -> Schedules:
    return current_app.extensions["queuelog"]["schedules"]


def _fill_choices(form: ScheduleForm, current: str | None = None) -> None:
    types = [t.name for t in queue().types.all() if t.enabled or t.name == current]
    form.type.choices = [SelectChoice(name, name) for name in types]
    form.timezone.choices = [SelectChoice(z, z) for z in timezone_choices()]
    form.priority.choices = [SelectChoice(name, _(name)) for name in PRIORITIES]


def _payload(form: ScheduleForm) -> dict[str, Any] | None:
    """The payload, or None with a message beside it when it is not JSON or past the payload limits."""
    config = current_app.config["QUEUELOG"]
    try:
        payload = read_json(form.payload.data or "{}", "payload")
        check_document(
            payload, "payload", max_bytes=config["MAX_PAYLOAD_BYTES"], max_depth=config["MAX_PAYLOAD_DEPTH"]
        )
        return payload
    except JobValidationError as exc:
        show_beside_fields(form, [exc], form.payload)
    except ValueError as exc:
        form.payload.errors.append(_("Not valid JSON: %(reason)s", reason=str(exc)))
    except RecursionError:
        form.payload.errors.append(_("The JSON is nested too deeply."))
    return None


def _values(form: ScheduleForm, name: str, payload: Any) -> ScheduleValues:
    """The form's values as the queue layer takes them (the fields the form refused read as defaults, so
    that the queue layer still judges all the others)."""
    cron = (form.cron.data or "").strip() or None
    retries = form.max_retries.data if isinstance(form.max_retries.data, int) else 3
    return ScheduleValues(
        name, form.type.data or "", payload, PRIORITIES.get(form.priority.data, 0), retries,
        cron, form.interval_seconds.data, form.timezone.data or "", form.missed.data, form.paused.data,
    )  # fmt: skip


def _show_errors(form: ScheduleForm, refusals: Iterable[QueueError]) -> None:
    """Each refusal beside the field it names (the payload's if none of the form's), except beside a
    field that has a message already (the form's own, or "not valid JSON")."""
    marked = {f.name for f in form if f.errors}
    fresh = [r for r in refusals if (form_field(r) if form_field(r) in form else "payload") not in marked]
    show_beside_fields(form, fresh, form.payload)


def _preview(form: ScheduleForm) -> list[datetime] | None:
    """The next five fire times of the form's timing, or None with messages beside its fields."""
    cron = (form.cron.data or "").strip() or None
    refusals = timing_refusals(cron, form.interval_seconds.data, form.timezone.data or "")
    if refusals:
        _show_errors(form, list(refusals))
        return None
    return schedules().preview(Timing(cron, form.interval_seconds.data, form.timezone.data))


def _save(form: ScheduleForm, schedule: Schedule | None) -> bool:
    """Save the form's schedule, or put every refusal beside its field at once (those of the form, of the
    payload's JSON and of the queue layer) and save nothing."""
    valid = form.validate_on_submit()
    name = schedule.name if schedule else (form.name.data or "").strip()
    payload = _payload(form)
    values = _values(form, name, {} if payload is None else payload)
    try:
        if not valid or payload is None:
            schedules().check(values)  # for its refusals of the other fields only
            return False
        if schedule is None:
            schedules().add(values, current_user.username)
        else:
            schedules().update(name, values, current_user.username)
    except JobValidationError as exc:
        _show_errors(form, each_refusal(exc))
        return False
    flash(_("Schedule %(name)s saved.", name=name), "success")
    return True


def _edit(form: ScheduleForm, schedule: Schedule | None):
    """Handle the form's submit: preview, or save and go back to the list."""
    upcoming = None
    if request.method == "POST" and request.form.get("action") == "preview":
        if form.validate_on_submit():
            upcoming = _preview(form)
    elif request.method == "POST":
        if _save(form, schedule):
            return redirect(url_for("web_schedules.schedule_list"))
    elif schedule is not None:
        upcoming = schedules().upcoming(schedule)
    page = render_template(
        "admin/schedule_edit.html",
        form=form,
        schedule=schedule,
        upcoming=upcoming,
        zone=zone(form.timezone.data or "UTC"),
        fill_zone=schedule is None and request.method == "GET",
    )
    return page, (422 if form.errors else 200)


@bp.get("/schedules")
@admin_required
def schedule_list():
    return render_template(
        "admin/schedules.html",
        schedules=schedules().all(),
        priority_names=PRIORITY_NAMES,
        confirm=ConfirmForm(),
    )


@bp.route("/schedules/new", methods=["GET", "POST"])
@admin_required
def schedule_new():
    form = ScheduleForm()
    _fill_choices(form)
    return _edit(form, None)


@bp.route("/schedules/<name>", methods=["GET", "POST"])
@admin_required
def schedule_edit(name: str):
    try:
        schedule = schedules().get(name)
    except ScheduleNotFound:
        abort(404)
    form = ScheduleForm(obj=schedule if request.method == "GET" else None)
    _fill_choices(form, schedule.type)
    if request.method == "GET":
        form.payload.data = json.dumps(schedule.payload, indent=2, ensure_ascii=False)
        form.priority.data = PRIORITY_NAMES.get(schedule.priority, "low")
    form.name.data = name  # the name is fixed: it is the owner of the jobs the schedule made
    return _edit(form, schedule)


@bp.route("/schedules/<name>/delete", methods=["GET", "POST"])
@admin_required
def schedule_delete(name: str):
    """Delete a schedule after a confirmation, as bulk actions and revoking a key ask first."""
    try:
        schedules().get(name)
    except ScheduleNotFound:
        abort(404)
    form = ConfirmForm()
    if request.method == "POST" and form.validate_on_submit():
        try:
            schedules().delete(name, current_user.username)
        except ScheduleNotFound:
            abort(404)
        flash(_("Schedule %(name)s deleted.", name=name), "success")
        return redirect(url_for("web_schedules.schedule_list"))
    return render_template("admin/confirm_schedule_delete.html", name=name, form=form)


@bp.post("/schedules/<name>/<change>")
@admin_required
def schedule_change(name: str, change: str):
    actions: dict[str, Any] = {"pause": "pause", "resume": "resume", "run": "run_now"}
    if change not in actions:
        abort(404)
    if ConfirmForm().validate_on_submit():
        try:
            done = getattr(schedules(), actions[change])(name, current_user.username)
        except ScheduleNotFound:
            abort(404)
        except QueueError as exc:  # "run now" of a type disabled since; an edit racing a resume
            flash(refusal_text(exc), "error")
            return redirect(url_for("web_schedules.schedule_list"))
        if change == "run":
            flash(_("Job %(id)d enqueued.", id=done.id), "success")
        elif change == "pause":
            flash(_("Schedule %(name)s paused.", name=name), "success")
        else:
            flash(_("Schedule %(name)s resumed.", name=name), "success")
    return redirect(url_for("web_schedules.schedule_list"))
