"""A job and its history as the JSON API answers them, for Python programs.

One definition serves both clients: the worker hands a ``Job`` to each handler, and the producer client
(``queuelog.client``) returns them from enqueue, get, list and wait. Standard library only. A handler's
job also talks back while it runs (docs/running-jobs.md): ``report_progress``, ``should_stop``,
``check_cancelled``, ``snooze`` and ``add_to_batch`` go through the worker that runs it; on a producer's job they refuse. The fields are
those of the API's job answer (docs/concepts.md#jobs; ``tests/client/test_types.py`` checks that they match the
declared answer). An answer may leave fields out (a caller who may not see ``error``, say): those are
None, and ``raw`` keeps the answer as it came, unknown fields included.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Protocol

FINISHED = frozenset({"completed", "failed", "cancelled"})  # waiting is not finished: it will run

_TIMES = (
    "claimed_at",
    "lease_expires_at",
    "available_at",
    "created_at",
    "updated_at",
    "finished_at",
    "cancel_requested_at",
    "progress_updated_at",
)


class CancelRequested(BaseException):
    """Raised in a handler by ``job.report_progress()`` or ``job.check_cancelled()`` once the job's
    cancellation was requested. Let it propagate (clean up in ``finally``): the worker reports the job
    cancelled. A BaseException, like asyncio's CancelledError, so that ``except Exception`` does not
    swallow it."""


class Snooze(BaseException):
    """Raise ``Snooze(seconds)`` (or call ``job.snooze(seconds)``) in a handler to hand the job back to
    run again after ``seconds`` (1 to 86400), without counting a failure. The server allows a job a
    limited number of snoozes (QUEUELOG_MAX_SNOOZES); past it the worker reports a retryable failure."""

    def __init__(self, delay_seconds: float):
        super().__init__(f"snooze for {delay_seconds} s")
        self.delay_seconds = delay_seconds


class Running(Protocol):
    """What a worker attaches to the job it hands a handler (queuelog/worker/leases.py)."""

    def stop_requested(self) -> bool:
        """Whether the job's cancellation was requested, as the worker last heard."""
        ...

    def report(self, percent: int | None, message: str | None) -> None:
        """Send (or keep for the next heartbeat) a progress report."""
        ...

    def add_to_batch(self, batch_id: int, jobs: list[dict[str, Any]]) -> list[int]:
        """Add jobs to the batch of the running job, under its lease; their ids."""
        ...


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time of the API ("2026-12-01T10:13:58.546478Z") as an aware datetime."""
    return None if value is None else datetime.fromisoformat(value)


@dataclass(frozen=True)
class Job:
    """A job as the server showed it to this caller. Times are aware datetimes in UTC."""

    id: int
    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    priority: str | None = None  # low, medium, high, critical
    status: str | None = None  # waiting, pending, running, completed, failed, cancelled
    retry_count: int = 0  # failed attempts so far
    max_retries: int | None = None
    owner: str | None = None
    worker_id: str | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    available_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    result: dict[str, Any] | None = None
    idempotency_key: str | None = None  # shown to the owner and admins only
    error: str | None = None  # the last error, redacted; shown to admins only
    lease_token: str | None = None  # in a claim's answer only
    # A running job's cancellation, progress and snoozes as the answer showed them (docs/running-jobs.md).
    cancel_requested: bool = False
    cancel_requested_at: datetime | None = None
    cancel_requested_by: str | None = None
    progress: int | None = None  # percent
    progress_message: str | None = None
    progress_updated_at: datetime | None = None
    snooze_count: int = 0
    # Workflows (docs/workflows.md): the jobs it waits for, those still unfinished, and its batch.
    depends_on: list[int] = field(default_factory=list)
    waiting_on: list[int] = field(default_factory=list)
    batch_id: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any], running: Running | None = None) -> Job:
        """The job of an API answer; a worker passes ``running``, its line back to the server."""
        values = {name: data[name] for name in _FIELDS if name in data}
        for name in _TIMES:
            if name in values:
                values[name] = parse_time(values[name])
        job = cls(**values, raw=data)
        object.__setattr__(job, "_running", running)  # not a field: no answer carries it
        return job

    # -- a handler's job, while its worker runs it -------------------------------------------------------

    def _line(self) -> Running:
        running: Running | None = getattr(self, "_running", None)
        if running is None:
            raise RuntimeError("only the worker running a job can report on it")
        return running

    def should_stop(self) -> bool:
        """Whether the job's cancellation was requested while it runs: the worker learns it from its
        heartbeats (every third of the lease) and progress reports. ``cancel_requested`` is as claimed."""
        return self._line().stop_requested()

    def check_cancelled(self) -> None:
        """Raise CancelRequested if the job's cancellation was requested: call it where stopping is safe."""
        if self.should_stop():
            raise CancelRequested(f"job {self.id}: cancellation requested")

    def report_progress(self, percent: int | None = None, message: str | None = None) -> None:
        """Report how far the job is (0..100, and/or a message of 1 to 200 characters), shown on its page;
        sent at once, or with the next heartbeat when the last report went out less than a second ago.
        Then, like ``check_cancelled``, raise CancelRequested if its cancellation was requested."""
        self._line().report(percent, message)
        self.check_cancelled()

    def add_to_batch(self, jobs: Iterable[Mapping[str, Any]]) -> list[int]:
        """Add jobs to this job's batch while it runs (docs/batches.md): each item is the JSON body of
        an enqueue (``{"type": "pdf", "payload": {...}, "depends_on": [...]}``). Sent at once, under
        this job's lease, all or none; returns the new jobs' ids. The batch cannot finish meanwhile, so
        its callbacks wait for the added jobs too. A job outside any batch raises RuntimeError; a
        refusal (a bad item, a lost lease) raises the worker client's RequestRefused."""
        if self.batch_id is None:
            raise RuntimeError(f"job {self.id} is not in a batch")
        return self._line().add_to_batch(self.batch_id, [dict(item) for item in jobs])

    def snooze(self, delay_seconds: float) -> None:
        """Hand the job back to run again after ``delay_seconds`` (raises Snooze)."""
        self._line()
        raise Snooze(delay_seconds)

    @property
    def attempt(self) -> int:
        """The attempt counted from 1: the one running (what a handler is told), the next one of a pending
        job, the last one of a finished job."""
        return self.retry_count + 1

    @property
    def finished(self) -> bool:
        """Completed, failed or cancelled: nothing will happen to it unless an admin retries it."""
        return self.status in FINISHED


@dataclass(frozen=True)
class Event:
    """One change in a job's history (``GET /jobs/{id}/events``)."""

    id: int
    event: str  # enqueued, claimed, completed, retry_scheduled, failed, cancelled, ...
    actor: str  # a user, a worker, or "system"
    attempt: int
    at: datetime | None
    error: str | None = None  # shown to admins only

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        """The event of an API answer."""
        return cls(
            id=data["id"],
            event=data["event"],
            actor=data["actor"],
            attempt=data["attempt"],
            at=parse_time(data.get("at")),
            error=data.get("error"),
        )


_FIELDS = tuple(f.name for f in fields(Job) if f.name != "raw")
