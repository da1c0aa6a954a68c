"""The schedules' paths of ``/openapi.json`` (queuelog/api/schedules.py), beside those of openapi.py."""

from __future__ import annotations

from typing import Any

from queuelog.api import answers, schedule_shapes, schemas
from queuelog.api.openapi import JOB, _json, _op, _problem, _schema

NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 55},
    "description": "The schedule's name.",
}
SCHEDULE = _json("The schedule", _schema(answers.SCHEDULE))
NOT_FOUND = _problem("No such schedule")


def schedule_paths() -> dict[str, Any]:
    """The paths under /schedules (admins only)."""
    location = {"Location": {"description": "The schedule's URL", "schema": {"type": "string"}}}
    return {
        "/schedules": {
            "get": _op(
                "List schedules (admin)", {"200": _json("Every schedule", _schema(answers.SCHEDULE_LIST))}
            ),
            "post": _op(
                "Create a schedule (admin)",
                {
                    "201": _json("Created", _schema(answers.SCHEDULE), location),
                    "422": _problem("Invalid input (cron, interval_seconds, timezone, type, payload, name)"),
                },
                schedule_shapes.SCHEDULE_BODY,
            ),
        },
        "/schedules/{name}": {
            "get": _op(
                "Read a schedule, with its next five fire times (admin)",
                {"200": SCHEDULE, "404": NOT_FOUND},
                params=[NAME],
            ),
            "patch": _op(
                "Change a schedule; pause or resume it with paused (admin)",
                {"200": SCHEDULE, "404": NOT_FOUND},
                schedule_shapes.SCHEDULE_PATCH,
                [NAME],
            ),
            "delete": _op(
                "Delete a schedule; its jobs stay (admin)",
                {"204": {"description": "Deleted"}, "404": NOT_FOUND},
                params=[NAME],
            ),
        },
        "/schedules/{name}/run": {
            "post": _op(
                "Enqueue one job of the schedule now; its timing stays (admin)",
                {
                    "201": JOB,
                    "404": NOT_FOUND,
                    "422": _problem("The job type is disabled, or the payload no longer fits its schema"),
                },
                schemas.EMPTY_BODY,
                [NAME],
                required=False,
            ),
        },
    }
