"""Jobs for producers and admins (docs/api.md): enqueue one or a batch, list, read, read the history,
cancel, retry. Their request shapes are declared here, beside the operations (registry.py); a job as
answered is ``answers.JOB``, which the workers' operations (workers.py) answer too."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from flask import current_app, g, url_for

from queuelog.api.answers import EVENT, EVENTS, JOB, JOB_LIST, JOBS
from queuelog.api.base import job_json, json_response, queue, visible_job
from queuelog.api.fields import (
    Json,
    choice,
    document,
    integer,
    number,
    payload_path,
    priority,
    text,
    timestamp,
)
from queuelog.api.problems import MAX_ERRORS, ApiError, fields_named, invalid, refused
from queuelog.api.registry import (
    EMPTY_BODY,
    JOB_ANSWER,
    JOB_ID,
    NOT_FOUND,
    Header,
    json_answer,
    location,
    operation,
    problem,
)
from queuelog.api.render import json_array, json_object, json_text_response, text_or_null
from queuelog.api.shapes import Field, ListOf, Shape, entries, join
from queuelog.inputs import ascii_int
from queuelog.models import STATUSES
from queuelog.queue import JobSearch, JobSpec, QueueError
from queuelog.queue.console import Console
from queuelog.queue.principal import Principal

MAX_BATCH_ENQUEUE = 500
MAX_DELAY_SECONDS = 366 * 24 * 3600
MAX_RETRIES_LIMIT = 25
MAX_BATCH_KEY = 250  # leaves room for "#499" within the 255 characters of a key
MAX_DEPENDENCIES = 100
MAX_JOB_ID = 2**63 - 1

JOB_ID_FIELD = integer(1, MAX_JOB_ID, "A job id.")
DEPENDS_ON = ListOf(
    JOB_ID_FIELD,
    1,
    MAX_DEPENDENCIES,
    f"must be a list of 1 to {MAX_DEPENDENCIES} job ids",
    nullable=True,
    description="Jobs this one waits for (docs/workflows.md): ids of jobs the caller may see, each at most"
    " once. The job starts waiting, and becomes pending when they have all finished.",
)
ON_DEPENDENCY_FAILURE = choice(
    ("cancel", "run"),
    "What a failed or cancelled dependency does to this job: cancel it (and the jobs waiting on it), or"
    " run it anyway once all its dependencies have finished.",
    default="cancel",
)

JOB_BODY = Shape(
    "JobBody",
    "One job to enqueue: the body of POST /jobs, or an item of POST /jobs/batch.",
    {
        "type": text(64, "The job type: an enabled type of the allowlist (else 422, which names them)."),
        "payload": document(
            "The job's input. When its type has a JSON Schema the payload must match it (else 422 naming "
            "the path, e.g. payload.lines[1]).",
            default={},
        ),
        "priority": priority("Producers may use low and medium only (else 403).", default="low"),
        "max_retries": integer(
            0, MAX_RETRIES_LIMIT, "Failed attempts retried before the job fails.", default=3
        ),
        "idempotency_key": text(
            255,
            "The same owner, key and parameters answer 200 with the existing job; other parameters are 422 "
            "idempotency-key-reused. Must equal the Idempotency-Key header when both are sent.",
            nullable=True,
        ),
        "run_at": timestamp(
            "When the job becomes claimable (a time in the past counts as now). Not with delay_seconds."
        ),
        "delay_seconds": number(
            0,
            MAX_DELAY_SECONDS,
            "Seconds from now until the job becomes claimable. Not with run_at.",
            nullable=True,
        ),
        "depends_on": DEPENDS_ON,
        "on_dependency_failure": ON_DEPENDENCY_FAILURE,
    },
    required=("type",),
    exclusive=("run_at", "delay_seconds", "give run_at or delay_seconds, not both"),
)
BATCH_BODY = Shape(
    "BatchBody",
    "Up to 500 jobs, made all or nothing; a 422 names the index, e.g. jobs[3].type.",
    {
        "jobs": ListOf(
            JOB_BODY, 1, MAX_BATCH_ENQUEUE, f"must be a list of 1 to {MAX_BATCH_ENQUEUE} job bodies"
        )
    },
    required=("jobs",),
)
IDEMPOTENCY_KEY = text(
    255, "The idempotency key of the job (the body's idempotency_key, if sent, must equal it)."
)
BATCH_IDEMPOTENCY_KEY = text(MAX_BATCH_KEY, "One key for the whole batch: job i gets the key KEY#i.")


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str, field: str = "cursor") -> int:
    try:
        value = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, number = value.partition(":")
        job_id = ascii_int(number)
        if kind != "id" or job_id is None:
            raise ValueError
        return job_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid(field, "is not a cursor this API returned") from None


LIST_QUERY = Shape(
    "JobListQuery",
    "The query of GET /jobs: filters, page size and the cursor of the next page. status, type and priority"
    " choose the candidates through indexes; the other filters are checked on at most QUEUELOG_SEARCH_SCAN"
    " of them per page (docs/console.md#search), and window_full in the answer says a page stopped there.",
    {
        "status": choice(STATUSES, "Only jobs in this state."),
        "type": text(64, "Only jobs of this type."),
        "priority": priority("Only jobs of this priority."),
        "batch_id": integer(1, MAX_JOB_ID, "Only the members of this batch (docs/workflows.md)."),
        "worker": text(
            64, "Only jobs last held by this worker (its key's name). Checked on the window of candidates."
        ),
        "created_from": timestamp(
            "Only jobs created at or after this time. Checked on the window of candidates."
        ),
        "created_to": timestamp("Only jobs created before this time. Checked on the window of candidates."),
        "finished_from": timestamp(
            "Only jobs finished at or after this time. Checked on the window of candidates."
        ),
        "finished_to": timestamp("Only jobs finished before this time. Checked on the window of candidates."),
        "error": text(
            200,
            "Admins only: jobs whose latest (redacted) error contains this text, in any ASCII case, taken"
            " literally. Checked on the window of candidates.",
        ),
        "payload_path": payload_path(
            "With payload_value: the keys of a payload field, separated by dots (to, customer.email)."
        ),
        "payload_value": text(
            200,
            "With payload_path: the field's value written as text (a string as it is, 42, true). Checked"
            " on the window of candidates.",
        ),
        "limit": integer(1, 200, "Jobs per page; ASCII digits.", default=50),
        "cursor": Field(
            {
                "type": "string",
                "pattern": "^[A-Za-z0-9_-]{6,28}$",
                "description": "The next_cursor of the previous page, as it was answered.",
            },
            "is not a cursor this API returned",
            check=decode_cursor,
        ),
    },
)


# -- enqueue ------------------------------------------------------------------------------------------


def dependencies(values: dict[str, Any], path: str) -> tuple[int, ...]:
    """The body's ``depends_on`` ids; a repeated id is a 422 naming its second place."""
    ids = values.get("depends_on") or []
    seen: set[int] = set()
    for i, job_id in enumerate(ids):
        if job_id in seen:
            raise invalid(join(path, f"depends_on[{i}]"), f"repeats job {job_id}")
        seen.add(job_id)
    return tuple(ids)


