"""The producer client: enqueue jobs and wait for their results from Python, standard library only.

    from queuelog.client import Client

    with Client("http://queue:8000", key) as queue:
        job = queue.enqueue("email", {"to": "ada@example.com"})
        done = queue.wait(job.id, timeout=60)   # raises JobFailed, JobCancelled or WaitTimeout
        print(done.result)

        batch = queue.batch([{"type": "pdf", "ref": "a"}, {"type": "email", "depends_on": ["a"]}])
        finished = queue.wait_batch(batch.id, timeout=600)   # succeeded or finished_with_failures

The full reference is docs/client.md. Like ``queuelog.worker``, it imports neither Flask nor SQLAlchemy.
"""

from queuelog.client.errors import (
    BatchWaitTimeout,
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
from queuelog.client.shapes import Batch, BatchPage
from queuelog.wire.job import Event, Job

__all__ = [
    "Batch",
    "BatchPage",
    "BatchWaitTimeout",
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
