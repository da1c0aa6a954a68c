"""The worker client: run handlers for job types against a queuelog server.

    from queuelog.worker import handles, PermanentFailure

    @handles("email")
    def send_email(job):
        ...                      # job.id, job.type, job.payload, job.attempt
        job.report_progress(50, "half")  # on the job's page; raises CancelRequested once a cancel is asked
        return {"sent": True}    # becomes the job's result

``job.check_cancelled()``, ``job.should_stop()`` and ``job.snooze(seconds)`` are described in
docs/running-jobs.md; ``Job`` is ``queuelog.wire.job.Job``, the producer client's too.

Run them with ``queuelog-worker --url http://queue:8000 --handlers mymodule`` (the key from
``QUEUELOG_WORKER_KEY``). This package imports neither Flask nor SQLAlchemy.
"""

from queuelog.wire.job import CancelRequested, Job, Snooze
from queuelog.worker.client import LeaseLost, QueueClient, RequestRefused, TransientError
from queuelog.worker.runner import PermanentFailure, Worker


def handles(job_type: str):
    """Mark a function as the handler of ``job_type``; ``queuelog-worker`` finds it in its module."""

    def mark(function):
        function.__queuelog_type__ = job_type
        return function

    return mark


__all__ = [
    "CancelRequested",
    "Job",
    "LeaseLost",
    "PermanentFailure",
    "QueueClient",
    "RequestRefused",
    "Snooze",
    "TransientError",
    "Worker",
    "handles",
]