def job_spec(
    values: dict[str, Any], path: str, header_key: str | None, *, after: tuple[int, ...] = ()
) -> JobSpec:
    """A ``JobSpec`` from a job body that ``JOB_BODY`` accepted; ``header_key`` is already checked.
    ``after``: the indexes of earlier jobs of the request it waits for (a batch's refs)."""
    key = values["idempotency_key"]
    if header_key is not None:
        if key is not None and key != header_key:
            raise invalid(join(path, "idempotency_key"), "differs from the Idempotency-Key header")
        key = header_key
    payload = values["payload"]
    return JobSpec(
        type=values["type"],
        payload=payload.value,
        payload_json=payload.text,
        priority=values["priority"],
        max_retries=values["max_retries"],
        idempotency_key=key,
        run_at=values["run_at"],
        delay_seconds=values["delay_seconds"],
        depends_on=dependencies(values, path),
        after=after,
        on_dependency_failure="run" if values.get("on_dependency_failure") == "run" else None,
    )


def _with_type_checks(refusal: ApiError, bodies: list[tuple[str, Any]]) -> ApiError:
    """A refused body's 422 with what the queue layer says of its jobs' types and payloads (an unknown
    type, a payload its type's schema refuses), for each job whose type and payload the 422 does not
    name: one answer names each bad field, up to the bound of ``refused``."""
    more: list[dict[str, Any]] = []
    for path, body in bodies:
        if len(refusal.errors or ()) + len(more) >= MAX_ERRORS:
            break
        good = JOB_BODY.good_part(body, refusal, path)
        if "type" not in good:
            continue
        named = fields_named(refusal, path)
        payload = good.get("payload") or Json({}, "{}")
        try:
            queue().types.check([JobSpec(good["type"], payload.value, payload.text)])
        except QueueError as exc:
            for entry in entries(exc):
                if entry["field"].split(".")[0].split("[")[0] not in named:
                    more.append({**entry, "field": join(path, entry["field"])})
    return refused([*(refusal.errors or []), *more]) if more else refusal


