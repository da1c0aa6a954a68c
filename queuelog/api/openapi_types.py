"""The job types' paths of ``/openapi.json`` (queuelog/api/types.py), beside those of openapi.py."""

from __future__ import annotations

from typing import Any

from queuelog.api import type_shapes
from queuelog.api.openapi import _json, _op, _problem, _schema

NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "minLength": 1, "maxLength": 64},
    "description": "The job type's name.",
}
JOB_TYPE = _json(
    "The job type, with its limits and the jobs of it running now", _schema(type_shapes.JOB_TYPE)
)
NOT_FOUND = _problem("No such job type")


def type_paths() -> dict[str, Any]:
    """The paths under /types (admins only; docs/flow-control.md)."""
    location = {"Location": {"description": "The job type's URL", "schema": {"type": "string"}}}
    return {
        "/types": {
            "get": _op(
                "List job types with their limits (admin)",
                {"200": _json("Every job type", _schema(type_shapes.JOB_TYPE_LIST))},
            ),
            "post": _op(
                "Add a job type (admin); audited",
                {
                    "201": _json("Created", _schema(type_shapes.JOB_TYPE), location),
                    "422": _problem("Invalid input (name, taken name, description, payload_schema)"),
                },
                type_shapes.TYPE_BODY,
            ),
        },
        "/types/{name}": {
            "get": _op("Read a job type (admin)", {"200": JOB_TYPE, "404": NOT_FOUND}, params=[NAME]),
            "patch": _op(
                "Change a job type: description, enabled, paused, concurrency_limit, rate_limit, "
                "rate_period; null removes a limit; a changed rate limit starts with a full bucket (admin); "
                "audited",
                {
                    "200": JOB_TYPE,
                    "404": NOT_FOUND,
                    "422": _problem("Invalid input; `errors` names each field (unknown fields too)"),
                },
                type_shapes.TYPE_PATCH,
                [NAME],
            ),
        },
    }
