"""Endpoints for workers: claim (long polls and batches), heartbeat, complete, fail."""

from __future__ import annotations

from flask import Response, g

from queuelog.api.answers import JOB, JOB_STATE, WORKER_JOB
from queuelog.api.base import (
    MINIMAL,
    bp,
    job_json,
    queue,
    requires,
    wants_minimal,
)
from queuelog.api.problems import invalid
from queuelog.api.refusals import problem_of
from queuelog.api.render import EMPTY, dumps, json_array, json_object, json_text_response, render_json
from queuelog.api.schemas import BATCH_COMPLETE_BODY, CLAIM_BODY, COMPLETE_BODY, FAIL_BODY, HEARTBEAT_BODY
from queuelog.api.validation import read_body
from queuelog.auth import Principal
from queuelog.engines import JobRecord
from queuelog.queue import QueueError


@bp.post("/jobs/complete")
@requires("worker", to="complete jobs")
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
    minimal = wants_minimal()
    out = []
    for job_id, outcome in queue().complete_many(g.principal.name, parsed):
        if isinstance(outcome, QueueError):
            refused = problem_of(outcome)
            error = {"type": f"/problems/{refused.slug}", "status": refused.status, "detail": refused.detail}
            out.append(dumps({"id": job_id, "status": refused.status, "error": error}))
        elif minimal:
            out.append(f'{{"id": {job_id:d}, "status": 200}}')
        else:
            out.append(f'{{"id": {job_id:d}, "status": 200, "job": {job_json(outcome, g.principal)}}}')
    return _answer(json_object({"results": json_array(out)}), minimal)


# -- workers ------------------------------------------------------------------------------------------


@bp.post("/jobs/claim")
@requires("worker", to="claim jobs")
def claim():
    """Claim jobs."""
    body = CLAIM_BODY.parse(read_body())
    types, lease, limit, wait = body["types"], body["lease_seconds"], body["limit"], body["wait_seconds"]
    principal: Principal = g.principal
    jobs = queue().claim_wait(
        principal.name, wait_seconds=wait, types=types, limit=limit or 1, lease_seconds=lease
    )
    minimal = wants_minimal()
    shape, omit = (WORKER_JOB, EMPTY) if minimal else (JOB, _CLAIMED)
    rendered = [render_json(shape, job, omit) for job in jobs]
    if limit is not None:
        return _answer(json_object({"jobs": json_array(rendered)}), minimal)
    if not rendered:
        return Response(status=204)
    return _answer(rendered[0], minimal)


_CLAIMED = frozenset({"error", "idempotency_key"})  # a worker sees neither; the lease token is its own


def _answer(text: str, minimal: bool) -> Response:
    return json_text_response(text, 200, MINIMAL if minimal else None)


def report_answer(job: JobRecord) -> Response:
    """The job after a report: where it stands (Prefer: return=minimal), or the whole job."""
    if wants_minimal():
        return _answer(render_json(JOB_STATE, job), True)
    return json_text_response(job_json(job, g.principal))


@bp.post("/jobs/<jobid:job_id>/complete")
@requires("worker", to="complete jobs")
def complete(job_id: int):
    """Complete jobs."""
    body = COMPLETE_BODY.parse(read_body())
    token = body["lease_token"]
    result_json = None if body["result"] is None else body["result"].text
    return report_answer(queue().complete(job_id, g.principal.name, token, result_json))


@bp.post("/jobs/<jobid:job_id>/heartbeat")
@requires("worker", to="extend leases")
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
    return report_answer(job)


@bp.post("/jobs/<jobid:job_id>/fail")
@requires("worker", to="fail jobs")
def fail(job_id: int):
    """Fail jobs."""
    body = FAIL_BODY.parse(read_body())
    token, error, retryable = body["lease_token"], body["error"], body["retryable"]
    return report_answer(queue().fail(job_id, g.principal.name, token, error, retryable=retryable))
