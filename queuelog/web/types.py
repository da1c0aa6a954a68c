"""The job types' admin pages (on the admin blueprint): the list with each type's running jobs and limits,
adding a type, editing its description, schema and flow control (docs/flow-control.md), and enabling,
disabling, pausing and resuming it. The dashboard's "Flow control" panel is drawn from ``flow_rows``."""

from __future__ import annotations

import json
import re
from typing import Any

from flask import abort, flash, redirect, render_template, request, url_for
from flask_babel import format_decimal
from flask_babel import gettext as _
from flask_login import current_user

from queuelog.queue import QueueError
from queuelog.queue.errors import each_refusal
from queuelog.queue.limits import DEFAULT_PERIOD, LIMIT_FIELDS, is_limited, running_by_type
from queuelog.queue.types import SchemaRefused, schema_too_deep
from queuelog.web.admin import bp
from queuelog.web.context import admin_required, queue
from queuelog.web.forms import ConfirmForm, JobTypeEditForm, JobTypeForm
from queuelog.web.refusals import refusal_text, show_beside_fields

_WHOLE = re.compile(r"^-?[0-9]{1,12}$")


def rate_words(rate: int | None, period: int | None) -> str:
    """A rate limit in the page's language: "100 per minute", "10 per 30 seconds"; "—" without one."""
    if rate is None:
        return "—"
    count, period = format_decimal(rate), period or DEFAULT_PERIOD
    named = {1: _("%(count)s per second", count=count), 60: _("%(count)s per minute", count=count)}
    named |= {3600: _("%(count)s per hour", count=count), 86400: _("%(count)s per day", count=count)}
    if period in named:
        return named[period]
    if period % 3600 == 0:
        return _("%(count)s per %(hours)s hours", count=count, hours=format_decimal(period // 3600))
    if period % 60 == 0:
        return _("%(count)s per %(minutes)s minutes", count=count, minutes=format_decimal(period // 60))
    return _("%(count)s per %(seconds)s seconds", count=count, seconds=format_decimal(period))


def running_text(running: int, limit: int | None) -> str:
    """ "2 / 5": jobs running now of the concurrency limit; the count alone without one."""
    return (
        format_decimal(running) if limit is None else f"{format_decimal(running)} / {format_decimal(limit)}"
    )


def flow_rows(running: dict[str, int]) -> list[dict[str, Any]]:
    """The limited types, by name, with their ``running`` jobs: the dashboard's "Flow control" (admins)."""
    limited = [t for t in queue().types.all() if is_limited(t)]
    return [
        {
            "name": t.name,
            "running": running_text(running.get(t.name, 0), t.concurrency_limit),
            "rate": rate_words(t.rate_limit, t.rate_period),
            "paused": t.paused,
        }
        for t in limited
    ]


def _schema_from(form: JobTypeForm):
    """The schema typed in the form, parsed (None when empty), and whether it parsed; the queue layer
    checks it (``check_schema``)."""
    data = form.payload_schema.data
    if not isinstance(data, str):  # a post without the field: the form holds the stored schema, kept as it is
        return data, True
    text = data.strip()
    if not text:
        return None, True
    try:
        return json.loads(text), True
    except ValueError as exc:
        form.payload_schema.errors.append(_("Not valid JSON: %(reason)s", reason=str(exc)))
    except RecursionError:  # deeper than the JSON parser goes: far past the depth limit
        form.payload_schema.errors.append(refusal_text(schema_too_deep()))
    return None, False


@bp.route("/types", methods=["GET", "POST"])
@admin_required
def types():
    form = JobTypeForm()
    if form.validate_on_submit():
        name = form.name.data.strip()
        schema, ok = _schema_from(form)
        if ok:
            try:
                queue().types.create(name, current_user.username, form.description.data or "", schema)
            except (QueueError, SchemaRefused) as exc:
                show_beside_fields(form, each_refusal(exc), form.name)
            else:
                flash(_("Job type %(name)s added.", name=name), "success")
                return redirect(url_for("web_admin.types"))
    all_types = queue().types.all()
    running = running_by_type(queue().engine)
    rows = [
        (
            t,
            running_text(running.get(t.name, 0), t.concurrency_limit),
            rate_words(t.rate_limit, t.rate_period),
        )
        for t in all_types
    ]
    return render_template("admin/types.html", form=form, rows=rows, confirm=ConfirmForm()), (
        422 if form.errors else 200
    )


def _limit_value(value: Any) -> Any:
    """A limit as typed: None when empty, an integer when it is one, else the text itself, which the queue
    layer refuses as not a whole number (beside the field). A form without the field keeps the type's."""
    text = "" if value is None else str(value).strip()
    if not text:
        return None
    return int(text) if _WHOLE.match(text) else text


@bp.route("/types/<path:name>", methods=["GET", "POST"])
@admin_required
def type_edit(name: str):
    try:
        job_type = queue().types.get(name)
    except LookupError:
        abort(404)
    form = JobTypeEditForm(obj=job_type)
    if request.method == "GET":
        form.payload_schema.data = (
            json.dumps(job_type.payload_schema, indent=2) if job_type.payload_schema else ""
        )
        for key in LIMIT_FIELDS:
            value = getattr(job_type, key)
            getattr(form, key).data = "" if value is None else str(value)
    form.name.data = name  # the name is fixed once jobs use it
    if form.validate_on_submit():
        schema, ok = _schema_from(form)
        if ok:
            limits = {key: _limit_value(getattr(form, key).data) for key in LIMIT_FIELDS}
            try:
                queue().types.change(
                    name,
                    current_user.username,
                    description=form.description.data or "",
                    payload_schema=schema,
                    **limits,
                )
            except LookupError:
                abort(404)
            except (QueueError, SchemaRefused) as exc:
                show_beside_fields(form, each_refusal(exc), form.name)
            else:
                flash(_("Job type %(name)s saved.", name=name), "success")
                return redirect(url_for("web_admin.types"))
    return render_template("admin/type_edit.html", form=form, job_type=job_type), (
        422 if form.errors else 200
    )


@bp.post("/types/<path:name>/<change>")
@admin_required
def type_change(name: str, change: str):
    settings = {
        "enable": {"enabled": True},
        "disable": {"enabled": False},
        "pause": {"paused": True},
        "resume": {"paused": False},
    }
    if change not in settings:
        abort(404)
    if ConfirmForm().validate_on_submit():
        try:
            queue().types.change(name, current_user.username, action=f"type.{change}", **settings[change])
        except LookupError:
            abort(404)
        flash(_("Job type %(name)s updated.", name=name), "success")
    return redirect(url_for("web_admin.types"))
