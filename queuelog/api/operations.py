"""Health, metrics and the OpenAPI document."""

from __future__ import annotations

import hmac

from flask import Response, current_app, request
from flask.blueprints import BlueprintSetupState

from queuelog.api.answers import HEALTH
from queuelog.api.base import CONTENT_TYPE, bp, caller, json_response
from queuelog.api.openapi import document
from queuelog.api.problems import ApiError
from queuelog.api.registry import json_answer, operation, problem, request_fields

RETRY_AFTER = "1"  # as every 503 of an unreachable database (factory.database_unavailable)


@operation(
    "GET",
    "/healthz",
    who=None,
    to="check health",
    summary="Health check (no key)",
    public=True,
    common=False,
    answers={
        "200": json_answer("Up", HEALTH),
        "503": json_answer("The database is unreachable (with Retry-After)", HEALTH),
    },
)
def healthz():
    """Liveness and database reachability, for load balancers; needs no key."""
    db = current_app.extensions["queuelog"]["db"]
    try:
        with db.read() as conn:
            conn.exec_driver_sql("SELECT 1")
    except Exception as exc:  # any failure to reach the database means "not ready"
        current_app.logger.warning("health check failed: %s", exc)
        response = json_response({"status": "unavailable", "detail": "the database is unreachable"}, 503)
        response.headers["Retry-After"] = RETRY_AFTER
        return response
    return json_response({"status": "ok"})


@operation(
    "GET",
    "/metrics",
    who=None,  # the metrics token, or an admin's key: checked below
    to="read metrics",
    summary="Prometheus metrics (the metrics token or an admin's key)",
    common=False,
    answers={
        "200": {"description": "Prometheus text exposition", "content": {"text/plain": {}}},
        "401": problem("Missing or unknown credential"),
        "403": problem("Not an admin's key"),
    },
)
def metrics_endpoint():
    """Prometheus metrics, for a metrics token (QUEUELOG_METRICS_TOKEN) or an admin's key."""
    from queuelog.metrics import exposition

    header = request.headers.get("Authorization", "")
    scheme, _, credential = header.partition(" ")
    token = current_app.config["QUEUELOG"]["METRICS_TOKEN"]
    if not (
        token
        and scheme.lower() == "bearer"
        and hmac.compare_digest(credential.strip().encode(), token.encode())
    ):
        principal = caller()
        if not principal.is_admin:
            raise ApiError(403, "forbidden", "metrics need the metrics token or an admin's key")
    db = current_app.extensions["queuelog"]["db"]
    response = Response(exposition(db))
    response.headers["Content-Type"] = CONTENT_TYPE
    return response


@operation(
    "GET",
    "/openapi.json",
    who=None,
    to="read this document",
    summary="This document",
    public=True,
    common=False,
    answers={"200": json_answer("OpenAPI 3.1", {"type": "object"})},
)
def openapi():
    """The OpenAPI 3.1 description of this API."""
    return json_response(current_app.extensions["queuelog"]["openapi"])


@bp.record_once
def _prepare(state: BlueprintSetupState) -> None:
    """At start-up: compile the request shapes' validators (once per process), and write the OpenAPI
    document with this app's configured limits."""
    for field in request_fields():
        field.validator  # noqa: B018 - compiled now rather than on the first request
    state.app.extensions["queuelog"]["openapi"] = document(state.app.config["QUEUELOG"])
