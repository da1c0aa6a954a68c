"""The job as the JSON API answers it, declared once (docs/api.md), for the producers' operations
(``jobs.py``) and the workers' (``workers.py``) alike, with problems and health; the schedules' and job
types' answers are declared beside their operations. The views write them with ``render.render_json`` (or
``Shape.render``) and ``/openapi.json`` describes them (``registry.py``)."""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any

from queuelog.api.fields import answer, array
from queuelog.api.render import stored_json
from queuelog.api.shapes import COMPONENTS, REF, Field, Shape
from queuelog.models import PRIORITY_NAMES, STATUSES

# -- jobs ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def rfc3339(value: datetime | None) -> str | None:
    # Cached: a batch of jobs shares most of its timestamps (claimed, updated, lease expiry).
    if value is None:
        return None
    return value.isoformat(timespec="microseconds")[:-6] + "Z"  # values are UTC: "+00:00" becomes "Z"


@lru_cache(maxsize=4096)
def _time_text(value: datetime | None) -> str:
    return "null" if value is None else f'"{rfc3339(value)}"'


def moment(description: str | None = None) -> Field:
    return answer({"type": ["string", "null"], "format": "date-time"}, description, rfc3339, _time_text)


def priority_name(value: int) -> str:
    return PRIORITY_NAMES.get(value, str(value))


def _priority_text(value: int) -> str:
    return f'"{priority_name(value)}"'  # names and digits: nothing to escape


