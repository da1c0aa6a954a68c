"""Job types for admins (docs/flow-control.md): list, read, add, and change their settings and limits.
Paths are under /types (the pages' are under /admin/types). Shapes are declared in type_shapes.py; every
change goes through the queue layer, which checks the limits and writes the audit row."""

from __future__ import annotations

from flask import g, url_for

from queuelog.api.base import bp, json_response, queue, requires
from queuelog.api.problems import invalid
from queuelog.api.type_shapes import JOB_TYPE, JOB_TYPE_LIST, TYPE_BODY, TYPE_PATCH, type_record
from queuelog.api.validation import read_body
from queuelog.models import JobType
from queuelog.queue.limits import running_by_type
from queuelog.queue.types import SchemaRefused


def type_json(job_type: JobType, running: dict[str, int] | None = None) -> dict:
    if running is None:
        running = running_by_type(queue().engine)
    return JOB_TYPE.render(type_record(job_type, running.get(job_type.name, 0)))


@bp.get("/types")
@requires("admin", to="manage job types")
def list_types():
    """Manage job types."""
    running = running_by_type(queue().engine)
    return json_response(
        JOB_TYPE_LIST.render({"types": [type_json(t, running) for t in queue().types.all()]})
    )


@bp.post("/types")
@requires("admin", to="manage job types")
def create_type():
    """Manage job types."""
    body = TYPE_BODY.parse(read_body())
    try:
        job_type = queue().types.create(
            body["name"], g.principal.name, body["description"] or "", body["payload_schema"]
        )
    except SchemaRefused as problem:
        raise invalid("payload_schema", str(problem)) from None
    location = {"Location": url_for("api.get_type", name=job_type.name)}
    return json_response(type_json(job_type, {}), 201, location)


@bp.get("/types/<path:name>")
@requires("admin", to="manage job types")
def get_type(name: str):
    """Manage job types."""
    return json_response(type_json(queue().types.get(name)))


@bp.patch("/types/<path:name>")
@requires("admin", to="manage job types")
def change_type(name: str):
    """Manage job types."""
    raw = read_body()
    body = TYPE_PATCH.parse(raw)
    given = {key: body[key] for key in TYPE_PATCH.fields if key in raw}
    job_type = queue().types.change(name, g.principal.name, **given) if given else queue().types.get(name)
    return json_response(type_json(job_type))
