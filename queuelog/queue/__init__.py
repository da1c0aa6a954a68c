"""The queue layer: every job state change happens here (see ``core.py``).

The faces (api/, web/, cli/) read jobs as the engines' records, re-exported here: they import the queue layer,
never ``queuelog.engines`` (pyproject.toml, ``[tool.importlinter]``)."""

from queuelog.engines import JobRecord
from queuelog.engines.records import BulkAudit, JobSearch
from queuelog.queue.core import MAX_ERROR_CHARS, NextClaim, Queue
from queuelog.queue.errors import (
    Code,
    IdempotencyKeyReused,
    InvalidState,
    JobNotFound,
    JobValidationError,
    NotAllowed,
    NotLeaseHolder,
    QueueError,
)
from queuelog.queue.spec import JobSpec, backoff_seconds
from queuelog.queue.types import JobTypeRules

__all__ = [
    "MAX_ERROR_CHARS",
    "Code",
    "IdempotencyKeyReused",
    "InvalidState",
    "JobNotFound",
    "JobRecord",
    "BulkAudit",
    "JobSearch",
    "JobSpec",
    "JobTypeRules",
    "JobValidationError",
    "NextClaim",
    "NotAllowed",
    "NotLeaseHolder",
    "Queue",
    "QueueError",
    "backoff_seconds",
]
