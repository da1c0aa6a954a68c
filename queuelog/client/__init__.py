"""The producer client: enqueue jobs and wait for their results from Python, standard library only.

    from queuelog.client import Client

    with Client("http://queue:8000", key) as queue:
        job = queue.enqueue("email", {"to": "ada@example.com"})
        done = queue.wait(job.id, timeout=60)   # raises JobFailed, JobCancelled or WaitTimeout
        print(done.result)

The full reference is docs/client.md. Like ``queuelog.worker``, it imports neither Flask nor SQLAlchemy.
"""

from queuelog.client.errors import (
    ConnectionFailed,
    FieldError,
    Forbidden,
    IdempotencyKeyReused,
    InvalidState,
    JobCancelled,
    JobError,
    JobFailed,
    MalformedRequest,
    MethodNotAllowed,
    NotFound,
    NotLeaseHolder,
    PayloadTooLarge,
    QueuelogError,
    RateLimited,
    ServerError,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    ValidationFailed,
    WaitTimeout,
)
from queuelog.client.producer import Client, JobPage
from queuelog.wire.job import Event, Job

__all__ = [
    "Client",
    "ConnectionFailed",
    "Event",
    "FieldError",
    "Forbidden",
    "IdempotencyKeyReused",
    "InvalidState",
    "Job",
    "JobCancelled",
    "JobError",
    "JobFailed",
    "JobPage",
    "MalformedRequest",
    "MethodNotAllowed",
    "NotFound",
    "NotLeaseHolder",
    "PayloadTooLarge",
    "QueuelogError",
    "RateLimited",
    "ServerError",
    "Unauthorized",
    "Unavailable",
    "UnsupportedMediaType",
    "ValidationFailed",
    "WaitTimeout",
]
