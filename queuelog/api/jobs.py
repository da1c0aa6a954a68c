"""Endpoints for producers and admins: enqueue, read, cancel, retry."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from flask import g, request, url_for

from queuelog.api.base import (
    MAX_BATCH_ENQUEUE,
    bp,
    job_json,
    json_response,
    queue,
    requires,
    rfc3339,
    visible_job,
)
from queuelog.api.problems import ApiError, invalid
from queuelog.api.validation import (
    batch_items,
    batch_key,
    check_fields,
    header_text,
    int_in_range,
    parse_job,
    parse_priority,
    parse_status,
    printable,
    read_body,
)
from queuelog.auth import Principal
from queuelog.inputs import ascii_int

# -- enqueue ------------------------------------------------------------------------------------------


@bp.post("/jobs")
@requires("producer")
def enqueue():
    """Enqueue jobs."""
    body = read_body()
    spec = parse_job(body, header_key=header_text("Idempotency-Key"))
    principal: Principal = g.principal
    _check_ceiling(spec.priority, principal)
    job, created = queue().enqueue(principal.name, spec)
    location = {"Location": url_for("api.get_job", job_id=job.id)}
    return json_response(job_json(job, principal), 201 if created else 200, location)


def _check_ceiling(priority: int, principal: Principal, where: str = "") -> None:
    if priority > principal.max_priority:
        raise ApiError(403, "forbidden", f"{where}producers may enqueue low and medium priority only")


@bp.post("/jobs/batch")
@requires("producer")
def enqueue_batch():
    """Enqueue jobs."""
    items = batch_items(read_body(), MAX_BATCH_ENQUEUE, "job bodies")
    header_key = header_text("Idempotency-Key")
    specs = [
        parse_job(item, prefix=f"jobs[{i}].", header_key=batch_key(header_key, i))
        for i, item in enumerate(items)
    ]
    principal: Principal = g.principal
    for i, spec in enumerate(specs):
        _check_ceiling(spec.priority, principal, f"jobs[{i}]: ")
    results = queue().enqueue_many(principal.name, specs)
    created = any(new for _, new in results)  # a full replay made nothing new: 200, like a single job
    return json_response({"jobs": [job_json(job, principal) for job, _ in results]}, 201 if created else 200)


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
        limit = int_in_range(ascii_int(args["limit"], max_digits=3), "limit", 1, 200)
    before = decode_cursor(args["cursor"]) if "cursor" in args else None
    owner = None if principal.is_admin else principal.name
    jobs = queue().list_jobs(owner=owner, before_id=before, limit=limit + 1, **filters)
    next_cursor = encode_cursor(jobs[limit - 1].id) if len(jobs) > limit else None
    return json_response({"jobs": [job_json(j, principal) for j in jobs[:limit]], "next_cursor": next_cursor})


def encode_cursor(last_id: int) -> str:
    return base64.urlsafe_b64encode(f"id:{last_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, _, value = text.partition(":")
        job_id = ascii_int(value)
        if kind != "id" or job_id is None:
            raise ValueError
        return job_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid("cursor", "is not a cursor this API returned") from None


@bp.get("/jobs/<jobid:job_id>")
@requires("producer", "worker")
def get_job(job_id: int):
    """Read jobs."""
    job = visible_job(queue().get(job_id), g.principal, job_id)
    return json_response(job_json(job, g.principal))


@bp.get("/jobs/<jobid:job_id>/events")
@requires("producer")
def job_events(job_id: int):
    """Read job events."""
    principal: Principal = g.principal
    visible_job(queue().get(job_id), principal, job_id)
    events = []
    for event in queue().events(job_id):
        item = {"id": event.id, "event": event.event, "actor": event.actor, "attempt": event.attempt}
        item["at"] = rfc3339(event.at)
        if principal.is_admin:
            item["error"] = event.error
        events.append(item)
    return json_response({"events": events})


# -- people -------------------------------------------------------------------------------------------


@bp.post("/jobs/<jobid:job_id>/cancel")
@requires("producer")
def cancel(job_id: int):
    """Cancel jobs."""
    check_fields(read_body(), ())  # an empty body is fine; a malformed one or any field is an error
    principal: Principal = g.principal
    job = queue().cancel(job_id, principal.name, owner=None if principal.is_admin else principal.name)
    return json_response(job_json(job, principal))


@bp.post("/jobs/<jobid:job_id>/retry")
@requires("admin")
def retry(job_id: int):
    """Retry jobs."""
    check_fields(read_body(), ())
    job = queue().retry(job_id, g.principal.name)
    return json_response(job_json(job, g.principal))
