"""The OpenAPI 3.1 description served at ``/openapi.json``. A test checks it against the app's routes."""

from __future__ import annotations

from typing import Any

from queuelog.api.validation import MAX_DELAY_SECONDS, MAX_RETRIES_LIMIT
from queuelog.models import PRIORITIES, STATUSES


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


JOB = {"$ref": "#/components/schemas/Job"}
ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}
COMMON = {
    "400": _problem("Malformed JSON"),
    "401": _problem("Missing, unknown or revoked API key"),
    "403": _problem("The key's kind or role may not do this"),
    "413": _problem("Request larger than 1 MiB"),
    "415": _problem("Body is not application/json"),
    "422": _problem("Invalid input; `errors` names the fields"),
}


def _op(
    summary: str, responses: dict[str, Any], body: dict | None = None, params: list | None = None
) -> dict:
    op: dict[str, Any] = {"summary": summary, "responses": {**responses, **COMMON}}
    if body is not None:
        op["requestBody"] = body
    if params:
        op["parameters"] = params
    return op


def _holder_body(extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
    props = {"lease_token": {"type": "string"}, **extra}
    return _body(
        {
            "type": "object",
            "additionalProperties": False,
            "properties": props,
            "required": ["lease_token", *required],
        }
    )


JOB_BODY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type"],
    "properties": {
        "type": {"type": "string", "maxLength": 64},
        "payload": {"type": "object", "description": "At most 65,536 bytes serialized, 32 levels deep"},
        "priority": {"type": "string", "enum": list(PRIORITIES), "default": "low"},
        "max_retries": {"type": "integer", "minimum": 0, "maximum": MAX_RETRIES_LIMIT, "default": 3},
        "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 255},
        "run_at": {"type": "string", "format": "date-time"},
        "delay_seconds": {"type": "number", "minimum": 0, "maximum": MAX_DELAY_SECONDS},
    },
}


