"""The queue layer: every job state change happens here (see ``core.py``)."""

from queuelog.queue.core import MAX_ERROR_CHARS, Queue
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
    "JobSpec",
    "JobTypeRules",
    "JobValidationError",
    "NotAllowed",
    "NotLeaseHolder",
    "Queue",
    "QueueError",
    "backoff_seconds",
]
