"""The job types' requests and answers (admins; docs/flow-control.md), declared once beside ``schemas.py``
and ``answers.py``: the views in ``types.py`` validate and render with them, ``openapi_types.py`` serves
them in ``/openapi.json``."""

from __future__ import annotations

from typing import Any

from queuelog.api.answers import rfc3339
from queuelog.api.fields import answer, array, boolean, integer
from queuelog.api.problems import invalid
from queuelog.api.shapes import Field, Shape
from queuelog.inputs import text_problem
from queuelog.queue.limits import DEFAULT_PERIOD, MAX_CONCURRENCY, MAX_PERIOD, MAX_RATE
from queuelog.queue.types import (
    MAX_DESCRIPTION,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_VISITS,
    NAME_PATTERN,
)


def _storable(value: str, path: str) -> str:
    problem = text_problem(value)
    if problem:
        raise invalid(path, problem)
    return value


DESCRIPTION = Field(
    {
        "type": "string",
        "maxLength": MAX_DESCRIPTION,
        "description": "What jobs of this type do, shown on the pages (line breaks allowed); no \\u0000 or "
        "lone surrogates.",
    },
    f"must be a string of at most {MAX_DESCRIPTION} characters",
    check=_storable,
)
_LIMITS: dict[str, Field] = {
    "concurrency_limit": integer(
        1,
        MAX_CONCURRENCY,
        "At most this many jobs of the type running at once, across every worker and server; null "
        "removes the limit. Jobs past it stay pending and wait.",
        nullable=True,
    ),
    "rate_limit": integer(
        1,
        MAX_RATE,
        "This many claims per rate_period on average, at most this many at once (a token bucket: the "
        "period after a quiet spell may see up to twice as many, less one); null removes the limit, and "
        "its period. Changing it starts again with a full bucket.",
        nullable=True,
    ),
    "rate_period": integer(
        1,
        MAX_PERIOD,
        f"The rate limit's period in seconds: the type's period, else {DEFAULT_PERIOD}, when a rate limit "
        f"is given without one; null is {DEFAULT_PERIOD}. Not kept without a rate limit.",
        nullable=True,
    ),
}
TYPE_PATCH = Shape(
    "JobTypePatch",
    "The settings of a job type to change (PATCH /types/{name}); the others stay.",
    {
        "description": DESCRIPTION,
        "enabled": boolean("A disabled type refuses new jobs."),
        "paused": boolean("A paused type's jobs are accepted but not claimed until it is resumed."),
        **_LIMITS,
    },
)
TYPE_BODY = Shape(
    "JobTypeBody",
    "A new job type (POST /types): enabled, not paused, without limits.",
    {
        "name": Field(
            {
                "type": "string",
                "pattern": NAME_PATTERN,
                "description": "1 to 64 letters, digits, '_', '.', "
                "':' or '-', starting with a letter or digit; fixed once jobs use it.",
            },
            "must be 1 to 64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit",
        ),  # fmt: skip
        "description": DESCRIPTION,
        "payload_schema": Field(
            {
                "type": ["object", "null"],
                "description": "A JSON Schema the payloads must match; it may refer only to parts of "
                f"itself (#...), at most {MAX_SCHEMA_DEPTH} levels deep and {MAX_SCHEMA_BYTES // 1024} KiB "
                f"long. One value of a payload may be checked against at most {MAX_SCHEMA_VISITS} of its "
                "subschemas (counted through $ref, allOf, anyOf, oneOf, "
                "not, if/then/else), and its patterns may not use lookaround or backreferences: they are "
                "matched in time linear in the text.",
            },
            "must be a JSON object or null",
        ),
    },
    required=("name",),
)
REQUESTS = (TYPE_PATCH, TYPE_BODY)


def _time(description: str | None = None) -> Field:
    return answer({"type": ["string", "null"], "format": "date-time"}, description, rfc3339)


def _count(description: str) -> Field:
    return answer({"type": ["integer", "null"]}, description)


JOB_TYPE = Shape(
    "JobType",
    "A job type of the allowlist with its flow control (docs/flow-control.md). Times are RFC 3339 UTC.",
    {
        "name": answer({"type": "string"}),
        "description": answer({"type": "string"}),
        "enabled": answer({"type": "boolean"}, "Whether new jobs of the type are accepted."),
        "paused": answer({"type": "boolean"}, "Whether its jobs wait unclaimed."),
        "payload_schema": answer({"type": ["object", "null"]}, "The payloads' JSON Schema, if any."),
        "concurrency_limit": _count("At most this many running at once; null: no limit."),
        "rate_limit": _count("This many claims per rate_period on average (a token bucket); null: no limit."),
        "rate_period": _count("The rate limit's period in seconds; null without a rate limit."),
        "running": answer({"type": "integer"}, "Jobs of the type running now."),
        "created_at": _time(),
        "updated_at": _time(),
    },
    required=("name", "enabled", "paused", "concurrency_limit", "rate_limit", "rate_period", "running"),
    closed=False,
)
JOB_TYPE_LIST = Shape(
    "JobTypeList", "Every job type, by name.", {"types": array(JOB_TYPE)}, required=("types",), closed=False
)


def type_record(job_type: Any, running: int) -> dict[str, Any]:
    """A job type (the model) and its running count as ``JOB_TYPE`` renders them."""
    record = {key: getattr(job_type, key) for key in JOB_TYPE.fields if key != "running"}
    record["description"] = record["description"] or ""
    record["running"] = running
    return record
