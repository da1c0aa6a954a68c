"""Schedules for admins (docs/schedules.md): list, create, read, change, delete, and "run now". Paths are
under /schedules, apart from /jobs. Their requests and answers are declared here, beside the operations
(registry.py)."""

from __future__ import annotations

from typing import Any

from flask import current_app, g, url_for

from queuelog.api.answers import JOB, moment, priority_name, rfc3339
from queuelog.api.base import job_json, json_response
from queuelog.api.fields import answer, array, boolean, choice, document, integer, priority, text
from queuelog.api.problems import ApiError, fields_named, refused
from queuelog.api.registry import (
    EMPTY_BODY,
    json_answer,
    location,
    operation,
    path_parameter,
    problem,
)
from queuelog.api.render import json_text_response
from queuelog.api.shapes import Shape, entries
from queuelog.models import PRIORITY_NAMES, Schedule
from queuelog.queue.cron import MAX_INTERVAL_SECONDS
from queuelog.queue.errors import Code, QueueError, each_refusal
from queuelog.queue.inputs import DEFAULT_MAX_RETRIES, MAX_CRON_LENGTH, MAX_RETRIES_LIMIT
from queuelog.queue.schedules import MISSED_POLICIES, Schedules, ScheduleValues

_SCHEDULE_FIELDS = {
    "type": text(64, "The job type of the jobs it makes: an enabled type of the allowlist (else 422)."),
    "payload": document("The jobs' payload; it must match the type's JSON Schema, if any (else 422)."),
    "priority": priority("The jobs' priority."),
    "max_retries": integer(0, MAX_RETRIES_LIMIT, "The jobs' max_retries."),
    "cron": text(
        MAX_CRON_LENGTH,
        "Five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, "
        "@yearly, in `timezone`. Exactly one of cron and interval_seconds.",
        nullable=True,
    ),
    "interval_seconds": integer(1, MAX_INTERVAL_SECONDS, "A fixed interval instead of cron.", nullable=True),
    "timezone": text(
        64,
        "The zone of a place for cron: an IANA Area/Location name (e.g. Europe/Berlin) or UTC; not "
        "localtime, Etc/... or EST (else 422). Daylight saving time is followed.",
    ),
    "missed": choice(
        MISSED_POLICIES, "After downtime: fire_once makes one job for the missed slots, skip none."
    ),
    "paused": boolean("A paused schedule makes no jobs; slots passed while paused never fire."),
}
SCHEDULE_BODY = Shape(
    "ScheduleBody",
    "A new schedule (POST /schedules).",
    {
        "name": text(55, "1 to 55 letters, digits, '_', '.' or '-', starting with a letter or digit."),
        **_SCHEDULE_FIELDS,
    },
    required=("name", "type"),
)
SCHEDULE_DEFAULTS = {
    "payload": {},
    "priority": 0,
    "max_retries": DEFAULT_MAX_RETRIES,
    "timezone": "UTC",
    "missed": "fire_once",
    "paused": False,
}
SCHEDULE_PATCH = Shape(
    "SchedulePatch",
    "The settings to change (PATCH /schedules/{name}); the others stay. Giving cron clears "
    "interval_seconds and the other way round. The next fire time is worked out anew.",
    _SCHEDULE_FIELDS,
    partial=True,
)

SCHEDULE = Shape(
    "Schedule",
    "A schedule (docs/schedules.md). Its jobs' owner is schedule:<name>. Times are RFC 3339 UTC with Z.",
    {
        "name": answer({"type": "string"}),
        "type": answer({"type": "string"}),
        "payload": answer({"type": "object"}),
        "priority": answer({"type": "string", "enum": list(PRIORITY_NAMES.values())}, out=priority_name),
        "max_retries": answer({"type": "integer"}),
        "cron": answer({"type": ["string", "null"]}),
        "interval_seconds": answer({"type": ["integer", "null"]}),
        "timezone": answer({"type": "string"}),
        "missed": answer({"type": "string", "enum": ["fire_once", "skip"]}),
        "paused": answer({"type": "boolean"}),
        "next_fire_at": moment("The next slot (null while paused)."),
        "last_fire_at": moment("The last slot that made a job."),
        "upcoming": answer(
            {"type": "array", "items": {"type": "string", "format": "date-time"}},
            "The next five fire times (none while paused).",
            lambda times: [rfc3339(t) for t in times],
        ),
        "created_by": answer({"type": "string"}),
        "created_at": moment(),
        "updated_at": moment(),
    },
    required=("name", "type", "payload", "priority", "cron", "interval_seconds", "timezone", "paused"),
    closed=False,
)
SCHEDULE_LIST = Shape(
    "ScheduleList",
    "Every schedule, by name.",
    {"schedules": array(SCHEDULE)},
    required=("schedules",),
    closed=False,
)

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


