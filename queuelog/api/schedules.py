"""Schedules for admins (docs/schedules.md): list, create, read, change, delete, and "run now". Paths are
under /schedules, apart from /jobs. Shapes are declared in schemas.py and answers.py."""

from __future__ import annotations

from typing import Any

from flask import current_app, g, url_for

from queuelog.api.answers import SCHEDULE, SCHEDULE_LIST
from queuelog.api.base import bp, job_json, json_response, requires
from queuelog.api.problems import ApiError, fields_named, refused
from queuelog.api.render import json_text_response
from queuelog.api.schedule_shapes import SCHEDULE_BODY, SCHEDULE_DEFAULTS, SCHEDULE_PATCH
from queuelog.api.schemas import EMPTY_BODY
from queuelog.api.shapes import entries
from queuelog.api.validation import read_body
from queuelog.models import Schedule
from queuelog.queue.errors import Code, QueueError, each_refusal
from queuelog.queue.schedules import Schedules, ScheduleValues

_SETTINGS = (
    "type",
    "payload",
    "priority",
    "max_retries",
    "cron",
    "interval_seconds",
    "timezone",
    "missed",
    "paused",
)


def schedules() -> Schedules:
    return current_app.extensions["queuelog"]["schedules"]


def schedule_json(schedule: Schedule) -> dict[str, Any]:
    """A schedule as answered, with its next five fire times."""
    record = {key: getattr(schedule, key) for key in SCHEDULE.fields if key != "upcoming"}
    record["upcoming"] = schedules().upcoming(schedule)
    if schedule.paused:
        record["next_fire_at"] = None
    return SCHEDULE.render(record)


def _values(name: str, given: dict[str, Any]) -> ScheduleValues:
    payload = given["payload"]
    return ScheduleValues(name=name, **{**given, "payload": getattr(payload, "value", payload)})


def _with_queue_checks(refusal: ApiError, values: ScheduleValues) -> ApiError:
    """A body's 422 with what the queue layer refuses among the fields it does not name yet: one answer
    names each bad field (docs/schedules.md), up to the bound of ``refused``. A refused cron or interval
    stands in for the rule that exactly one of them is given."""
    named = fields_named(refusal)
    timing_named = bool(named & {"cron", "interval_seconds"})
    try:
        schedules().check(values)
    except QueueError as exc:
        more = [
            entry
            for each in each_refusal(exc)
            if not (timing_named and each.code is Code.TIMING_NEEDED)
            for entry in entries(each)
            if entry["field"].split(".")[0] not in named
        ]
        return refused([*(refusal.errors or []), *more])
    return refusal


@bp.get("/schedules")
@requires("admin", to="manage schedules")
def list_schedules():
    """Manage schedules."""
    return json_response(SCHEDULE_LIST.render({"schedules": [schedule_json(s) for s in schedules().all()]}))


@bp.post("/schedules")
@requires("admin", to="manage schedules")
def create_schedule():
    """Manage schedules."""
    raw = read_body()
    try:
        body = SCHEDULE_BODY.parse(raw)
    except ApiError as refusal:  # name the fields the queue layer refuses too (cron, time zone, type ...)
        good = SCHEDULE_BODY.good_part(raw, refusal)
        given = {key: good.get(key, SCHEDULE_DEFAULTS.get(key)) for key in _SETTINGS}
        raise _with_queue_checks(refusal, _values(good.get("name", ""), given)) from None
    given = {key: body[key] if body[key] is not None else SCHEDULE_DEFAULTS.get(key) for key in _SETTINGS}
    schedule = schedules().add(_values(body["name"], given), g.principal.name)
    location = {"Location": url_for("api.get_schedule", name=schedule.name)}
    return json_response(schedule_json(schedule), 201, location)


@bp.get("/schedules/<name>")
@requires("admin", to="manage schedules")
def get_schedule(name: str):
    """Manage schedules."""
    return json_response(schedule_json(schedules().get(name)))


@bp.patch("/schedules/<name>")
@requires("admin", to="manage schedules")
def change_schedule(name: str):
    """Manage schedules."""
    raw = read_body()
    try:
        body = SCHEDULE_PATCH.parse(raw)
        refusal = None
    except ApiError as exc:
        body, refusal = SCHEDULE_PATCH.good_part(raw, exc), exc
    current = schedules().get(name)
    given = {key: getattr(current, key) for key in _SETTINGS}
    given.update({key: body[key] for key in _SETTINGS if key in raw and key in body})
    if "cron" in raw and "interval_seconds" not in raw:
        given["interval_seconds"] = None  # giving one kind of timing replaces the other
    elif "interval_seconds" in raw and "cron" not in raw:
        given["cron"] = None
    for key in ("type", "payload", "priority", "max_retries", "timezone", "missed", "paused"):
        if given[key] is None:  # null for a setting that always has a value: keep it
            given[key] = getattr(current, key)
    if refusal is not None:
        raise _with_queue_checks(refusal, _values(name, given))
    schedule = schedules().update(name, _values(name, given), g.principal.name)
    return json_response(schedule_json(schedule))


@bp.delete("/schedules/<name>")
@requires("admin", to="manage schedules")
def delete_schedule(name: str):
    """Manage schedules."""
    schedules().delete(name, g.principal.name)
    return current_app.response_class(status=204)


@bp.post("/schedules/<name>/run")
@requires("admin", to="manage schedules")
def run_schedule(name: str):
    """Manage schedules."""
    EMPTY_BODY.parse(read_body())
    job = schedules().run_now(name, g.principal.name)
    return json_text_response(
        job_json(job, g.principal), 201, {"Location": url_for("api.get_job", job_id=job.id)}
    )
