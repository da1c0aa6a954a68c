"""Endpoints for workers: claim (long polls and batches), heartbeat, complete, fail."""

from __future__ import annotations

from flask import Response, g

from queuelog.api.base import (
    MAX_BATCH_COMPLETE,
    MAX_WAIT_SECONDS,
    STATUS_OF,
    bp,
    job_json,
    json_response,
    queue,
    requires,
)
from queuelog.api.problems import invalid
from queuelog.api.validation import (
    batch_items,
    check_fields,
    document_within_limits,
    int_in_range,
    lease_seconds,
    lease_token,
    printable,
    read_body,
)
from queuelog.auth import Principal
from queuelog.queue import QueueError


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
    return json_response({"results": out})


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
    lease = lease_seconds(body)
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
    rendered = [dict(job_json(j, principal), lease_token=j.lease_token) for j in jobs]
    if limit is not None:
        return json_response({"jobs": rendered})
    if not rendered:
        return Response(status=204)
    return json_response(rendered[0])


@bp.post("/jobs/<jobid:job_id>/complete")
@requires("worker")
def complete(job_id: int):
    """Complete jobs."""
    body = read_body()
    check_fields(body, {"lease_token", "result"})
    token = lease_token(body)
    result_json = None if body.get("result") is None else document_within_limits(body["result"], "result")
    job = queue().complete(job_id, g.principal.name, token, result_json)
    return json_response(job_json(job, g.principal))


@bp.post("/jobs/<jobid:job_id>/heartbeat")
@requires("worker")
def heartbeat(job_id: int):
    """Extend leases."""
    body = read_body()
    check_fields(body, {"lease_token", "lease_seconds"})
    token = lease_token(body)
    lease = lease_seconds(body)
    job = queue().heartbeat(job_id, g.principal.name, token, lease)
    return json_response(job_json(job, g.principal))


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
    return json_response(job_json(job, g.principal))
