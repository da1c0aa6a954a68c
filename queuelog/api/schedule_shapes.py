"""The schedules' request shapes (admins; docs/schedules.md): one declaration each, from which the API
validates the body and /openapi.json documents it (api/shapes.py), like the jobs' in schemas.py."""

from __future__ import annotations

from queuelog.api.fields import boolean, choice, document, integer, priority, text
from queuelog.api.schemas import MAX_RETRIES_LIMIT
from queuelog.api.shapes import Shape
from queuelog.queue.cron import MAX_INTERVAL_SECONDS
from queuelog.queue.schedules import MISSED_POLICIES

_SCHEDULE_FIELDS = {
    "type": text(64, "The job type of the jobs it makes: an enabled type of the allowlist (else 422)."),
    "payload": document("The jobs' payload; it must match the type's JSON Schema, if any (else 422)."),
    "priority": priority("The jobs' priority."),
    "max_retries": integer(0, MAX_RETRIES_LIMIT, "The jobs' max_retries."),
    "cron": text(
        255,
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
    "max_retries": 3,
    "timezone": "UTC",
    "missed": "fire_once",
    "paused": False,
}
SCHEDULE_PATCH = Shape(
    "SchedulePatch",
    "The settings to change (PATCH /schedules/{name}); the others stay. Giving cron clears "
    "interval_seconds and the other way round. The next fire time is worked out anew.",
    _SCHEDULE_FIELDS,
)

REQUESTS = (SCHEDULE_BODY, SCHEDULE_PATCH)
