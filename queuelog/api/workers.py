"""Jobs for workers (docs/api.md, docs/running-jobs.md): claim (long polls and batches), heartbeat
with progress, complete one or a batch, fail, snooze, and report a job stopped on a cancel request. Their
request shapes are declared here, beside the operations (registry.py); the compact answers a worker asks
for with ``Prefer: return=minimal`` are in answers.py with the job's."""

from __future__ import annotations

import math
from typing import Any

from flask import Response, g

from queuelog.api.answers import CLAIMED_JOBS, COMPLETE_RESULTS, JOB, JOB_STATE, WORKER_JOB, WORKER_JOBS
from queuelog.api.base import MINIMAL, job_json, queue
from queuelog.api.fields import answer, boolean, document, integer, number, text
from queuelog.api.problems import invalid
from queuelog.api.refusals import problem_of
from queuelog.api.registry import (
    APPLIED,
    JOB_ID,
    NOT_FOUND,
    NOT_HOLDER,
    either,
    json_answer,
    operation,
    problem,
    reported,
    schema_of,
)
from queuelog.api.render import EMPTY, dumps, json_array, json_object, json_text_response, render_json
from queuelog.api.shapes import Configured, Field, ListOf, Shape
from queuelog.queue import JobRecord, NextClaim, QueueError
from queuelog.queue.running import MAX_PROGRESS_MESSAGE, MAX_SNOOZE_SECONDS, MIN_SNOOZE_SECONDS
from queuelog.queue.wakeups import WaitingPollsFull

MAX_BATCH_COMPLETE = 100
MAX_WAIT_SECONDS = 20
MAX_JOB_ID = 2**63 - 1

LEASE_TOKEN = text(64, "The lease_token of the claim that handed the job out.")
LEASE_SECONDS = integer(
    5,
    43200,
    "How long the lease lasts, in seconds (QUEUELOG_LEASE_SECONDS when absent).",
    nullable=True,
    default=Configured("LEASE_SECONDS"),
)
CLAIM_TYPES = ListOf(
    text(64, "A job type."),
    1,
    100,
    "must be a list of 1 to 100 job type names",
    nullable=True,
    description="Claim only jobs of these types (any type when absent).",
)
CLAIM_BODY = Shape(
    "ClaimBody",
    "What to claim, and how long to wait for it.",
    {
        "types": CLAIM_TYPES,
        "lease_seconds": LEASE_SECONDS,
        "limit": integer(
            1, 100, "Claim up to this many jobs: the answer is then {jobs: [...]}, never 204.", nullable=True
        ),
        "wait_seconds": number(
            0, MAX_WAIT_SECONDS, "Long poll: wait this long at most for a job.", default=0
        ),
        "request_id": text(
            64,
            "This claim's id, chosen by the worker (a new one per claim): a claim sent again with the same id "
            "by the same worker key while its lease lasts answers the jobs and leases the first one got, "
            "instead of new ones (docs/operations.md#outages).",
            nullable=True,
        ),
    },
)
HEARTBEAT_BODY = Shape(
    "HeartbeatBody",
    "Extend the lease; report the attempt's progress too, if you like (docs/running-jobs.md).",
    {
        "lease_token": LEASE_TOKEN,
        "lease_seconds": LEASE_SECONDS,
        "progress": integer(
            0, 100, "How far the attempt is, in percent (shown on the job's page).", nullable=True
        ),
        "progress_message": text(
            MAX_PROGRESS_MESSAGE, "A short note on what the attempt is doing.", nullable=True
        ),
    },
    required=("lease_token",),
)
RESULT = document("The job's result.", nullable=True)
NEXT = Shape(
    "NextClaim",
    "Claim the next job(s) in the report's request (docs/api.md#report-and-claim-in-one-request): the "
    "answer's next is then {jobs: [...]}, as a claim's with a limit, perhaps empty.",
    {
        "limit": integer(1, 100, "Claim up to this many jobs.", default=1),
        "wait_seconds": number(
            0,
            MAX_WAIT_SECONDS,
            "Long poll, once the report is committed: wait this long at most for a job.",
            default=0,
        ),
        "types": CLAIM_TYPES,
        "lease_seconds": LEASE_SECONDS,
        "request_id": CLAIM_BODY.fields["request_id"],
    },
)
COMPLETE_BODY = Shape(
    "CompleteBody",
    "Report success; and claim the next job(s) with next.",
    {"lease_token": LEASE_TOKEN, "result": RESULT, "next": NEXT},
    required=("lease_token",),
)
ERROR_MESSAGE = "is required and must be a string"
FAIL_BODY = Shape(
    "FailBody",
    "Report a failed attempt; and claim the next job(s) with next.",
    {
        "lease_token": LEASE_TOKEN,
        "error": Field(
            {
                "type": "string",
                "description": "What went wrong: stored redacted and cut to 4,096 characters; shown to "
                "admins only.",
            },
            ERROR_MESSAGE,
            missing=ERROR_MESSAGE,
        ),
        "retryable": boolean("False fails the job for good, whatever retries remain.", default=True),
        "next": NEXT,
    },
    required=("lease_token", "error"),
)
ID_MESSAGE = f"must be an integer from 1 to {MAX_JOB_ID}"
COMPLETE_ITEM = Shape(
    "CompleteItem",
    "One job of a batch completion.",
    {
        "id": integer(1, MAX_JOB_ID, "The job's id.", missing=ID_MESSAGE),
        "lease_token": LEASE_TOKEN,
        "result": RESULT,
    },
    required=("id", "lease_token"),
    message="must be an object with id, lease_token and an optional result",
)
BATCH_COMPLETE_BODY = Shape(
    "BatchCompleteBody",
    "Up to 100 held jobs to complete; each job may appear once (else 422 on jobs). With next, claim the "
    "next job(s) in the same request, whatever each item's outcome.",
    {
        "jobs": ListOf(
            COMPLETE_ITEM, 1, MAX_BATCH_COMPLETE, f"must be a list of 1 to {MAX_BATCH_COMPLETE} items"
        ),
        "next": NEXT,
    },
    required=("jobs",),
)

