"""The JSON API (SPEC §3): a thin adapter that parses input, checks the caller, and calls the queue layer."""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from functools import lru_cache, wraps
from typing import Any

from flask import Blueprint, Response, current_app, g, request, url_for
from sqlalchemy.exc import OperationalError

from queuelog.api.problems import ApiError, invalid
from queuelog.api.validation import (
    batch_items,
    check_fields,
    document_within_limits,
    int_in_range,
    lease_token,
    parse_job,
    parse_priority,
    parse_status,
    printable,
    read_body,
)
from queuelog.auth import Principal, authenticate_key
from queuelog.db import DatabaseUnavailable
from queuelog.models import PRIORITY_NAMES
from queuelog.queue import Queue, QueueError

bp = Blueprint("api", __name__)

MAX_BATCH_ENQUEUE = 500
MAX_BATCH_COMPLETE = 100
MAX_WAIT_SECONDS = 20
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # the Prometheus text format

STATUS_OF = {
    "not-found": 404,
    "invalid-state": 409,
    "not-lease-holder": 409,
    "idempotency-key-reused": 422,
    "validation-failed": 422,
}


@bp.errorhandler(ApiError)
def _api_error(exc: ApiError):
    return exc.response()


@bp.errorhandler(QueueError)
def _queue_error(exc: QueueError):
    errors = getattr(exc, "errors", None)
    return ApiError(STATUS_OF[exc.slug], exc.slug, exc.detail, errors=errors).response()


@bp.errorhandler(OperationalError)
@bp.errorhandler(DatabaseUnavailable)
def _database_unavailable(exc: Exception):
    current_app.logger.warning("database unavailable: %s", exc)
    return ApiError(
        503, "unavailable", "the database is unavailable or busy; try again", headers={"Retry-After": "1"}
    ).response()


def queue() -> Queue:
    return current_app.extensions["queuelog"]["queue"]


# -- who is calling -----------------------------------------------------------------------------------


def _principal() -> Principal:
    """The caller behind ``Authorization: Bearer``; the API never looks at cookies."""
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(
            401,
            "unauthorized",
            "send an API key as 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": 'Bearer realm="queuelog"'},
        )
    principal = authenticate_key(current_app.extensions["queuelog"]["db"], key.strip())
    if principal is None:
        raise ApiError(
            401,
            "unauthorized",
            "the API key is unknown or revoked",
            headers={"WWW-Authenticate": 'Bearer realm="queuelog", error="invalid_token"'},
        )
    return principal


def requires(*allowed: str):
    """Let through callers of the given kinds: ``worker``, ``producer`` (any user) or ``admin``."""

    def decorator(view):
        @wraps(view)
        def wrapped(*args, **kwargs):
            principal = _principal()
            ok = (
                ("worker" in allowed and principal.is_worker)
                or ("producer" in allowed and principal.kind == "user")
                or ("admin" in allowed and principal.is_admin)
            )
            if not ok:
                raise ApiError(403, "forbidden", f"this key may not {view.__doc__.splitlines()[0].lower()}")
            g.principal = principal
            return view(*args, **kwargs)

        return wrapped

    return decorator


# -- rendering ----------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _time(value) -> str | None:
    # Cached: a batch of jobs shares most of its timestamps (claimed, updated, lease expiry).
    if value is None:
        return None
    return value.isoformat(timespec="microseconds")[:-6] + "Z"  # values are UTC: "+00:00" becomes "Z"


