"""The OpenAPI 3.1 description served at ``/openapi.json``, written at start-up from the declared shapes
(``schemas.py`` for requests, ``answers.py`` for answers) with the configured limits filled in. A test
checks that it documents every route, and another that the API does what it says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuelog.api import answers, schemas
from queuelog.api.shapes import COMPONENTS, REF, Configured, Field, Shape, fill

INPUT_RULES = (
    "Authenticate with `Authorization: Bearer <api key>`. Request bodies are `application/json`, not "
    "compressed; an empty body counts as `{{}}`; malformed JSON is 400; unknown fields are 422, all of them "
    "named. Integers are written without a fraction or exponent (3, not 3.0). Errors are RFC 9457 problem "
    "details; a 422 lists each invalid input as `errors: [{{field, message}}]`, with paths such as "
    "`jobs[3].type` or `payload.lines[1]`. A request may be at most {MAX_REQUEST_BYTES:,} bytes."
)


def _schema(shape: Shape | str) -> dict[str, Any]:
    return {"$ref": REF + (shape if isinstance(shape, str) else shape.name)}


def _problem(description: str | Configured) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": _schema(answers.PROBLEM)}},
    }


def _json(description: str, schema: dict[str, Any], headers: dict | None = None) -> dict[str, Any]:
    out = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


COMMON = {
    "400": _problem("Malformed JSON"),
    "401": _problem("Missing, unknown or revoked API key"),
    "403": _problem("The key's kind or role may not do this"),
    "413": _problem(Configured(text="The request is larger than {MAX_REQUEST_BYTES:,} bytes")),
    "415": _problem("The body is not application/json, or it is compressed"),
    "422": _problem("Invalid input; `errors` names each field"),
    "503": _problem("The database is unavailable or busy; try again (Retry-After)"),
}
JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}
JOB_ID["description"] = "ASCII digits only, at most 18 of them."
JOB = _json("The job", _schema(answers.JOB))
PREFER = {
    "name": "Prefer",
    "in": "header",
    "schema": {"type": "string", "examples": ["return=minimal"]},
    "description": "return=minimal (RFC 7240) asks for the compact answer a worker needs; the answer then "
    "says Preference-Applied: return=minimal. Without it, or with return=representation, whole jobs.",
}
APPLIED = {
    "Preference-Applied": {
        "description": "return=minimal when the compact answer was given",
        "schema": {"type": "string", "enum": ["return=minimal"]},
    }
}


def _either(full: Shape | str, minimal: Shape) -> dict[str, Any]:
    """An answer that is ``minimal`` when the request said Prefer: return=minimal, else ``full``."""
    return {"anyOf": [_schema(full), _schema(minimal)]}


REPORTED = _json(
    "The job; with Prefer: return=minimal, where it stands (JobState)",
    _either(answers.JOB, answers.JOB_STATE),
    APPLIED,
)
NOT_FOUND = _problem("No such job, or one the caller may not see")
NOT_HOLDER = _problem("The caller does not hold the job's lease (not-lease-holder), whatever its state")


def _op(summary: str, responses: dict, body: Shape | None = None, params: list | None = None, **kw) -> dict:
    op: dict[str, Any] = {"summary": summary, "responses": {**responses, **COMMON}}
    if body is not None:
        content = {"application/json": {"schema": _schema(body)}}
        op["requestBody"] = {"required": kw.pop("required", True), "content": content}
    if params:
        op["parameters"] = params
    return op | kw


def _header(name: str, field: Field) -> dict[str, Any]:
    return {"name": name, "in": "header", "schema": field.json_schema()}


def _query(shape: Shape) -> list[dict[str, Any]]:
    return [
        {"name": key, "in": "query", "schema": field.json_schema()} for key, field in shape.fields.items()
    ]


def _paths() -> dict[str, Any]:
    jobs_answer = _schema(answers.JOBS)
    location = {"Location": {"description": "The job's URL", "schema": {"type": "string"}}}
    return {
        "/jobs": {
            "post": _op(
                "Enqueue a job (producer, admin)",
                {
                    "201": _json("Created", _schema(answers.JOB), location),
                    "200": _json("An idempotent replay: the existing job", _schema(answers.JOB), location),
                    "422": _problem("Invalid input, or idempotency-key-reused"),
                },
                schemas.JOB_BODY,
                [_header("Idempotency-Key", schemas.IDEMPOTENCY_KEY)],
            ),
            "get": _op(
                "List jobs, newest first (producers see their own)",
                {"200": _json("A page", _schema(answers.JOB_LIST))},
                params=_query(schemas.LIST_QUERY),
            ),
        },
        "/jobs/batch": {
            "post": _op(
                "Enqueue 1 to 500 jobs at once, all or nothing (producer, admin)",
                {
                    "201": _json("The jobs, in order (at least one new)", jobs_answer),
                    "200": _json("A replay: every job existed", jobs_answer),
                },
                schemas.BATCH_BODY,
                [_header("Idempotency-Key", schemas.BATCH_IDEMPOTENCY_KEY)],
            ),
        },
        "/jobs/complete": {
            "post": _op(
                "Complete 1 to 100 held jobs; each item is judged alone (worker)",
                {
                    "200": _json(
                        "One result per item, in order; with Prefer: return=minimal a completed item is "
                        "{id, status} without its job",
                        _schema(answers.COMPLETE_RESULTS),
                        APPLIED,
                    )
                },
                schemas.BATCH_COMPLETE_BODY,
                [PREFER],
            ),
        },
        "/jobs/claim": {
            "post": _op(
                "Claim the next claimable job(s) (worker)",
                {
                    "200": _json(
                        "A job; or {jobs: [...]} when limit was given. With Prefer: return=minimal, "
                        "each job is a WorkerJob",
                        {
                            "anyOf": [
                                _schema("ClaimedJob"),
                                _schema(answers.CLAIMED_JOBS),
                                _schema(answers.WORKER_JOB),
                                _schema(answers.WORKER_JOBS),
                            ]
                        },
                        APPLIED,
                    ),
                    "204": {"description": "Nothing claimable (without limit)"},
                },
                schemas.CLAIM_BODY,
                [PREFER],
                required=False,
            ),
        },
        "/jobs/{job_id}": {
            "get": _op(
                "Read a job (owner, admin, the worker holding it)",
                {"200": JOB, "404": NOT_FOUND},
                params=[JOB_ID],
            )
        },
        "/jobs/{job_id}/events": {
            "get": _op(
                "A job's history (owner, admin)",
                {"200": _json("Events", _schema(answers.EVENTS)), "404": NOT_FOUND},
                params=[JOB_ID],
            ),
        },
        "/jobs/{job_id}/complete": {
            "post": _op(
                "Report success (the lease holder)",
                {"200": REPORTED, "404": NOT_FOUND, "409": NOT_HOLDER},
                schemas.COMPLETE_BODY,
                [JOB_ID, PREFER],
            ),
        },
        "/jobs/{job_id}/heartbeat": {
            "post": _op(
                "Extend the lease, and report progress (the lease holder); the answer's cancel_requested "
                "says whether to stop (the compact JobState carries it too)",
                {"200": REPORTED, "404": NOT_FOUND, "409": NOT_HOLDER},
                schemas.HEARTBEAT_BODY,
                [JOB_ID, PREFER],
            ),
        },
        "/jobs/{job_id}/fail": {
            "post": _op(
                "Report failure (the lease holder)",
                {
                    "200": _json(
                        "The job, pending again or failed (cancelled when its cancellation was requested); with "
                        "Prefer: return=minimal, where it stands",
                        _either(answers.JOB, answers.JOB_STATE),
                        APPLIED,
                    ),
                    "404": NOT_FOUND,
                    "409": NOT_HOLDER,
                },
                schemas.FAIL_BODY,
                [JOB_ID, PREFER],
            ),
        },
        "/jobs/{job_id}/cancel": {
            "post": _op(
                "Cancel a pending job, or ask the worker of a running one to stop it (owner, admin)",
                {
                    "200": _json("The job, cancelled", _schema(answers.JOB)),
                    "202": _json(
                        "The job, still running, with cancel_requested: its worker stops it",
                        _schema(answers.JOB),
                    ),
                    "404": NOT_FOUND,
                    "409": _problem("Neither pending nor running"),
                },
                schemas.EMPTY_BODY,
                [JOB_ID],
                required=False,
            ),
        },
        "/jobs/{job_id}/retry": {
            "post": _op(
                "Retry a failed or cancelled job (admin)",
                {"200": JOB, "404": NOT_FOUND, "409": _problem("Not failed or cancelled")},
                schemas.EMPTY_BODY,
                [JOB_ID],
                required=False,
            ),
        },
        "/healthz": {
            "get": {
                "summary": "Health check (no key)",
                "security": [],
                "responses": {
                    "200": _json("Up", _schema(answers.HEALTH)),
                    "503": _json("The database is unreachable", _schema(answers.HEALTH)),
                },
            },
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics (the metrics token or an admin's key)",
                "responses": {
                    "200": {"description": "Prometheus text exposition", "content": {"text/plain": {}}},
                    "401": _problem("Missing or unknown credential"),
                    "403": _problem("Not an admin's key"),
                },
            },
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "security": [],
                "responses": {"200": _json("OpenAPI 3.1", {"type": "object"})},
            },
        },
    }


def document(limits: Mapping[str, Any]) -> dict[str, Any]:
    """The whole document, with ``limits`` (the app's ``QUEUELOG`` configuration) filled in."""
    from queuelog.api.openapi_running import running_paths  # they build on this module's helpers
    from queuelog.api.openapi_schedules import schedule_paths
    from queuelog.api.openapi_types import type_paths

    return fill(
        {
            "openapi": "3.1.0",
            "info": {
                "title": "queuelog",
                "version": "1",
                "description": Configured(text="Background job queue JSON API. " + INPUT_RULES),
            },
            "security": [{"bearer": []}],
            "components": {
                "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                "schemas": COMPONENTS,
            },
            "paths": {**_paths(), **running_paths(), **schedule_paths(), **type_paths()},
        },
        limits,
    )