SNOOZE_BODY = Shape(
    "SnoozeBody",
    "Hand the held job back to run later, without counting a failure.",
    {
        "lease_token": LEASE_TOKEN,
        "delay_seconds": number(
            MIN_SNOOZE_SECONDS,
            MAX_SNOOZE_SECONDS,
            "When the job becomes claimable again, in seconds from now.",
            missing=f"is required and must be a number from {MIN_SNOOZE_SECONDS} to {MAX_SNOOZE_SECONDS}",
        ),
    },
    required=("lease_token", "delay_seconds"),
)
CANCELLED_BODY = Shape(
    "CancelledBody",
    "Report that the held job stopped because its cancellation was requested.",
    {"lease_token": LEASE_TOKEN},
    required=("lease_token",),
)


# -- claim --------------------------------------------------------------------------------------------

_CLAIMED = frozenset({"error", "idempotency_key"})  # a worker sees neither; the lease token is its own


def _answer(text: str, minimal: bool) -> Response:
    return json_text_response(text, 200, MINIMAL if minimal else None)


@operation(
    "POST",
    "/jobs/claim",
    who=("worker",),
    to="claim jobs",
    summary="Claim the next claimable job(s) (worker)",
    body=CLAIM_BODY,
    minimal=True,
    answers={
        "200": json_answer(
            "A job; or {jobs: [...]} when limit was given. With Prefer: return=minimal, each job is a WorkerJob",
            either("ClaimedJob", CLAIMED_JOBS, WORKER_JOB, WORKER_JOBS),
            APPLIED,
        ),
        "204": {"description": "Nothing claimable (without limit)"},
    },
)
def claim(body: dict[str, Any], minimal: bool):
    types, lease, limit, wait = body["types"], body["lease_seconds"], body["limit"], body["wait_seconds"]
    retry_after = None
    try:
        with queue().claim_request(body["request_id"]):
            jobs = queue().claim_wait(
                g.principal.name, wait_seconds=wait, types=types, limit=limit or 1, lease_seconds=lease
            )
    except WaitingPollsFull:  # nothing now, and no room to wait here: ask again later
        jobs, retry_after = [], str(max(1, min(5, math.ceil(wait / 4))))
    shape, omit = (WORKER_JOB, EMPTY) if minimal else (JOB, _CLAIMED)
    rendered = [render_json(shape, job, omit) for job in jobs]
    if limit is not None:
        response = _answer(json_object({"jobs": json_array(rendered)}), minimal)
    elif not rendered:
        response = Response(status=204)
    else:
        return _answer(rendered[0], minimal)
    if retry_after is not None:
        response.headers["Retry-After"] = retry_after
    return response


# -- reports ------------------------------------------------------------------------------------------


def report_answer(job: JobRecord, minimal: bool) -> Response:
    """The job after a report: where it stands (Prefer: return=minimal), or the whole job."""
    if minimal:
        return _answer(render_json(JOB_STATE, job), True)
    return json_text_response(job_json(job, g.principal))


