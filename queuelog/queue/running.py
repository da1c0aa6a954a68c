"""The queue layer's part for running jobs (docs/running-jobs.md): asking to cancel one, the worker
carrying that out, progress reports and snoozes.

Policy only, over the engine's guarded operations (queuelog/engines/running.py): which refusal a caller
sees, and the snooze cap. A refusal never tells a worker anything about a job it does not hold.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from queuelog.engines import JobRecord, QueueEngine, Unchanged
from queuelog.queue.errors import InvalidState, JobNotFound, NotLeaseHolder, QueueError

MAX_PROGRESS_MESSAGE = 200  # characters; the column's size
MAX_SNOOZE_SECONDS = 86400  # one snooze puts a job off by a day at most


def _holds(job: JobRecord, worker: str, token: str) -> bool:
    return job.status == "running" and job.worker_id == worker and job.lease_token == token


class RunningJobs:
    """Mixed into ``Queue`` (core.py), which provides the engine, clock, lease length and snooze cap."""

    engine: QueueEngine
    clock: Callable[[], datetime]
    lease_seconds: int
    max_snoozes: int

    def _request_cancel(self, job_id: int, actor: str, owner: str | None) -> JobRecord | Unchanged:
        """Ask to cancel a running job; asking again changes nothing and answers the job as it is."""
        outcome = self.engine.request_cancel(job_id, actor, now=self.clock(), owner=owner)
        job = outcome.job if isinstance(outcome, Unchanged) else outcome
        if isinstance(outcome, Unchanged) and job is not None and job.cancel_requested:
            if owner is None or job.owner == owner:
                return job
        return outcome

    def _refused(
        self, job_id: int, worker: str, token: str, outcome: Unchanged, why: str | None = None
    ) -> QueueError:
        """404 for no job; ``InvalidState(why)`` for the holder, whose lease is fine; else not the holder."""
        if outcome.job is None:
            return JobNotFound(f"job {job_id} does not exist")
        if why is not None and _holds(outcome.job, worker, token):
            return InvalidState(f"job {job_id}: {why}")
        return NotLeaseHolder(f"job {job_id} is not held by this worker under this lease token")

    def stop_cancelled(self, job_id: int, worker: str, lease_token: str) -> JobRecord:
        """The holder's report that it stopped a job whose cancellation was requested: it ends cancelled."""
        outcome = self.engine.cancel_held(job_id, worker, lease_token, now=self.clock())
        if isinstance(outcome, Unchanged):
            raise self._refused(job_id, worker, lease_token, outcome, "its cancellation was not requested")
        return outcome

    def _fail_cancelled(self, job_id: int, worker: str, lease_token: str, error: str) -> JobRecord | None:
        """A failure report for a job whose cancellation was requested ends it cancelled (never retried),
        the error kept in its history; None when that is not the case and the failure counts as usual."""
        outcome = self.engine.cancel_held(job_id, worker, lease_token, now=self.clock(), error=error)
        return None if isinstance(outcome, Unchanged) else outcome

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
            raise ValueError("percent must be from 0 to 100")
        if message is not None and len(message) > MAX_PROGRESS_MESSAGE:
            raise ValueError(f"message must be at most {MAX_PROGRESS_MESSAGE} characters")
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
        if not 0 < delay_seconds <= MAX_SNOOZE_SECONDS:
            raise ValueError(f"delay_seconds must be more than 0 and at most {MAX_SNOOZE_SECONDS}")
        outcome = self.engine.snooze(
            job_id,
            worker,
            lease_token,
            now=self.clock(),
            delay_seconds=delay_seconds,
            max_snoozes=self.max_snoozes,
        )
        if isinstance(outcome, Unchanged):
            why = f"snoozed {self.max_snoozes} times already, the limit: complete or fail it"
            raise self._refused(job_id, worker, lease_token, outcome, why)
        return outcome