def document() -> dict[str, Any]:
    time = {"type": ["string", "null"], "format": "date-time"}
    return {
        "openapi": "3.1.0",
        "info": {"title": "queuelog", "version": "1", "description": "Background job queue JSON API."},
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Problem": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string"},
                        "title": {"type": "string"},
                        "status": {"type": "integer"},
                        "detail": {"type": "string"},
                        "errors": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                            },
                        },
                    },
                },
                "Job": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "type": {"type": "string"},
                        "payload": {"type": "object"},
                        "priority": {"type": "string", "enum": list(PRIORITIES)},
                        "status": {"type": "string", "enum": list(STATUSES)},
                        "retry_count": {"type": "integer"},
                        "max_retries": {"type": "integer"},
                        "idempotency_key": {
                            "type": ["string", "null"],
                            "description": "owner and admins only",
                        },
                        "owner": {"type": "string"},
                        "worker_id": {"type": ["string", "null"]},
                        "claimed_at": time,
                        "lease_expires_at": time,
                        "available_at": time,
                        "created_at": time,
                        "updated_at": time,
                        "finished_at": time,
                        "result": {"type": ["object", "null"]},
                        "error": {"type": ["string", "null"], "description": "admins only"},
                        "lease_token": {"type": "string", "description": "claim responses only"},
                    },
                },
            },
        },
        "paths": {
            "/jobs": {
                "post": _op(
                    "Enqueue a job (producer, admin)",
                    {"201": _json("Created", JOB), "200": _json("Idempotent replay: the existing job", JOB)},
                    _body(JOB_BODY),
                    [{"name": "Idempotency-Key", "in": "header", "schema": {"type": "string"}}],
                ),
                "get": _op(
                    "List jobs, newest first (producers see their own)",
                    {
                        "200": _json(
                            "A page",
                            {
                                "type": "object",
                                "properties": {
                                    "jobs": {"type": "array", "items": JOB},
                                    "next_cursor": {"type": ["string", "null"]},
                                },
                            },
                        )
                    },
                    params=[
                        {
                            "name": "status",
                            "in": "query",
                            "schema": {"type": "string", "enum": list(STATUSES)},
                        },
                        {"name": "type", "in": "query", "schema": {"type": "string"}},
                        {
                            "name": "priority",
                            "in": "query",
                            "schema": {"type": "string", "enum": list(PRIORITIES)},
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 200},
                        },
                        {"name": "cursor", "in": "query", "schema": {"type": "string"}},
                    ],
                ),
            },
            "/jobs/batch": {
                "post": _op(
                    "Enqueue 1..500 jobs at once, all or nothing (producer, admin)",
                    {
                        "201": _json(
                            "The jobs, in order",
                            {"type": "object", "properties": {"jobs": {"type": "array", "items": JOB}}},
                        )
                    },
                    _body(
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["jobs"],
                            "properties": {
                                "jobs": {"type": "array", "minItems": 1, "maxItems": 500, "items": JOB_BODY}
                            },
                        }
                    ),
                ),
            },
            "/jobs/complete": {
                "post": _op(
                    "Complete 1..100 held jobs; each item is judged alone (worker)",
                    {
                        "200": _json(
                            "One result per item, in order",
                            {
                                "type": "object",
                                "properties": {
                                    "results": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                "id": {"type": "integer"},
                                                "status": {"type": "integer", "enum": [200, 404, 409]},
                                                "job": JOB,
                                                "error": {"$ref": "#/components/schemas/Problem"},
                                            },
                                        },
                                    }
                                },
                            },
                        )
                    },
                    _body(
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["jobs"],
                            "properties": {
                                "jobs": {
                                    "type": "array",
                                    "minItems": 1,
                                    "maxItems": 100,
                                    "items": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "required": ["id", "lease_token"],
                                        "properties": {
                                            "id": {"type": "integer"},
                                            "lease_token": {"type": "string"},
                                            "result": {"type": "object"},
                                        },
                                    },
                                }
                            },
                        }
                    ),
                ),
            },
            "/jobs/claim": {
                "post": _op(
                    "Claim the next claimable job(s) (worker keys)",
                    {
                        "200": _json("A job, or {jobs: [...]} when limit was given", {}),
                        "204": {"description": "Nothing claimable"},
                    },
                    _body(
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "types": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "minItems": 1,
                                    "maxItems": 100,
                                },
                                "lease_seconds": {"type": "integer", "minimum": 5, "maximum": 43200},
                                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                                "wait_seconds": {"type": "number", "minimum": 0, "maximum": 20},
                            },
                        },
                        required=False,
                    ),
                ),
            },
            "/jobs/{job_id}": {
                "get": _op(
                    "Read a job (owner, admin, the worker holding it)",
                    {"200": _json("The job", JOB), "404": _problem("Unknown or invisible")},
                    params=[ID],
                ),
            },
            "/jobs/{job_id}/events": {
                "get": _op(
                    "A job's history (owner, admin)",
                    {"200": _json("Events", {"type": "object"}), "404": _problem("Unknown or invisible")},
                    params=[ID],
                ),
            },
            "/jobs/{job_id}/complete": {
                "post": _op(
                    "Report success (the lease holder)",
                    {
                        "200": _json("The job", JOB),
                        "404": _problem("No such job"),
                        "409": _problem("Not the lease holder"),
                    },
                    _holder_body({"result": {"type": "object"}}, []),
                    [ID],
                ),
            },
            "/jobs/{job_id}/heartbeat": {
                "post": _op(
                    "Extend the lease (the lease holder)",
                    {
                        "200": _json("The job", JOB),
                        "404": _problem("No such job"),
                        "409": _problem("Not the lease holder"),
                    },
                    _holder_body({"lease_seconds": {"type": "integer", "minimum": 5, "maximum": 43200}}, []),
                    [ID],
                ),
            },
            "/jobs/{job_id}/fail": {
                "post": _op(
                    "Report failure (the lease holder)",
                    {
                        "200": _json("The job, pending again or failed", JOB),
                        "404": _problem("No such job"),
                        "409": _problem("Not the lease holder"),
                    },
                    _holder_body({"error": {"type": "string"}, "retryable": {"type": "boolean"}}, ["error"]),
                    [ID],
                ),
            },
            "/jobs/{job_id}/cancel": {
                "post": _op(
                    "Cancel a pending job (owner, admin)",
                    {
                        "200": _json("The job", JOB),
                        "404": _problem("Unknown or invisible"),
                        "409": _problem("Not pending"),
                    },
                    params=[ID],
                ),
            },
            "/jobs/{job_id}/retry": {
                "post": _op(
                    "Retry a failed or cancelled job (admin)",
                    {
                        "200": _json("The job", JOB),
                        "404": _problem("No such job"),
                        "409": _problem("Not failed or cancelled"),
                    },
                    params=[ID],
                ),
            },
            "/healthz": {
                "get": {
                    "summary": "Health check (no key)",
                    "security": [],
                    "responses": {
                        "200": _json("Up", {"type": "object"}),
                        "503": _json("Database unreachable", {"type": "object"}),
                    },
                },
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (the metrics token or an admin key)",
                    "responses": {
                        "200": {"description": "Prometheus text exposition", "content": {"text/plain": {}}},
                        "401": _problem("Missing or unknown credential"),
                        "403": _problem("Not an admin key"),
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
        },
    }