def _next_claim(then: dict[str, Any]) -> NextClaim:
    return NextClaim(
        then["limit"], then["wait_seconds"], then["types"], then["lease_seconds"], then["request_id"]
    )


def reported_and_claimed(job: JobRecord, jobs: list[JobRecord], minimal: bool) -> Response:
    """The report's answer (as ``report_answer``'s) with the claimed jobs beside it, as ``next``: the
    answer of a claim with a limit."""
    reported = render_json(JOB_STATE, job) if minimal else job_json(job, g.principal)
    return _answer(f'{reported[:-1]}, "next": {_claimed_jobs(jobs, minimal)}}}', minimal)


def _claimed_jobs(jobs: list[JobRecord], minimal: bool) -> str:
    """The jobs a report claimed next, as a claim with a limit answers them: ``{"jobs": [...]}``."""
    shape, omit = (WORKER_JOB, EMPTY) if minimal else (JOB, _CLAIMED)
    return json_object({"jobs": json_array(render_json(shape, claimed, omit) for claimed in jobs)})


def reported_next(description: str) -> dict[str, Any]:
    """A report's answer that may carry ``next``, the jobs claimed with it."""
    return json_answer(
        description,
        {"allOf": [either(JOB, JOB_STATE), schema_of(REPORT_NEXT)]},
        APPLIED,
    )


REPORT_NEXT = Shape(
    "ReportNext",
    "With next in the request: the jobs claimed in the report's request, as a claim with a limit "
    "answers them (WorkerJobs with Prefer: return=minimal).",
    {"next": answer(either(CLAIMED_JOBS, WORKER_JOBS))},
    closed=False,
)


@operation(
    "POST",
    "/jobs/complete",
    who=("worker",),
    to="complete jobs",
    summary="Complete 1 to 100 held jobs; each item is judged alone (worker)",
    body=BATCH_COMPLETE_BODY,
    minimal=True,
    answers={
        "200": json_answer(
            "One result per item, in order; with Prefer: return=minimal a completed item is {id, status} "
            "without its job; with next, the jobs claimed next beside them",
            {"allOf": [schema_of(COMPLETE_RESULTS), schema_of(REPORT_NEXT)]},
            APPLIED,
        )
    },
)
def complete_batch(body: dict[str, Any], minimal: bool):
    parsed: list[tuple[int, str, str | None]] = [
        (item["id"], item["lease_token"], None if item["result"] is None else item["result"].text)
        for item in body["jobs"]
    ]
    ids = [job_id for job_id, _, _ in parsed]
    if len(set(ids)) != len(ids):
        raise invalid("jobs", "each job may appear once")
    worker, then = g.principal.name, body["next"]
    claimed: list[JobRecord] | None = None
    if minimal:  # no job in the answer: the queue layer need not hand any back
        if then is None:
            outcomes = queue().complete_each(worker, parsed)
        else:  # the completions and the claim in one transaction
            outcomes, claimed = queue().complete_each_and_claim(worker, parsed, _next_claim(then))
        out = [
            _item_refused(job_id, refusal) if refusal is not None else f'{{"id": {job_id:d}, "status": 200}}'
            for job_id, refusal in outcomes
        ]
    else:
        out = [
            _item_refused(job_id, outcome)
            if isinstance(outcome, QueueError)
            else f'{{"id": {job_id:d}, "status": 200, "job": {job_json(outcome, g.principal)}}}'
            for job_id, outcome in queue().complete_many(worker, parsed)
        ]
        if then is not None:  # whole jobs: the claim follows in a transaction of its own
            claimed = queue().claim_next(worker, _next_claim(then))
    answer = {"results": json_array(out)}
    if claimed is not None:
        answer["next"] = _claimed_jobs(claimed, minimal)
    return _answer(json_object(answer), minimal)


def _item_refused(job_id: int, refusal: QueueError) -> str:
    """A batch item's result when its report was refused: the problem's type, status and detail."""
    refused = problem_of(refusal)
    error = {"type": f"/problems/{refused.slug}", "status": refused.status, "detail": refused.detail}
    return dumps({"id": job_id, "status": refused.status, "error": error})


