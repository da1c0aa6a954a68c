"""Endpoints for producers and admins: enqueue, read, cancel, retry."""

from __future__ import annotations

from typing import Any

from flask import current_app, g, request, url_for

from queuelog.api.answers import EVENT
from queuelog.api.base import (
    bp,
    job_json,
    json_response,
    queue,
    requires,
    visible_job,
)
from queuelog.api.fields import Json
from queuelog.api.problems import MAX_ERRORS, ApiError, fields_named, invalid, refused
from queuelog.api.render import json_array, json_object, json_text_response, text_or_null
from queuelog.api.schemas import (
    BATCH_BODY,
    EMPTY_BODY,
    JOB_BODY,
    LIST_QUERY,
    MAX_BATCH_ENQUEUE,
    encode_cursor,
)
from queuelog.api.shapes import entries, join
from queuelog.api.validation import (
    batch_key,
    header_text,
    job_spec,
    parse_job,
    query_values,
    read_body,
)
from queuelog.auth import Principal
from queuelog.engines.records import JobSearch
from queuelog.queue import JobSpec, QueueError
from queuelog.queue.console import Console

# -- enqueue ------------------------------------------------------------------------------------------


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


@bp.post("/jobs")
@requires("producer", to="enqueue jobs")
def enqueue():
    """Enqueue jobs."""
    body = read_body()
    try:
        spec = parse_job(body, header_key=header_text("Idempotency-Key"))
    except ApiError as refusal:
        raise _with_type_checks(refusal, [("", body)]) from None
    principal: Principal = g.principal
    principal.check_priority(spec.priority)
    job, created = queue().enqueue(principal.name, spec)
    location = {"Location": url_for("api.get_job", job_id=job.id)}
    return json_text_response(job_json(job, principal), 201 if created else 200, location)


@bp.post("/jobs/batch")
@requires("producer", to="enqueue jobs")
def enqueue_batch():
    """Enqueue jobs."""
    body = read_body()
    try:
        items = BATCH_BODY.parse(body)["jobs"]
    except ApiError as refusal:
        jobs = body.get("jobs")
        if not isinstance(jobs, list) or len(jobs) > MAX_BATCH_ENQUEUE:
            raise
        raise _with_type_checks(refusal, [(f"jobs[{i}]", job) for i, job in enumerate(jobs)]) from None
    header_key = header_text("Idempotency-Key")
    specs = [job_spec(item, f"jobs[{i}]", batch_key(header_key, i)) for i, item in enumerate(items)]
    principal: Principal = g.principal
    first_use: dict[str, int] = {}
    for i, spec in enumerate(specs):
        principal.check_priority(spec.priority, f"jobs[{i}].priority")
        key = spec.idempotency_key
        if key is not None and first_use.setdefault(key, i) != i:
            raise invalid(f"jobs[{i}].idempotency_key", f"repeats the key of jobs[{first_use[key]}]")
    results = queue().enqueue_many(principal.name, specs)
    created = any(new for _, new in results)  # a full replay made nothing new: 200, like a single job
    jobs = json_array(job_json(job, principal) for job, _ in results)
    return json_text_response(json_object({"jobs": jobs}), 201 if created else 200)


@bp.get("/jobs")
@requires("producer", to="list jobs")
def list_jobs():
    """List jobs."""
    principal: Principal = g.principal
    query = LIST_QUERY.parse(query_values(request.args))
    if query["error"] is not None and not principal.sees_errors:
        raise invalid("error", "may be used by admins only")
    if (query["payload_path"] is None) != (query["payload_value"] is None):
        missing = "payload_value" if query["payload_value"] is None else "payload_path"
        raise invalid(missing, "is required with payload_path and payload_value")
    fields = [
        name for name in JobSearch._fields if name not in ("id", "owner", "ids")
    ]  # ids: the pages' error groups
    search = JobSearch(
        owner=principal.owner_scope,
        **{name: query[name] for name in fields if query[name] is not None},
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


@bp.get("/jobs/<jobid:job_id>")
@requires("producer", "worker", to="read jobs")
def get_job(job_id: int):
    """Read jobs."""
    job = visible_job(queue().get(job_id), g.principal, job_id)
    return json_text_response(job_json(job, g.principal))


@bp.get("/jobs/<jobid:job_id>/events")
@requires("producer", to="read job events")
def job_events(job_id: int):
    """Read job events."""
    principal: Principal = g.principal
    visible_job(queue().get(job_id), principal, job_id)
    omit = frozenset() if principal.sees_errors else frozenset({"error"})
    return json_response({"events": [EVENT.render(event, omit) for event in queue().events(job_id)]})


# -- people -------------------------------------------------------------------------------------------


@bp.post("/jobs/<jobid:job_id>/cancel")
@requires("producer", to="cancel jobs")
def cancel(job_id: int):
    """Cancel jobs."""
    EMPTY_BODY.parse(read_body())  # an empty body is fine; a malformed one or any field is an error
    principal: Principal = g.principal
    job = queue().cancel(job_id, principal.name, owner=principal.cancel_scope)
    # 202: a running job's cancellation is asked for; its worker stops it (docs/running-jobs.md)
    return json_text_response(job_json(job, principal), 202 if job.status == "running" else 200)


@bp.post("/jobs/<jobid:job_id>/retry")
@requires("admin", to="retry jobs")
def retry(job_id: int):
    """Retry jobs."""
    EMPTY_BODY.parse(read_body())
    job = queue().retry(job_id, g.principal.name)
    return json_text_response(job_json(job, g.principal))