NAME = path_parameter("name", "The schedule's name.", {"type": "string", "minLength": 1, "maxLength": 55})
SCHEDULE_ANSWER = json_answer("The schedule", SCHEDULE)
NOT_FOUND = problem("No such schedule")


@operation(
    "GET",
    "/schedules",
    who=("admin",),
    to="manage schedules",
    summary="List schedules (admin)",
    answers={"200": json_answer("Every schedule", SCHEDULE_LIST)},
)
def list_schedules():
    return json_response(SCHEDULE_LIST.render({"schedules": [schedule_json(s) for s in schedules().all()]}))


def _create_refused(refusal: ApiError, raw: dict[str, Any]) -> ApiError:
    """Name the fields the queue layer refuses too (cron, time zone, type ...)."""
    good = SCHEDULE_BODY.good_part(raw, refusal)
    given = {key: good.get(key, SCHEDULE_DEFAULTS.get(key)) for key in _SETTINGS}
    return _with_queue_checks(refusal, _values(good.get("name", ""), given))


@operation(
    "POST",
    "/schedules",
    who=("admin",),
    to="manage schedules",
    summary="Create a schedule (admin)",
    body=SCHEDULE_BODY,
    answers={
        "201": json_answer("Created", SCHEDULE, location("schedule")),
        "422": problem("Invalid input (cron, interval_seconds, timezone, type, payload, name)"),
    },
    refused=_create_refused,
)
def create_schedule(body: dict[str, Any]):
    given = {key: body[key] if body[key] is not None else SCHEDULE_DEFAULTS.get(key) for key in _SETTINGS}
    schedule = schedules().add(_values(body["name"], given), g.principal.name)
    location = {"Location": url_for("api.get_schedule", name=schedule.name)}
    return json_response(schedule_json(schedule), 201, location)


@operation(
    "GET",
    "/schedules/<name>",
    who=("admin",),
    to="manage schedules",
    summary="Read a schedule, with its next five fire times (admin)",
    params=(NAME,),
    answers={"200": SCHEDULE_ANSWER, "404": NOT_FOUND},
)
def get_schedule(name: str):
    return json_response(schedule_json(schedules().get(name)))


def _patched(name: str, body: dict[str, Any], given_keys: Any) -> ScheduleValues:
    """The schedule's settings with the patch's (``body``: its valid fields; ``given_keys``: all it
    gave) in place."""
    current = schedules().get(name)
    given = {key: getattr(current, key) for key in _SETTINGS}
    given.update({key: body[key] for key in _SETTINGS if key in given_keys and key in body})
    if "cron" in given_keys and "interval_seconds" not in given_keys:
        given["interval_seconds"] = None  # giving one kind of timing replaces the other
    elif "interval_seconds" in given_keys and "cron" not in given_keys:
        given["cron"] = None
    for key in ("type", "payload", "priority", "max_retries", "timezone", "missed", "paused"):
        if given[key] is None:  # null for a setting that always has a value: keep it
            given[key] = getattr(current, key)
    return _values(name, given)


def _change_refused(refusal: ApiError, raw: dict[str, Any], name: str) -> ApiError:
    return _with_queue_checks(refusal, _patched(name, SCHEDULE_PATCH.good_part(raw, refusal), raw))


@operation(
    "PATCH",
    "/schedules/<name>",
    who=("admin",),
    to="manage schedules",
    summary="Change a schedule; pause or resume it with paused (admin)",
    body=SCHEDULE_PATCH,
    params=(NAME,),
    answers={"200": SCHEDULE_ANSWER, "404": NOT_FOUND},
    refused=_change_refused,
)
def change_schedule(name: str, body: dict[str, Any]):
    schedule = schedules().update(name, _patched(name, body, body), g.principal.name)
    return json_response(schedule_json(schedule))


@operation(
    "DELETE",
    "/schedules/<name>",
    who=("admin",),
    to="manage schedules",
    summary="Delete a schedule; its jobs stay (admin)",
    params=(NAME,),
    answers={"204": {"description": "Deleted"}, "404": NOT_FOUND},
)
def delete_schedule(name: str):
    schedules().delete(name, g.principal.name)
    return current_app.response_class(status=204)


@operation(
    "POST",
    "/schedules/<name>/run",
    who=("admin",),
    to="manage schedules",
    summary="Enqueue one job of the schedule now; its timing stays (admin)",
    body=EMPTY_BODY,
    params=(NAME,),
    answers={
        "201": json_answer("The job", JOB),
        "404": NOT_FOUND,
        "422": problem("The job type is disabled, or the payload no longer fits its schema"),
    },
)
def run_schedule(name: str, body: dict[str, Any]):
    job = schedules().run_now(name, g.principal.name)
    return json_text_response(
        job_json(job, g.principal), 201, {"Location": url_for("api.get_job", job_id=job.id)}
    )
