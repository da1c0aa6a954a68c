"""Health, metrics and the OpenAPI document."""

from __future__ import annotations

import hmac

from flask import Response, current_app, request
from flask.blueprints import BlueprintSetupState

from queuelog.api.base import (
    CONTENT_TYPE,
    bp,
    caller,
    json_response,
)
from queuelog.api.openapi import document
from queuelog.api.problems import ApiError
from queuelog.api.schedule_shapes import REQUESTS as SCHEDULE_REQUESTS
from queuelog.api.schemas import REQUESTS
from queuelog.api.type_shapes import REQUESTS as TYPE_REQUESTS

# -- operations ---------------------------------------------------------------------------------------


@bp.get("/healthz")
def healthz():
    """Liveness and database reachability, for load balancers; needs no key."""
    db = current_app.extensions["queuelog"]["db"]
    try:
        with db.read() as conn:
            conn.exec_driver_sql("SELECT 1")
    except Exception as exc:  # any failure to reach the database means "not ready"
        current_app.logger.warning("health check failed: %s", exc)
        return json_response({"status": "unavailable"}, 503)
    return json_response({"status": "ok"})


@bp.get("/metrics")
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


@bp.record_once
def _prepare(state: BlueprintSetupState) -> None:
    """At start-up: compile the request shapes' validators (once per process), and write the OpenAPI
    document with this app's configured limits."""
    for shape in (*REQUESTS, *SCHEDULE_REQUESTS, *TYPE_REQUESTS):
        shape.validator  # noqa: B018 - compiled now rather than on the first request
    state.app.extensions["queuelog"]["openapi"] = document(state.app.config["QUEUELOG"])


@bp.get("/openapi.json")
def openapi():
    """The OpenAPI 3.1 description of this API."""
    return json_response(current_app.extensions["queuelog"]["openapi"])