@operation(
    "POST",
    "/jobs/<jobid:job_id>/complete",
    who=("worker",),
    to="complete jobs",
    summary="Report success (the lease holder)",
    body=COMPLETE_BODY,
    params=(JOB_ID,),
    minimal=True,
    answers={
        "200": reported_next(
            "The job; with Prefer: return=minimal, where it stands (JobState); with next, the jobs "
            "claimed next beside it"
        ),
        "404": NOT_FOUND,
        "409": NOT_HOLDER,
    },
)
def complete(job_id: int, body: dict[str, Any], minimal: bool):
    result_json = None if body["result"] is None else body["result"].text
    if body["next"] is not None:
        job, jobs = queue().complete_and_claim(
            job_id, g.principal.name, body["lease_token"], result_json, _next_claim(body["next"])
        )
        return reported_and_claimed(job, jobs, minimal)
    return report_answer(
        queue().complete(job_id, g.principal.name, body["lease_token"], result_json), minimal
    )


@operation(
    "POST",
    "/jobs/<jobid:job_id>/heartbeat",
    who=("worker",),
    to="extend leases",
    summary="Extend the lease, and report progress (the lease holder); the answer's cancel_requested says "
    "whether to stop (the compact JobState carries it too)",
    body=HEARTBEAT_BODY,
    params=(JOB_ID,),
    minimal=True,
    answers={
        "200": reported("The job; with Prefer: return=minimal, where it stands (JobState)"),
        "404": NOT_FOUND,
        "409": NOT_HOLDER,
    },
)
def heartbeat(job_id: int, body: dict[str, Any], minimal: bool):
    token, lease = body["lease_token"], body["lease_seconds"]
    percent, message = body["progress"], body["progress_message"]
    if percent is None and message is None:
        job = queue().heartbeat(job_id, g.principal.name, token, lease)
    else:  # with a progress report (queue/running.py)
        job = queue().progress(
            job_id, g.principal.name, token, percent=percent, message=message, lease_seconds=lease
        )
    return report_answer(job, minimal)


@operation(
    "POST",
    "/jobs/<jobid:job_id>/fail",
    who=("worker",),
    to="fail jobs",
    summary="Report failure (the lease holder)",
    body=FAIL_BODY,
    params=(JOB_ID,),
    minimal=True,
    answers={
        "200": reported_next(
            "The job, pending again or failed (cancelled when its cancellation was requested); with "
            "Prefer: return=minimal, where it stands; with next, the jobs claimed next beside it"
        ),
        "404": NOT_FOUND,
        "409": NOT_HOLDER,
    },
)
def fail(job_id: int, body: dict[str, Any], minimal: bool):
    token, error, retryable = body["lease_token"], body["error"], body["retryable"]
    if body["next"] is not None:
        job, jobs = queue().fail_and_claim(
            job_id, g.principal.name, token, error, retryable, _next_claim(body["next"])
        )
        return reported_and_claimed(job, jobs, minimal)
    return report_answer(queue().fail(job_id, g.principal.name, token, error, retryable=retryable), minimal)


# -- running jobs (docs/running-jobs.md): progress rides on the heartbeat, cancel requests on POST
# /jobs/{id}/cancel (jobs.py) -----------------------------------------------------------------------


@operation(
    "POST",
    "/jobs/<jobid:job_id>/snooze",
    who=("worker",),
    to="snooze jobs",
    summary="Hand a held job back to run later, not counted as a failure (the lease holder)",
    body=SNOOZE_BODY,
    params=(JOB_ID,),
    minimal=True,
    answers={
        "200": reported(
            "The job, pending (or cancelled, when that was requested); with Prefer: return=minimal, where "
            "it stands"
        ),
        "404": NOT_FOUND,
        "409": problem(
            Configured(text="Not the lease holder; or invalid-state: snoozed {MAX_SNOOZES} times already")
        ),
    },
)
def snooze(job_id: int, body: dict[str, Any], minimal: bool):
    job = queue().snooze(job_id, g.principal.name, body["lease_token"], body["delay_seconds"])
    return report_answer(job, minimal)


@operation(
    "POST",
    "/jobs/<jobid:job_id>/cancelled",
    who=("worker",),
    to="report cancelled jobs",
    summary="Report that a held job stopped because its cancellation was requested (the lease holder)",
    body=CANCELLED_BODY,
    params=(JOB_ID,),
    minimal=True,
    answers={
        "200": reported("The job, cancelled; with Prefer: return=minimal, where it stands"),
        "404": NOT_FOUND,
        "409": problem("Not the lease holder; or invalid-state: no cancellation was requested"),
    },
)
def cancelled(job_id: int, body: dict[str, Any], minimal: bool):
    job = queue().stop_cancelled(job_id, g.principal.name, body["lease_token"])
    return report_answer(job, minimal)