def _parsed(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _document(schema: dict[str, Any], description: str | None = None) -> Field:
    """A payload or result: stored as JSON text, answered as that text (render.py)."""
    return answer(schema, description, _parsed, stored_json)


def _ids(text: str | None) -> list[int]:
    return [] if text is None else json.loads(text)


def _ids_text(text: str | None) -> str:
    """A list of ids as stored (JSON text), [] when there is none."""
    return "[]" if text is None else text


JOB_FIELDS: dict[str, Field] = {
    "id": answer({"type": "integer"}),
    "type": answer({"type": "string"}),
    "payload": _document({"type": "object"}),
    "priority": answer(
        {"type": "string", "enum": list(PRIORITY_NAMES.values())}, out=priority_name, text=_priority_text
    ),
    "status": answer({"type": "string", "enum": list(STATUSES)}),
    "retry_count": answer({"type": "integer"}),
    "max_retries": answer({"type": "integer"}),
    "owner": answer({"type": "string"}),
    "worker_id": answer({"type": ["string", "null"]}, "The worker holding it, or the last that did."),
    "claimed_at": moment(),
    "lease_expires_at": moment(),
    "available_at": moment("When it may be claimed (next)."),
    "created_at": moment(),
    "updated_at": moment(),
    "finished_at": moment(),
    "result": _document({"type": ["object", "null"]}),
    "idempotency_key": answer({"type": ["string", "null"]}, "Shown to its owner and admins only."),
    "error": answer({"type": ["string", "null"]}, "The last error, redacted; shown to admins only."),
    "lease_token": answer({"type": "string"}, "In claim answers only: send it back with every report."),
    # A running job's cancellation, progress and snoozes (docs/running-jobs.md).
    "cancel_requested": answer(
        {"type": "boolean"},
        "True while someone's request to cancel the running job waits for its worker: the worker should "
        "stop and report POST /jobs/{id}/cancelled.",
    ),
    "cancel_requested_at": moment(
        "When a cancellation was requested; null when none was, or once the job ended cancelled (its "
        "history keeps it). A job completed despite the request keeps it."
    ),
    "cancel_requested_by": answer({"type": ["string", "null"]}, "Who asked for it, likewise."),
    "progress": answer(
        {"type": ["integer", "null"], "minimum": 0, "maximum": 100},
        "The running attempt's last reported progress, in percent; null when it reported none.",
    ),
    "progress_message": answer({"type": ["string", "null"]}, "The message of that report."),
    "progress_updated_at": moment("When that report came."),
    "snooze_count": answer({"type": "integer"}, "How often a worker handed the job back to run later."),
    # Workflows (docs/workflows.md)
    "depends_on": answer(
        {"type": "array", "items": {"type": "integer"}},
        "The jobs it waits for (or waited for); [] for a job without dependencies.",
        _ids,
        _ids_text,
    ),
    "waiting_on": answer(
        {"type": "array", "items": {"type": "integer"}},
        "While it is waiting: those of its dependencies not finished yet; else [].",
        _ids,
        _ids_text,
    ),
    "batch_id": answer(
        {"type": ["integer", "null"]}, "The batch it is a member of, or whose callback it is; else null."
    ),
}
SHOWN_TO_SOME = frozenset({"idempotency_key", "error", "lease_token"})
JOB = Shape(
    "Job",
    "A job as the caller may see it. Times are RFC 3339 UTC with Z.",
    JOB_FIELDS,
    required=tuple(k for k in JOB_FIELDS if k not in SHOWN_TO_SOME),
    closed=False,
)
COMPONENTS["ClaimedJob"] = {
    "description": "A claimed job, with the lease_token its reports must carry.",
    "allOf": [{"$ref": REF + "Job"}, {"required": ["lease_token"]}],
}
# The compact answers a worker asks for with "Prefer: return=minimal" (RFC 7240; docs/api.md#compact-answers-for-workers).
WORKER_JOB_FIELDS = (
    "id",
    "type",
    "payload",
    "priority",
    "retry_count",
    "max_retries",
    "lease_expires_at",
    "snooze_count",  # a handler that snoozes sees how often it did (QUEUELOG_MAX_SNOOZES caps it)
    "batch_id",  # a handler may add jobs to its batch (docs/worker.md#adding-jobs-to-its-batch)
)
WORKER_JOB = Shape(
    "WorkerJob",
    "A claimed job as a worker needs it (Prefer: return=minimal): what to run, its attempts and its lease.",
    {key: JOB_FIELDS[key] for key in (*WORKER_JOB_FIELDS, "lease_token")},
    required=(*WORKER_JOB_FIELDS, "lease_token"),
    closed=False,
)
WORKER_JOBS = Shape(
    "WorkerJobs",
    "The answer to a claim that gave a limit, with Prefer: return=minimal: the jobs claimed, perhaps none.",
    {"jobs": array(WORKER_JOB)},
    required=("jobs",),
    closed=False,
)
JOB_STATE_FIELDS = (
    "id",
    "status",
    "retry_count",
    "max_retries",
    "available_at",
    "lease_expires_at",
    "cancel_requested",  # how the worker learns from its heartbeats that it should stop the job
)
JOB_STATE = Shape(
    "JobState",
    "Where a job stands after a report or heartbeat (Prefer: return=minimal): pending again or failed "
    "after a failure, with its next time; its lease, and whether its cancellation was requested, after a "
    "heartbeat.",
    {key: JOB_FIELDS[key] for key in JOB_STATE_FIELDS},
    required=JOB_STATE_FIELDS,
    closed=False,
)
CLAIMED_JOBS = Shape(
    "ClaimedJobs",
    "The answer to a claim that gave a limit: the jobs claimed, perhaps none.",
    {"jobs": array(answer({"$ref": REF + "ClaimedJob"}))},
    required=("jobs",),
    closed=False,
)
JOB_LIST = Shape(
    "JobList",
    "A page of jobs, newest first.",
    {
        "jobs": array(JOB),
        "next_cursor": answer({"type": ["string", "null"]}, "The cursor of the next page; null on the last."),
        "window_full": answer(
            {"type": "boolean"},
            "True when the page stopped because it had examined its whole window of candidates (the filters"
            " other than status, type and priority are checked on a bounded window): next_cursor goes on"
            " below it. False when the page is full or nothing older matches.",
        ),
    },
    required=("jobs", "next_cursor", "window_full"),
    closed=False,
)
EVENT = Shape(
    "Event",
    "One change in a job's history.",
    {
        "id": answer({"type": "integer"}),
        "event": answer({"type": "string"}),
        "actor": answer({"type": "string"}, "Who made the change: a user, a worker, or system."),
        "attempt": answer({"type": "integer"}),
        "at": moment(),
        "error": answer({"type": ["string", "null"]}, "Shown to admins only."),
    },
    required=("id", "event", "actor", "attempt", "at"),
    closed=False,
)
EVENTS = Shape(
    "Events", "A job's history, oldest first.", {"events": array(EVENT)}, required=("events",), closed=False
)
ITEM_ERROR = Shape(
    "ItemError",
    "Why one item of a batch completion was refused.",
    {
        "type": answer({"type": "string"}),
        "status": answer({"type": "integer"}),
        "detail": answer({"type": "string"}),
    },
    required=("type", "status", "detail"),
    closed=False,
)
COMPLETE_RESULT = Shape(
    "CompleteResult",
    "The outcome of one item: the job (200; left out with Prefer: return=minimal), or the error (404, 409).",
    {
        "id": answer({"type": "integer"}),
        "status": answer({"type": "integer", "enum": [200, 404, 409]}),
        "job": JOB,
        "error": ITEM_ERROR,
    },
    required=("id", "status"),
    closed=False,
)
COMPLETE_RESULTS = Shape(
    "CompleteResults",
    "One result per item, in the order sent.",
    {"results": array(COMPLETE_RESULT)},
    required=("results",),
    closed=False,
)
FIELD_ERROR = Shape(
    "FieldError",
    "One invalid input: its path (jobs[3].type, payload.lines[1], a header's name) and what is wrong.",
    {"field": answer({"type": "string"}), "message": answer({"type": "string"})},
    required=("field", "message"),
    closed=False,
)
PROBLEM = Shape(
    "Problem",
    "RFC 9457 problem details.",
    {
        "type": answer({"type": "string"}, "/problems/<slug>, e.g. /problems/validation-failed."),
        "title": answer({"type": "string"}),
        "status": answer({"type": "integer"}),
        "detail": answer({"type": "string"}),
        "errors": array(FIELD_ERROR, "The invalid inputs (422 validation-failed)."),
    },
    required=("type", "title", "status", "detail"),
    closed=False,
)
HEALTH = Shape(
    "Health",
    "Whether the database answers.",
    {
        "status": answer({"type": "string", "enum": ["ok", "unavailable"]}),
        "detail": answer({"type": "string", "description": "Why not, when unavailable."}),
    },
    required=("status",),
    closed=False,
)
JOBS = Shape(
    "Jobs", "The jobs of a batch, in the order sent.", {"jobs": array(JOB)}, required=("jobs",), closed=False
)