def job_json(job: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """A job as the caller may see it: idempotency keys for owners and admins, error text for admins."""
    out = {
        "id": job["id"],
        "type": job["type"],
        "payload": job["payload"],
        "priority": PRIORITY_NAMES.get(job["priority"], str(job["priority"])),
        "status": job["status"],
        "retry_count": job["retry_count"],
        "max_retries": job["max_retries"],
        "owner": job["owner"],
        "worker_id": job["worker_id"],
        "claimed_at": _time(job["claimed_at"]),
        "lease_expires_at": _time(job["lease_expires_at"]),
        "available_at": _time(job["available_at"]),
        "created_at": _time(job["created_at"]),
        "updated_at": _time(job["updated_at"]),
        "finished_at": _time(job["finished_at"]),
        "result": job["result"],
    }
    if principal.is_admin or (principal.kind == "user" and principal.name == job["owner"]):
        out["idempotency_key"] = job["idempotency_key"]
    if principal.is_admin:
        out["error"] = job["error"]
    return out


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    response = Response(json.dumps(body, ensure_ascii=False), status=status, mimetype="application/json")
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def _visible(job: dict[str, Any] | None, principal: Principal, job_id: int) -> dict[str, Any]:
    """The job if the caller may see it; 404 otherwise, so that others' jobs don't reveal themselves."""
    if job is not None:
        if principal.is_admin or (principal.kind == "user" and job["owner"] == principal.name):
            return job
        if principal.is_worker and job["status"] == "running" and job["worker_id"] == principal.name:
            return job
    raise ApiError(404, "not-found", f"job {job_id} does not exist")


# -- enqueue ------------------------------------------------------------------------------------------


@bp.post("/jobs")
@requires("producer")
def enqueue():
    """Enqueue jobs."""
    body = read_body()
    spec = parse_job(body, header_key=request.headers.get("Idempotency-Key"))
    principal: Principal = g.principal
    _check_ceiling(spec.priority, principal)
    job, created = queue().enqueue(principal.name, spec)
    location = {"Location": url_for("api.get_job", job_id=job["id"])}
    return _json(job_json(job, principal), 201 if created else 200, location)


def _check_ceiling(priority: int, principal: Principal, where: str = "") -> None:
    if priority > principal.max_priority:
        raise ApiError(403, "forbidden", f"{where}producers may enqueue low and medium priority only")


@bp.post("/jobs/batch")
@requires("producer")
def enqueue_batch():
    """Enqueue jobs."""
    items = batch_items(read_body(), MAX_BATCH_ENQUEUE, "job bodies")
    specs = [parse_job(item, prefix=f"jobs[{i}].") for i, item in enumerate(items)]
    principal: Principal = g.principal
    for i, spec in enumerate(specs):
        _check_ceiling(spec.priority, principal, f"jobs[{i}]: ")
    results = queue().enqueue_many(principal.name, specs)
    return _json({"jobs": [job_json(job, principal) for job, _ in results]}, 201)


@bp.post("/jobs/complete")
@requires("worker")
def complete_batch():
    """Complete jobs."""
    items = batch_items(read_body(), MAX_BATCH_COMPLETE, "items")
    parsed: list[tuple[int, str, str | None]] = []
    for i, item in enumerate(items):
        prefix = f"jobs[{i}]."
        if not isinstance(item, dict):
            raise invalid(f"jobs[{i}]", "must be an object with id, lease_token and an optional result")
        check_fields(item, {"id", "lease_token", "result"}, prefix)
        job_id = int_in_range(item.get("id"), prefix + "id", 1, 2**63 - 1)
        token = lease_token(item, prefix)
        result = (
            None if item.get("result") is None else document_within_limits(item["result"], prefix + "result")
        )
        parsed.append((job_id, token, result))
    ids = [job_id for job_id, _, _ in parsed]
    if len(set(ids)) != len(ids):
        raise invalid("jobs", "each job may appear once")
    out = []
    for job_id, outcome in queue().complete_many(g.principal.name, parsed):
        if isinstance(outcome, QueueError):
            status = STATUS_OF[outcome.slug]
            error = {"type": f"/problems/{outcome.slug}", "status": status, "detail": outcome.detail}
            out.append({"id": job_id, "status": status, "error": error})
        else:
            out.append({"id": job_id, "status": 200, "job": job_json(outcome, g.principal)})
    return _json({"results": out})


@bp.get("/jobs")
@requires("producer")
def list_jobs():
    """List jobs."""
    principal: Principal = g.principal
    args = request.args
    check_fields(args, {"status", "type", "priority", "limit", "cursor"})
    filters: dict[str, Any] = {}
    if "status" in args:
        filters["status"] = parse_status(args["status"])
    if "type" in args:
        filters["type"] = printable(args["type"], "type", max_length=64)
    if "priority" in args:
        filters["priority"] = parse_priority(args["priority"])
    limit = 50
    if "limit" in args:
        limit = int_in_range(int(args["limit"]) if args["limit"].isdigit() else None, "limit", 1, 200)
    before = _decode_cursor(args["cursor"]) if "cursor" in args else None
    owner = None if principal.is_admin else principal.name
    jobs = queue().list_jobs(owner=owner, before_id=before, limit=limit + 1, **filters)
    next_cursor = _encode_cursor(jobs[limit - 1]["id"]) if len(jobs) > limit else None
    return _json({"jobs": [job_json(j, principal) for j in jobs[:limit]], "next_cursor": next_cursor})


def _encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = text.partition(":")
        if kind != "id" or not value.isdigit() or len(value) > 18:
            raise ValueError
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid("cursor", "is not a cursor this API returned") from None


@bp.get("/jobs/<jobid:job_id>")
@requires("producer", "worker")
def get_job(job_id: int):
    """Read jobs."""
    job = _visible(queue().get(job_id), g.principal, job_id)
    return _json(job_json(job, g.principal))


@bp.get("/jobs/<jobid:job_id>/events")
@requires("producer")
def job_events(job_id: int):
    """Read job events."""
    principal: Principal = g.principal
    _visible(queue().get(job_id), principal, job_id)
    events = []
    for event in queue().events(job_id):
        item = {k: event[k] for k in ("id", "event", "actor", "attempt")}
        item["at"] = _time(event["at"])
        if principal.is_admin:
            item["error"] = event["error"]
        events.append(item)
    return _json({"events": events})


# -- workers ------------------------------------------------------------------------------------------


@bp.post("/jobs/claim")
@requires("worker")
def claim():
    """Claim jobs."""
    body = read_body()
    check_fields(body, {"types", "lease_seconds", "limit", "wait_seconds"})
    types = body.get("types")
    if types is not None:
        if not isinstance(types, list) or not 1 <= len(types) <= 100:
            raise invalid("types", "must be a list of 1 to 100 job type names")
        types = [printable(t, f"types[{i}]", max_length=64) for i, t in enumerate(types)]
    lease = body.get("lease_seconds")
    if lease is not None:
        lease = int_in_range(lease, "lease_seconds", 5, 43200)
    limit = body.get("limit")
    if limit is not None:
        limit = int_in_range(limit, "limit", 1, 100)
    wait = body.get("wait_seconds", 0)
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= MAX_WAIT_SECONDS:
        raise invalid("wait_seconds", f"must be a number from 0 to {MAX_WAIT_SECONDS}")
    principal: Principal = g.principal
    jobs = queue().claim_wait(
        principal.name, wait_seconds=wait, types=types, limit=limit or 1, lease_seconds=lease
    )
    rendered = [dict(job_json(j, principal), lease_token=j["lease_token"]) for j in jobs]
    if limit is not None:
        return _json({"jobs": rendered})
    if not rendered:
        return Response(status=204)
    return _json(rendered[0])


@bp.post("/jobs/<jobid:job_id>/complete")
@requires("worker")
def complete(job_id: int):
    """Complete jobs."""
    body = read_body()
    check_fields(body, {"lease_token", "result"})
    token = lease_token(body)
    result_json = None if body.get("result") is None else document_within_limits(body["result"], "result")
    job = queue().complete(job_id, g.principal.name, token, result_json)
    return _json(job_json(job, g.principal))


@bp.post("/jobs/<jobid:job_id>/heartbeat")
@requires("worker")
def heartbeat(job_id: int):
    """Extend leases."""
    body = read_body()
    check_fields(body, {"lease_token", "lease_seconds"})
    token = lease_token(body)
    lease = body.get("lease_seconds")
    if lease is not None:
        lease = int_in_range(lease, "lease_seconds", 5, 43200)
    job = queue().heartbeat(job_id, g.principal.name, token, lease)
    return _json(job_json(job, g.principal))


@bp.post("/jobs/<jobid:job_id>/fail")
@requires("worker")
def fail(job_id: int):
    """Fail jobs."""
    body = read_body()
    check_fields(body, {"lease_token", "error", "retryable"})
    token = lease_token(body)
    error = body.get("error")
    if not isinstance(error, str):
        raise invalid("error", "is required and must be a string")
    retryable = body.get("retryable", True)
    if not isinstance(retryable, bool):
        raise invalid("retryable", "must be true or false")
    job = queue().fail(job_id, g.principal.name, token, error, retryable=retryable)
    return _json(job_json(job, g.principal))


# -- people -------------------------------------------------------------------------------------------


@bp.post("/jobs/<jobid:job_id>/cancel")
@requires("producer")
def cancel(job_id: int):
    """Cancel jobs."""
    check_fields(read_body(), ())  # an empty body is fine; a malformed one or any field is an error
    principal: Principal = g.principal
    job = queue().cancel(job_id, principal.name, owner=None if principal.is_admin else principal.name)
    return _json(job_json(job, principal))


@bp.post("/jobs/<jobid:job_id>/retry")
@requires("admin")
def retry(job_id: int):
    """Retry jobs."""
    check_fields(read_body(), ())
    job = queue().retry(job_id, g.principal.name)
    return _json(job_json(job, g.principal))


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
        return _json({"status": "unavailable"}, 503)
    return _json({"status": "ok"})


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
        principal = _principal()
        if not principal.is_admin:
            raise ApiError(403, "forbidden", "metrics need the metrics token or an admin's key")
    db = current_app.extensions["queuelog"]["db"]
    response = Response(exposition(db))
    response.headers["Content-Type"] = CONTENT_TYPE
    return response


@bp.get("/openapi.json")
def openapi():
    """The OpenAPI 3.1 description of this API."""
    from queuelog.api.openapi import document

    return _json(document())
