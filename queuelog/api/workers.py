"""Endpoints for workers: claim (long polls and batches), heartbeat, complete, fail."""

from __future__ import annotations

from flask import Response, g

from queuelog.api.base import (
    STATUS_OF,
    bp,
    job_json,
    json_response,
    queue,
    requires,
)
from queuelog.api.problems import invalid
from queuelog.api.schemas import BATCH_COMPLETE_BODY, CLAIM_BODY, COMPLETE_BODY, FAIL_BODY, HEARTBEAT_BODY
from queuelog.api.validation import read_body
from queuelog.auth import Principal
from queuelog.queue import QueueError


@bp.post("/jobs/complete")
@requires("worker")
def complete_batch():
    """Complete jobs."""
    items = BATCH_COMPLETE_BODY.parse(read_body())["jobs"]
    parsed: list[tuple[int, str, str | None]] = [
        (item["id"], item["lease_token"], None if item["result"] is None else item["result"].text)
        for item in items
    ]
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
    body = CLAIM_BODY.parse(read_body())
    types, lease, limit, wait = body["types"], body["lease_seconds"], body["limit"], body["wait_seconds"]
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
    body = COMPLETE_BODY.parse(read_body())
    token = body["lease_token"]
    result_json = None if body["result"] is None else body["result"].text
    job = queue().complete(job_id, g.principal.name, token, result_json)
    return json_response(job_json(job, g.principal))


@bp.post("/jobs/<jobid:job_id>/heartbeat")
@requires("worker")
def heartbeat(job_id: int):
    """Extend leases."""
    body = HEARTBEAT_BODY.parse(read_body())
    token, lease = body["lease_token"], body["lease_seconds"]
    percent, message = body["progress"], body["progress_message"]
    if percent is None and message is None:
        job = queue().heartbeat(job_id, g.principal.name, token, lease)
    else:  # with a progress report (queue/running.py)
        job = queue().progress(
            job_id, g.principal.name, token, percent=percent, message=message, lease_seconds=lease
        )
    return json_response(job_json(job, g.principal))


@bp.post("/jobs/<jobid:job_id>/fail")
@requires("worker")
def fail(job_id: int):
    """Fail jobs."""
    body = FAIL_BODY.parse(read_body())
    token, error, retryable = body["lease_token"], body["error"], body["retryable"]
    job = queue().fail(job_id, g.principal.name, token, error, retryable=retryable)
    return json_response(job_json(job, g.principal))
