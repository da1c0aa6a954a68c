"""Job types for admins (docs/flow-control.md): list, read, add, and change their settings and limits.
Paths are under /types (the pages' are under /admin/types). Their requests and answers are declared here,
beside the operations (registry.py); every change goes through the queue layer, which checks the limits
and writes the audit row."""

from __future__ import annotations

from typing import Any

from flask import g, url_for

from queuelog.api.answers import moment
from queuelog.api.base import json_response, queue
from queuelog.api.fields import answer, array, boolean, integer
from queuelog.api.problems import invalid
from queuelog.api.registry import json_answer, location, operation, path_parameter, problem
from queuelog.api.shapes import Field, Shape
from queuelog.inputs import text_problem
from queuelog.models import JobType
from queuelog.queue.limits import DEFAULT_PERIOD, MAX_CONCURRENCY, MAX_PERIOD, MAX_RATE, running_by_type
from queuelog.queue.types import (
    MAX_DESCRIPTION,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_VISITS,
    NAME_PATTERN,
    SchemaRefused,
    check_schema,
)


def _usable_schema(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The queue layer's check of a payload schema, made with the body's other checks: one 422 names a bad
    schema beside a bad name (the queue layer checks it again when it saves the type)."""
    problem = check_schema(schema)
    if problem is not None:
        raise invalid(path, str(problem))
    return schema


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
    partial=True,
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
            check=_usable_schema,
        ),
    },
    required=("name",),
)


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
        "created_at": moment(),
        "updated_at": moment(),
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


NAME = path_parameter("name", "The job type's name.", {"type": "string", "minLength": 1, "maxLength": 64})
JOB_TYPE_ANSWER = json_answer("The job type, with its limits and the jobs of it running now", JOB_TYPE)
NOT_FOUND = problem("No such job type")


def type_json(job_type: JobType, running: dict[str, int] | None = None) -> dict:
    if running is None:
        running = running_by_type(queue().engine)
    return JOB_TYPE.render(type_record(job_type, running.get(job_type.name, 0)))


@operation(
    "GET",
    "/types",
    who=("admin",),
    to="manage job types",
    summary="List job types with their limits (admin)",
    answers={"200": json_answer("Every job type", JOB_TYPE_LIST)},
)
def list_types():
    running = running_by_type(queue().engine)
    return json_response(
        JOB_TYPE_LIST.render({"types": [type_json(t, running) for t in queue().types.all()]})
    )


@operation(
    "POST",
    "/types",
    who=("admin",),
    to="manage job types",
    summary="Add a job type (admin); audited",
    body=TYPE_BODY,
    answers={
        "201": json_answer("Created", JOB_TYPE, location("job type")),
        "422": problem("Invalid input (name, taken name, description, payload_schema)"),
    },
)
def create_type(body: dict[str, Any]):
    try:
        job_type = queue().types.create(
            body["name"], g.principal.name, body["description"] or "", body["payload_schema"]
        )
    except SchemaRefused as problem:
        raise invalid("payload_schema", str(problem)) from None
    location = {"Location": url_for("api.get_type", name=job_type.name)}
    return json_response(type_json(job_type, {}), 201, location)


@operation(
    "GET",
    "/types/<path:name>",
    who=("admin",),
    to="manage job types",
    summary="Read a job type (admin)",
    params=(NAME,),
    answers={"200": JOB_TYPE_ANSWER, "404": NOT_FOUND},
)
def get_type(name: str):
    return json_response(type_json(queue().types.get(name)))


@operation(
    "PATCH",
    "/types/<path:name>",
    who=("admin",),
    to="manage job types",
    summary="Change a job type: description, enabled, paused, concurrency_limit, rate_limit, rate_period; "
    "null removes a limit; a changed rate limit starts with a full bucket (admin); audited",
    body=TYPE_PATCH,
    params=(NAME,),
    answers={
        "200": JOB_TYPE_ANSWER,
        "404": NOT_FOUND,
        "422": problem("Invalid input; `errors` names each field (unknown fields too)"),
    },
)
def change_type(name: str, body: dict[str, Any]):
    job_type = queue().types.change(name, g.principal.name, **body) if body else queue().types.get(name)
    return json_response(type_json(job_type))
