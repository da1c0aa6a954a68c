"""Endpoints for running jobs (docs/running-jobs.md): a worker snoozes a job it holds, or reports that it
stopped one whose cancellation was requested. Progress rides on the heartbeat (workers.py); people ask
for a cancellation through POST /jobs/{id}/cancel (jobs.py)."""

from __future__ import annotations

from flask import g

from queuelog.api.base import bp, queue, requires
from queuelog.api.schemas import CANCELLED_BODY, SNOOZE_BODY
from queuelog.api.validation import read_body
from queuelog.api.workers import report_answer


@bp.post("/jobs/<jobid:job_id>/snooze")
@requires("worker", to="snooze jobs")
def snooze(job_id: int):
    """Snooze jobs."""
    body = SNOOZE_BODY.parse(read_body())
    job = queue().snooze(job_id, g.principal.name, body["lease_token"], body["delay_seconds"])
    return report_answer(job)


@bp.post("/jobs/<jobid:job_id>/cancelled")
@requires("worker", to="report cancelled jobs")
def cancelled(job_id: int):
    """Report cancelled jobs."""
    body = CANCELLED_BODY.parse(read_body())
    job = queue().stop_cancelled(job_id, g.principal.name, body["lease_token"])
    return report_answer(job)
