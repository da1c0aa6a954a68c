"""Batches (docs/workflows.md): create one with up to 1,000 jobs (dependencies between them by ``ref``) and
callbacks, list and read them, cancel one, retry one (admins), and let a worker that holds one of its
running members add jobs to it. Jobs that wait for other jobs are enqueued through ``POST /jobs`` (jobs.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from flask import g, url_for

from queuelog.api.answers import moment
from queuelog.api.base import json_text_response, queue
from queuelog.api.fields import answer, array, choice, document, integer, priority, text
from queuelog.api.jobs import (
    DEPENDS_ON,
    IDEMPOTENCY_KEY,
    JOB_BODY,
    MAX_JOB_ID,
    decode_cursor,
    encode_cursor,
    job_spec,
)
from queuelog.api.problems import invalid
from queuelog.api.registry import Header, json_answer, location, operation, path_parameter, problem
from queuelog.api.render import json_array, json_object, render_json, text_or_null
from queuelog.api.shapes import Field, ListOf, Shape
from queuelog.api.validation import request_bytes
from queuelog.models import BATCH_STATUSES, STATUSES
from queuelog.queue import JobSpec
from queuelog.queue.inputs import DEFAULT_MAX_RETRIES, MAX_RETRIES_LIMIT
from queuelog.queue.principal import Principal
from queuelog.queue.workflows import MAX_BATCH_JOBS, MAX_DEPENDENCIES, batch_fingerprint

REF_LENGTH = 64


def _job_or_ref(value: Any, path: str) -> int | str:
    if type(value) is int and 1 <= value <= MAX_JOB_ID:
        return value
    if isinstance(value, str) and 1 <= len(value) <= REF_LENGTH and value.isprintable():
        return value
    raise invalid(
        path, f"must be a job id or the ref of an earlier job of the batch (1 to {REF_LENGTH} characters)"
    )


JOB_OR_REF = Field(
    {
        "anyOf": [
            {"type": "integer", "minimum": 1, "maximum": MAX_JOB_ID},
            {"type": "string", "minLength": 1, "maxLength": REF_LENGTH},
        ],
        "description": "A job id, or the ref of an earlier job of the same request.",
    },
    "must be a job id or the ref of an earlier job of the batch",
    check=_job_or_ref,
)
_MEMBER_FIELDS = {name: field for name, field in JOB_BODY.fields.items() if name != "idempotency_key"}
_MEMBER_FIELDS["ref"] = text(
    REF_LENGTH, "A name for this job within the request, by which later jobs may depend on it.", nullable=True
)
_MEMBER_FIELDS["depends_on"] = ListOf(
    JOB_OR_REF,
    1,
    MAX_DEPENDENCIES,
    f"must be a list of 1 to {MAX_DEPENDENCIES} job ids or refs",
    nullable=True,
    description=DEPENDS_ON.schema.get("description", "") + " Ids, or refs of earlier jobs of the request.",
)
MEMBER_BODY = Shape(
    "BatchJobBody",
    "One job of a batch: a job body (without idempotency_key: the batch has one) with an optional ref.",
    _MEMBER_FIELDS,
    required=("type",),
    exclusive=JOB_BODY.exclusive,
)
CALLBACK_BODY = Shape(
    "CallbackBody",
    "A callback job: enqueued (pending, for the batch's owner) when the batch finishes.",
    {
        "type": JOB_BODY.fields["type"],
        "payload": document("The callback job's input.", default={}),
        "priority": priority("Producers may use low and medium only (else 403).", default="low"),
        "max_retries": integer(0, MAX_RETRIES_LIMIT, "Failed attempts retried.", default=DEFAULT_MAX_RETRIES),
    },
    required=("type",),
)
CREATE_BODY = Shape(
    "BatchCreate",
    f"Up to {MAX_BATCH_JOBS:,} jobs, made all or none (a 422 names the item: jobs[3].type), and callbacks.",
    {
        "description": text(500, "What the batch is for.", nullable=True),
        "jobs": ListOf(MEMBER_BODY, 1, MAX_BATCH_JOBS, f"must be a list of 1 to {MAX_BATCH_JOBS} job bodies"),
        "on_success": CALLBACK_BODY,
        "on_finish": CALLBACK_BODY,
    },
    required=("jobs",),
)
ADD_BODY = Shape(
    "BatchAdd",
    "Jobs a worker adds to the batch of a job it holds: the lease_token of that job, and the jobs.",
    {
        "lease_token": text(64, "The lease token of a running member of the batch that the caller holds."),
        "jobs": ListOf(MEMBER_BODY, 1, MAX_BATCH_JOBS, f"must be a list of 1 to {MAX_BATCH_JOBS} job bodies"),
    },
    required=("lease_token", "jobs"),
)
LIST_QUERY = Shape(
    "BatchListQuery",
    "The query of GET /batches.",
    {
        "status": choice(BATCH_STATUSES, "Only batches in this state."),
        "owner": text(64, "Admins only: only this user's batches."),
        "limit": integer(1, 200, "Batches per page; ASCII digits.", default=50),
        "cursor": Field(
            {
                "type": "string",
                "pattern": "^[A-Za-z0-9_-]{6,28}$",
                "description": "The previous next_cursor.",
            },
            "is not a cursor this API returned",
            check=decode_cursor,
        ),
    },
)
BATCH = Shape(
    "Batch",
    "A batch: its members (ids, in the order they were enqueued), their counts by status, its callbacks.",
    {
        "id": answer({"type": "integer"}),
        "description": answer({"type": "string"}),
        "owner": answer({"type": "string"}),
        "status": answer({"type": "string", "enum": list(BATCH_STATUSES)}),
        "total": answer({"type": "integer"}, "How many members (callbacks are not members)."),
        "counts": answer(
            {"type": "object", "properties": {s: {"type": "integer"} for s in STATUSES}},
            "Members by status.",
        ),
        "jobs": answer({"type": "array", "items": {"type": "integer"}}, "The members' ids.", out=list),
        "on_success_job": answer({"type": ["integer", "null"]}, "The on_success callback's job, once made."),
        "on_finish_job": answer({"type": ["integer", "null"]}, "The on_finish callback's job, once made."),
        "created_at": moment(),
        "updated_at": moment(),
        "finished_at": moment("When its last member finished; null while it runs."),
    },
    required=(
        "id",
        "description",
        "owner",
        "status",
        "total",
        "counts",
        "jobs",
        "on_success_job",
        "on_finish_job",
        "created_at",
        "finished_at",
    ),
    closed=False,
)
BATCH_LIST = Shape(
    "BatchList",
    "A page of batches, newest first.",
    {"batches": array(BATCH), "next_cursor": answer({"type": ["string", "null"]})},
    required=("batches", "next_cursor"),
    closed=False,
)
ADDED = Shape(
    "BatchAdded",
    "The ids of the jobs added, in order.",
    {"jobs": answer({"type": "array", "items": {"type": "integer"}})},
    required=("jobs",),
    closed=False,
)
BATCH_ID = path_parameter(
    "batch_id", "ASCII digits only, at most 18 of them.", {"type": "integer", "minimum": 1}
)
NOT_FOUND = problem("No such batch, or one the caller may not see")


def batch_json(batch: Any) -> str:
    return render_json(BATCH, batch)


def member_specs(items: list[dict[str, Any]], path: str = "jobs") -> list[JobSpec]:
    """The jobs of a batch, their refs turned into the indexes of the earlier jobs they name."""
    refs: dict[str, int] = {}
    specs = []
    for i, item in enumerate(items):
        here = f"{path}[{i}]"
        ids: list[int] = []
        after: list[int] = []
        for k, dep in enumerate(item.get("depends_on") or []):
            where = f"{here}.depends_on[{k}]"
            if isinstance(dep, str):
                if dep not in refs:
                    later = any(other.get("ref") == dep for other in items[i:])
                    raise invalid(
                        where, "names a later job of the batch" if later else f"names no job: {dep!r}"
                    )
                if refs[dep] in after:
                    raise invalid(where, f"repeats {dep!r}")
                after.append(refs[dep])
            else:
                if dep in ids:
                    raise invalid(where, f"repeats job {dep}")
                ids.append(dep)
        ref = item.get("ref")
        if ref is not None:
            if ref in refs:
                raise invalid(f"{here}.ref", f"repeats the ref of {path}[{refs[ref]}]")
            refs[ref] = i
        values = {**item, "depends_on": None, "idempotency_key": None}
        spec = job_spec(values, here, None, after=tuple(after))
        specs.append(replace(spec, depends_on=tuple(ids)))
    return specs


def callback_spec(values: dict[str, Any] | None) -> JobSpec | None:
    if values is None:
        return None
    payload = values["payload"]
    return JobSpec(
        type=values["type"],
        payload=payload.value,
        payload_json=payload.text,
        priority=values["priority"],
        max_retries=values["max_retries"],
    )


def _raw_body() -> Any:
    try:
        return json.loads(request_bytes() or b"{}")
    except ValueError:  # read_body refused it already; unreachable
        return None


@operation(
    "POST",
    "/batches",
    who=("producer",),
    to="enqueue jobs",
    summary="Enqueue a batch of 1 to 1,000 jobs, all or none, with callbacks (producer, admin)",
    body=CREATE_BODY,
    headers=(Header("Idempotency-Key", IDEMPOTENCY_KEY, "header_key"),),
    answers={
        "201": json_answer("The batch", BATCH, location("batch")),
        "200": json_answer("A replay: the batch the key made", BATCH, location("batch")),
        "422": problem("Invalid input (naming jobs[i].field), or idempotency-key-reused"),
    },
)
def create_batch(body: dict[str, Any], header_key: str | None):
    principal: Principal = g.principal
    specs = member_specs(body["jobs"])
    on_success, on_finish = callback_spec(body["on_success"]), callback_spec(body["on_finish"])
    for i, spec in enumerate(specs):
        principal.check_priority(spec.priority, f"jobs[{i}].priority")
    for name, callback in (("on_success", on_success), ("on_finish", on_finish)):
        if callback is not None:
            principal.check_priority(callback.priority, f"{name}.priority")
    batch, created = queue().create_batch(
        principal.name,
        specs,
        description=body["description"] or "",
        on_success=on_success,
        on_finish=on_finish,
        idempotency_key=header_key,
        fingerprint=batch_fingerprint(_raw_body()) if header_key else None,
        scope=principal.owner_scope,
    )
    headers = {"Location": url_for("api.get_batch", batch_id=batch.id)}
    return json_text_response(batch_json(batch), 201 if created else 200, headers)


@operation(
    "GET",
    "/batches",
    who=("producer",),
    to="list batches",
    summary="List batches, newest first (producers see their own)",
    query=LIST_QUERY,
    answers={"200": json_answer("A page", BATCH_LIST)},
)
def list_batches(query: dict[str, Any]):
    principal: Principal = g.principal
    owner = principal.owner_scope
    if query["owner"] is not None:
        if owner is not None:
            raise invalid("owner", "may be used by admins only")
        owner = query["owner"]
    limit = query["limit"]
    batches = queue().list_batches(
        owner=owner, status=query["status"], before_id=query["cursor"], limit=limit + 1
    )
    more = len(batches) > limit
    batches = batches[:limit]
    next_cursor = encode_cursor(batches[-1].id) if more else None
    answer_ = {
        "batches": json_array(batch_json(b) for b in batches),
        "next_cursor": text_or_null(next_cursor),
    }
    return json_text_response(json_object(answer_))


@operation(
    "GET",
    "/batches/<jobid:batch_id>",
    who=("producer",),
    to="read batches",
    summary="Read a batch (owner, admin)",
    params=(BATCH_ID,),
    answers={"200": json_answer("The batch", BATCH), "404": NOT_FOUND},
)
def get_batch(batch_id: int):
    principal: Principal = g.principal
    return json_text_response(batch_json(queue().get_batch(batch_id, owner=principal.owner_scope)))


@operation(
    "POST",
    "/batches/<jobid:batch_id>/cancel",
    who=("producer",),
    to="cancel batches",
    summary="Cancel a batch's pending and waiting jobs; ask the workers of its running ones to stop (owner, admin)",
    body=Shape("BatchCancelBody", "No fields: an empty body or {}.", {}),
    params=(BATCH_ID,),
    answers={"202": json_answer("The batch", BATCH), "404": NOT_FOUND},
)
def cancel_batch(batch_id: int, body: dict[str, Any]):
    principal: Principal = g.principal
    batch = queue().cancel_batch(batch_id, principal.name, owner=principal.cancel_scope)
    return json_text_response(batch_json(batch), 202)


@operation(
    "POST",
    "/batches/<jobid:batch_id>/retry",
    who=("admin",),
    to="retry batches",
    summary="Retry a batch's failed and cancelled jobs; the batch runs again (admin)",
    body=Shape("BatchRetryBody", "No fields: an empty body or {}.", {}),
    params=(BATCH_ID,),
    answers={"200": json_answer("The batch", BATCH), "404": NOT_FOUND},
)
def retry_batch(batch_id: int, body: dict[str, Any]):
    return json_text_response(batch_json(queue().retry_batch(batch_id, g.principal.name)))


@operation(
    "POST",
    "/batches/<jobid:batch_id>/jobs",
    who=("worker",),
    to="add jobs to batches",
    summary="Add jobs to the batch of a job the caller holds (worker)",
    body=ADD_BODY,
    params=(BATCH_ID,),
    answers={
        "201": json_answer("The ids of the jobs added", ADDED),
        "409": problem(
            "The caller holds no running member of the batch (not-lease-holder), or it is finished"
        ),
    },
)
def add_jobs(batch_id: int, body: dict[str, Any]):
    principal: Principal = g.principal
    specs = member_specs(body["jobs"])
    jobs = queue().add_to_batch(batch_id, principal.name, body["lease_token"], specs)
    return json_text_response(json_object({"jobs": json_array(str(job.id) for job in jobs)}), 201)
