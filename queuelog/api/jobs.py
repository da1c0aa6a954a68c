"""Endpoints for producers and admins: enqueue, read, cancel, retry."""

from __future__ import annotations

from flask import g, request, url_for

from queuelog.api.answers import EVENT
from queuelog.api.base import (
    bp,
    job_json,
    json_response,
    queue,
    requires,
    visible_job,
)
from queuelog.api.problems import ApiError, invalid
from queuelog.api.schemas import BATCH_BODY, EMPTY_BODY, LIST_QUERY, encode_cursor
from queuelog.api.validation import (
    batch_key,
    header_text,
    job_spec,
    parse_job,
    query_values,
    read_body,
)
from queuelog.auth import Principal

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
    items = BATCH_BODY.parse(read_body())["jobs"]
    header_key = header_text("Idempotency-Key")
    specs = [job_spec(item, f"jobs[{i}]", batch_key(header_key, i)) for i, item in enumerate(items)]
    principal: Principal = g.principal
    first_use: dict[str, int] = {}
    for i, spec in enumerate(specs):
        _check_ceiling(spec.priority, principal, f"jobs[{i}]: ")
        key = spec.idempotency_key
        if key is not None and first_use.setdefault(key, i) != i:
            raise invalid(f"jobs[{i}].idempotency_key", f"repeats the key of jobs[{first_use[key]}]")
    results = queue().enqueue_many(principal.name, specs)
    created = any(new for _, new in results)  # a full replay made nothing new: 200, like a single job
    return json_response({"jobs": [job_json(job, principal) for job, _ in results]}, 201 if created else 200)


@bp.get("/jobs")
@requires("producer")
def list_jobs():
    """List jobs."""
    principal: Principal = g.principal
    query = LIST_QUERY.parse(query_values(request.args))
    filters = {key: query[key] for key in ("status", "type", "priority") if query[key] is not None}
    limit, before = query["limit"], query["cursor"]
    owner = None if principal.is_admin else principal.name
    jobs = queue().list_jobs(owner=owner, before_id=before, limit=limit + 1, **filters)
    next_cursor = encode_cursor(jobs[limit - 1].id) if len(jobs) > limit else None
    return json_response({"jobs": [job_json(j, principal) for j in jobs[:limit]], "next_cursor": next_cursor})


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
    omit = frozenset() if principal.is_admin else frozenset({"error"})
    return json_response({"events": [EVENT.render(event, omit) for event in queue().events(job_id)]})


# -- people -------------------------------------------------------------------------------------------


@bp.post("/jobs/<jobid:job_id>/cancel")
@requires("producer")
def cancel(job_id: int):
    """Cancel jobs."""
    EMPTY_BODY.parse(read_body())  # an empty body is fine; a malformed one or any field is an error
    principal: Principal = g.principal
    job = queue().cancel(job_id, principal.name, owner=None if principal.is_admin else principal.name)
    # 202: a running job's cancellation is asked for; its worker stops it (docs/running-jobs.md)
    return json_response(job_json(job, principal), 202 if job.status == "running" else 200)


@bp.post("/jobs/<jobid:job_id>/retry")
@requires("admin")
def retry(job_id: int):
    """Retry jobs."""
    EMPTY_BODY.parse(read_body())
    job = queue().retry(job_id, g.principal.name)
    return json_response(job_json(job, g.principal))