def _batch_refused(refusal: ApiError, raw: dict[str, Any]) -> ApiError:
    jobs = raw.get("jobs")
    if not isinstance(jobs, list) or len(jobs) > MAX_BATCH_ENQUEUE:
        return refusal
    return _with_type_checks(refusal, [(f"jobs[{i}]", job) for i, job in enumerate(jobs)])


@operation(
    "POST",
    "/jobs",
    who=("producer",),
    to="enqueue jobs",
    summary="Enqueue a job (producer, admin)",
    body=JOB_BODY,
    headers=(Header("Idempotency-Key", IDEMPOTENCY_KEY, "header_key"),),
    answers={
        "201": json_answer("Created", JOB, location("job")),
        "200": json_answer("An idempotent replay: the existing job", JOB, location("job")),
        "422": problem("Invalid input, or idempotency-key-reused"),
    },
    refused=lambda refusal, raw: _with_type_checks(refusal, [("", raw)]),
)
def enqueue(body: dict[str, Any], header_key: str | None):
    try:
        spec = job_spec(body, "", header_key)
    except ApiError as refusal:  # the body's key differs from the header's: name the type's faults too
        raw = {"type": body["type"], "payload": body["payload"].value}
        raise _with_type_checks(refusal, [("", raw)]) from None
    principal: Principal = g.principal
    principal.check_priority(spec.priority)
    job, created = queue().enqueue(principal.name, spec, scope=principal.owner_scope)
    location = {"Location": url_for("api.get_job", job_id=job.id)}
    return json_text_response(job_json(job, principal), 201 if created else 200, location)


@operation(
    "POST",
    "/jobs/batch",
    who=("producer",),
    to="enqueue jobs",
    summary="Enqueue 1 to 500 jobs at once, all or nothing (producer, admin)",
    body=BATCH_BODY,
    headers=(Header("Idempotency-Key", BATCH_IDEMPOTENCY_KEY, "header_key"),),
    answers={
        "201": json_answer("The jobs, in order (at least one new)", JOBS),
        "200": json_answer("A replay: every job existed", JOBS),
    },
    refused=_batch_refused,
)
def enqueue_batch(body: dict[str, Any], header_key: str | None):
    keys = [None if header_key is None else f"{header_key}#{i}" for i in range(len(body["jobs"]))]
    specs = [job_spec(item, f"jobs[{i}]", keys[i]) for i, item in enumerate(body["jobs"])]
    principal: Principal = g.principal
    first_use: dict[str, int] = {}
    for i, spec in enumerate(specs):
        principal.check_priority(spec.priority, f"jobs[{i}].priority")
        key = spec.idempotency_key
        if key is not None and first_use.setdefault(key, i) != i:
            raise invalid(f"jobs[{i}].idempotency_key", f"repeats the key of jobs[{first_use[key]}]")
    results = queue().enqueue_many(principal.name, specs, scope=principal.owner_scope)
    created = any(new for _, new in results)  # a full replay made nothing new: 200, like a single job
    jobs = json_array(job_json(job, principal) for job, _ in results)
    return json_text_response(json_object({"jobs": jobs}), 201 if created else 200)


