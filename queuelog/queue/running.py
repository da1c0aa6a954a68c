"""The queue layer's part for running jobs (docs/running-jobs.md): asking to cancel one, the worker
carrying that out, progress reports and snoozes.

Policy only, over the engine's guarded operations (``Engine``, queuelog/engines/engine.py): which refusal a caller
sees, and the snooze cap. A refusal never tells a worker anything about a job it does not hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from queuelog.engines import Engine, JobRecord, Unchanged
from queuelog.queue.errors import (
    Code,
    InvalidState,
    JobNotFound,
    JobValidationError,
    NotLeaseHolder,
    QueueError,
)
from queuelog.redact import redact_error

MAX_PROGRESS_MESSAGE = 200  # characters; the column's size
MIN_SNOOZE_SECONDS = 1  # the JSON API's lower bound too (api/workers.py)
MAX_SNOOZE_SECONDS = 86400  # one snooze puts a job off by a day at most


def _holds(job: JobRecord, worker: str, token: str) -> bool:
    return job.status == "running" and job.worker_id == worker and job.lease_token == token


class RunningJobs:
    """Mixed into ``Queue`` (core.py), which provides the engine, clock, lease length and snooze cap."""

    engine: Engine
    clock: Callable[[], datetime]
    lease_seconds: int
    max_snoozes: int
    ready: Callable[[Iterable[JobRecord]], None]

    def _request_cancel(self, job_id: int, actor: str, owner: str | None) -> JobRecord | Unchanged:
        """Ask to cancel a running job; asking again changes nothing and answers the job as it is."""
        outcome = self.engine.request_cancel(job_id, actor, now=self.clock(), owner=owner)
        job = outcome.job if isinstance(outcome, Unchanged) else outcome
        if isinstance(outcome, Unchanged) and job is not None and job.cancel_requested:
            if owner is None or job.owner == owner:
                return job
        return outcome

    def _refused(
        self, job_id: int, worker: str, token: str, outcome: Unchanged, why: QueueError | None = None
    ) -> QueueError:
        """Not found for no job; ``why`` for the holder, whose lease is fine; else not the holder."""
        if outcome.job is None:
            return JobNotFound(Code.JOB_NOT_FOUND, job_id=job_id)
        if why is not None and _holds(outcome.job, worker, token):
            return why
        return NotLeaseHolder(Code.NOT_LEASE_HOLDER, job_id=job_id)

    def stop_cancelled(self, job_id: int, worker: str, lease_token: str) -> JobRecord:
        """The holder's report that it stopped a job whose cancellation was requested: it ends cancelled."""
        outcome = self.engine.cancel_held(job_id, worker, lease_token, now=self.clock())
        if isinstance(outcome, Unchanged):
            why = InvalidState(Code.CANCEL_NOT_REQUESTED, job_id=job_id)
            raise self._refused(job_id, worker, lease_token, outcome, why)
        return outcome

    def progress(
        self,
        job_id: int,
        worker: str,
        lease_token: str,
        *,
        percent: int | None,
        message: str | None,
        lease_seconds: int | None = None,
    ) -> JobRecord:
        """A heartbeat of a held job that also records its attempt's progress (0..100, a short message)."""
        if percent is not None and not 0 <= percent <= 100:
            raise JobValidationError(Code.OUT_OF_RANGE, field="progress", low=0, high=100)
        if message is not None and len(message) > MAX_PROGRESS_MESSAGE:
            raise JobValidationError(Code.TOO_LONG, field="progress_message", limit=MAX_PROGRESS_MESSAGE)
        if message is not None:
            # Shown to the job's owner, not to admins only: redacted like an error (docs/operations.md#redaction-of-error-text), and
            # cut again, since a redaction marker may be longer than what it replaced.
            message = redact_error(message)[:MAX_PROGRESS_MESSAGE]
        outcome = self.engine.report_progress(
            job_id,
            worker,
            lease_token,
            now=self.clock(),
            lease_seconds=lease_seconds or self.lease_seconds,
            percent=percent,
            message=message,
        )
        if isinstance(outcome, Unchanged):
            raise self._refused(job_id, worker, lease_token, outcome)
        return outcome

    def snooze(self, job_id: int, worker: str, lease_token: str, delay_seconds: float) -> JobRecord:
        """Hand a held job back to run after ``delay_seconds`` without counting a failure; at most
        ``max_snoozes`` times per job. A job whose cancellation was requested ends cancelled instead."""
        if not MIN_SNOOZE_SECONDS <= delay_seconds <= MAX_SNOOZE_SECONDS:
            raise JobValidationError(
                Code.OUT_OF_RANGE, field="delay_seconds", low=MIN_SNOOZE_SECONDS, high=MAX_SNOOZE_SECONDS
            )
        outcome = self.engine.snooze(
            job_id,
            worker,
            lease_token,
            now=self.clock(),
            delay_seconds=delay_seconds,
            max_snoozes=self.max_snoozes,
        )
        if isinstance(outcome, Unchanged):
            why = InvalidState(Code.SNOOZE_LIMIT, job_id=job_id, limit=self.max_snoozes)
            raise self._refused(job_id, worker, lease_token, outcome, why)
        self.ready([outcome])  # back to pending, due after the delay (or cancelled: no wake-up)
        return outcome
