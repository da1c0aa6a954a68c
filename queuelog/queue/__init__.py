"""The queue layer: every job state change happens here (see ``core.py``)."""

from queuelog.queue.core import MAX_ERROR_CHARS, Queue
from queuelog.queue.errors import (
    IdempotencyKeyReused,
    InvalidState,
    JobNotFound,
    JobValidationError,
    NotLeaseHolder,
    QueueError,
)
from queuelog.queue.spec import JobSpec, backoff_seconds
from queuelog.queue.types import JobTypeRules

__all__ = [
    "MAX_ERROR_CHARS",
    "IdempotencyKeyReused",
    "InvalidState",
    "JobNotFound",
    "JobSpec",
    "JobTypeRules",
    "JobValidationError",
    "NotLeaseHolder",
    "Queue",
    "QueueError",
    "backoff_seconds",
]