_SEARCHED = [name for name in JobSearch._fields if name not in ("id", "owner", "ids")]  # ids: the pages'


@operation(
    "GET",
    "/jobs",
    who=("producer",),
    to="list jobs",
    summary="List jobs, newest first (producers see their own)",
    query=LIST_QUERY,
    answers={"200": json_answer("A page", JOB_LIST)},
)
def list_jobs(query: dict[str, Any]):
    principal: Principal = g.principal
    if query["error"] is not None and not principal.sees_errors:
        raise invalid("error", "may be used by admins only")
    if (query["payload_path"] is None) != (query["payload_value"] is None):
        missing = "payload_value" if query["payload_value"] is None else "payload_path"
        raise invalid(missing, "is required with payload_path and payload_value")
    search = JobSearch(
        owner=principal.owner_scope,
        **{name: query[name] for name in _SEARCHED if query[name] is not None},
    )
    config = current_app.config["QUEUELOG"]
    page = Console(queue(), scan=config["SEARCH_SCAN"]).search(
        search, before_id=query["cursor"], limit=query["limit"]
    )
    next_cursor = encode_cursor(page.next_before) if page.next_before is not None else None
    jobs = json_array(job_json(j, principal) for j in page.jobs)
    answer = {
        "jobs": jobs,
        "next_cursor": text_or_null(next_cursor),
        "window_full": "true" if page.window_full else "false",
    }
    return json_text_response(json_object(answer))


@operation(
    "GET",
    "/jobs/<jobid:job_id>",
    who=("producer", "worker"),
    to="read jobs",
    summary="Read a job (owner, admin, the worker holding it)",
    params=(JOB_ID,),
    answers={"200": JOB_ANSWER, "404": NOT_FOUND},
)
def get_job(job_id: int):
    job = visible_job(queue().get(job_id), g.principal, job_id)
    return json_text_response(job_json(job, g.principal))


@operation(
    "GET",
    "/jobs/<jobid:job_id>/events",
    who=("producer",),
    to="read job events",
    summary="A job's history (owner, admin)",
    params=(JOB_ID,),
    answers={"200": json_answer("Events", EVENTS), "404": NOT_FOUND},
)
def job_events(job_id: int):
    principal: Principal = g.principal
    visible_job(queue().get(job_id), principal, job_id)
    omit = frozenset() if principal.sees_errors else frozenset({"error"})
    return json_response({"events": [EVENT.render(event, omit) for event in queue().events(job_id)]})


# -- people -------------------------------------------------------------------------------------------


@operation(
    "POST",
    "/jobs/<jobid:job_id>/cancel",
    who=("producer",),
    to="cancel jobs",
    summary="Cancel a pending job, or ask the worker of a running one to stop it (owner, admin)",
    body=EMPTY_BODY,
    params=(JOB_ID,),
    answers={
        "200": json_answer("The job, cancelled", JOB),
        "202": json_answer("The job, still running, with cancel_requested: its worker stops it", JOB),
        "404": NOT_FOUND,
        "409": problem("Neither pending nor running"),
    },
)
def cancel(job_id: int, body: dict[str, Any]):
    principal: Principal = g.principal
    job = queue().cancel(job_id, principal.name, owner=principal.cancel_scope)
    # 202: a running job's cancellation is asked for; its worker stops it (docs/running-jobs.md)
    return json_text_response(job_json(job, principal), 202 if job.status == "running" else 200)


@operation(
    "POST",
    "/jobs/<jobid:job_id>/retry",
    who=("admin",),
    to="retry jobs",
    summary="Retry a failed or cancelled job (admin)",
    body=EMPTY_BODY,
    params=(JOB_ID,),
    answers={"200": JOB_ANSWER, "404": NOT_FOUND, "409": problem("Not failed or cancelled")},
)
def retry(job_id: int, body: dict[str, Any]):
    job = queue().retry(job_id, g.principal.name)
    return json_text_response(job_json(job, g.principal))
