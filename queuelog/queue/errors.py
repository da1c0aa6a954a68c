"""What the queue layer refuses, as exceptions the faces (API, pages, CLI) translate for their callers."""

from __future__ import annotations

from typing import Any


class QueueError(Exception):
    """Base class: ``slug`` names the refusal (it becomes the problem type of the JSON API)."""

    slug = "queue-error"

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class JobNotFound(QueueError):
    slug = "not-found"


class InvalidState(QueueError):
    """The job exists but is not in a state that allows the transition."""

    slug = "invalid-state"


class NotLeaseHolder(QueueError):
    """The caller does not hold the job's current lease (wrong worker, stale or wrong token)."""

    slug = "not-lease-holder"


class IdempotencyKeyReused(QueueError):
    """The owner used this idempotency key before with other parameters."""

    slug = "idempotency-key-reused"

    def __init__(self, detail: str, job_id: int):
        super().__init__(detail)
        self.job_id = job_id


class JobValidationError(QueueError):
    """Input the queue layer itself rejects (unknown type, schema violation); ``errors`` name the fields."""

    slug = "validation-failed"

    def __init__(self, errors: list[dict[str, Any]]):
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.errors = errors
