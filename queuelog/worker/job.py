"""What a handler receives: the job, and its ways to talk back while it runs (docs/running-jobs.md).

@handles("export")
def export(job):
    for n, chunk in enumerate(chunks, 1):
        write(chunk)
        job.progress(100 * n // len(chunks), f"chunk {n} of {len(chunks)}")  # may raise JobCancelled
    if not upstream_ready():
        job.snooze(300)                      # raises Snooze: run again in 5 minutes
    return {"chunks": len(chunks)}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from queuelog.worker.leases import Held


class JobCancelled(BaseException):
    """Raised in a handler by ``job.progress()`` or ``job.check_cancelled()`` once the job's cancellation
    was requested. Let it propagate (clean up in ``finally``): the worker reports the job cancelled. A
    BaseException, like asyncio's CancelledError, so that ``except Exception`` does not swallow it."""


class Snooze(BaseException):
    """Raise ``Snooze(seconds)`` (or call ``job.snooze(seconds)``) to hand the job back to run again after
    ``seconds`` (up to a day), without counting a failure. The server allows a job a limited number of
    snoozes (QUEUELOG_MAX_SNOOZES); past it the worker reports a retryable failure instead."""

    def __init__(self, delay_seconds: float):
        super().__init__(f"snooze for {delay_seconds} s")
        self.delay_seconds = delay_seconds


@dataclass(frozen=True)
class Job:
    """What a handler receives."""

    id: int
    type: str
    payload: dict[str, Any]
    attempt: int
    max_retries: int
    raw: dict[str, Any]
    _held: Held | None = field(default=None, repr=False, compare=False)
    _report: Any = field(default=None, repr=False, compare=False)  # (percent, message) -> None

    @property
    def cancel_requested(self) -> bool:
        """Whether someone asked to cancel the job: the worker learns it from its heartbeats (every
        third of the lease) and from progress reports."""
        return self._held is not None and self._held.cancel_requested.is_set()

    def check_cancelled(self) -> None:
        """Raise JobCancelled if the job's cancellation was requested: call it where stopping is safe."""
        if self.cancel_requested:
            raise JobCancelled(f"job {self.id}: cancellation requested")

    def progress(self, percent: int | None = None, message: str | None = None) -> None:
        """Report how far the job is (0..100, and/or a message of at most 200 characters), shown on its
        page; sent at once, or with the next heartbeat when the last report went out less than a second
        ago. Then, like ``check_cancelled``, raise JobCancelled if its cancellation was requested."""
        if self._report is not None:
            self._report(percent, message)
        self.check_cancelled()

    def snooze(self, delay_seconds: float) -> None:
        """Hand the job back to run again after ``delay_seconds`` (raises Snooze)."""
        raise Snooze(delay_seconds)
