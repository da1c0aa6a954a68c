"""The one interface between the queue layer and a database: ``QueueEngine``, and the records it speaks in.

``Queue`` (queuelog/queue/core.py) holds the policy: which types may be enqueued, backoff parameters,
metrics, long-poll wake-ups, and the exceptions the faces see. An engine holds everything that depends on
the database: its SQL, how parameters are bound, how rows are decoded. There is one engine per database
(``sqlite.py``, ``postgres.py``), side by side with the same method names; ``engine_for`` picks it once.

Every operation is whole: one call is one transaction (or one self-contained statement) that leaves the
database consistent, with a ``job_events`` row for every transition it made (README, How it behaves).
A guarded transition that matched nothing returns ``Unchanged`` with the job as it is, so that the queue
layer can tell "no such job" from "not in that state" without a second round trip of its own.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from queuelog.engines.rows import CountRow, FailureRow, JobTypeRow, KeyRow, ThroughputRow


class JobRecord(NamedTuple):
    """A job as stored: the one definition of the job's columns (``JOB_COLUMNS`` follows its order).

    Times are aware UTC datetimes, ``payload`` and ``result`` parsed JSON. ``job["status"]`` reads a
    field by name as well as ``job.status`` does, for faces written when jobs were dicts.
    """

    id: int
    type: str
    payload: dict[str, Any]
    priority: int
    status: str
    retry_count: int
    max_retries: int
    idempotency_key: str | None
    owner: str
    worker_id: str | None
    lease_token: str | None
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    available_at: datetime
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    result: dict[str, Any] | None
    error: str | None

    def __getitem__(self, name: str) -> Any:  # type: ignore[override]
        return getattr(self, name)


JOB_FIELDS: tuple[str, ...] = JobRecord._fields
JOB_COLUMNS = ", ".join(JOB_FIELDS)


class EventRecord(NamedTuple):
    """One row of a job's history. ``attempt`` is the attempt the event belongs to (0 before the first)."""

    id: int
    at: datetime
    event: str
    actor: str
    attempt: int
    error: str | None

    def __getitem__(self, name: str) -> Any:  # type: ignore[override]
        return getattr(self, name)


class NewJob(NamedTuple):
    """A job to insert, already checked by the queue layer. ``fingerprint`` is compared when
    ``idempotency_key`` already names a job of the same owner (None without a key)."""

    type: str
    payload_json: str
    priority: int
    max_retries: int
    idempotency_key: str | None
    fingerprint: str | None
    available_at: datetime


class Unchanged(NamedTuple):
    """A guarded transition whose guard matched nothing, so nothing changed. ``job`` is the job as it is
    now, None when there is no such job."""

    job: JobRecord | None


class Claimed(NamedTuple):
    """What a claim did: the jobs it leased, in claim order, and the jobs whose expired leases it settled
    (as they are after settling: pending again, or failed when out of retries)."""

    jobs: list[JobRecord]
    expired: list[JobRecord]


class Backoff(NamedTuple):
    """How long a failed attempt waits before the next (README, Retry backoff): for retry number n,
    ``d = min(cap, base * 2^(n-1))``, then ``d/2 + jitter * d/2`` with ``jitter`` from ``rand`` in [0, 1].
    A base of 0 retries at once. Engines that compute it in SQL use the same formula."""

    base: float
    cap: float
    rand: Callable[[], float] = random.random

    def seconds(self, retry: int) -> float:
        if self.base <= 0:
            return 0.0
        delay = min(self.cap, self.base * 2 ** max(0, retry - 1))
        return delay / 2 + self.rand() * delay / 2


class KeyConflict(Exception):
    """``insert``: the idempotency key of ``jobs[index]`` already names ``job``, made with other
    parameters. The whole insert was rolled back."""

    def __init__(self, index: int, job: JobRecord):
        super().__init__(f"jobs[{index}]: idempotency key already used by job {job.id}")
        self.index = index
        self.job = job


class QueueEngine(Protocol):
    """Whole operations on jobs in one database. Times passed in are aware datetimes (the queue layer's
    clock); every write that changes a job adds its history row in the same transaction."""

    name: str  # the Database's dialect: "sqlite" or "postgresql"

    # -- writes -------------------------------------------------------------------------------------

    def insert(self, owner: str, jobs: Sequence[NewJob], now: datetime) -> list[tuple[JobRecord, bool]]:
        """Insert ``jobs`` for ``owner`` in one transaction, all or none: ``(job, True)`` for a new job,
        ``(job, False)`` when its idempotency key already named a job with the same fingerprint (that
        job is returned). Concurrent inserts with one key make one job. Raises ``KeyConflict``."""
        ...

    def claim(
        self,
        worker: str,
        *,
        now: datetime,
        lease_seconds: float,
        limit: int,
        types: Sequence[str] | None,
        backoff: Backoff,
    ) -> Claimed:
        """Settle expired leases (as ``expire`` does), then lease up to ``limit`` pending jobs available
        at ``now`` whose type is in ``types`` (any when None) and not paused, to ``worker`` under a fresh
        random token, in claim order: priority DESC, available_at, id. One statement picks and marks the
        jobs, so no job is handed out twice; a job settled here may be handed out at once when its
        backoff allows."""
        ...

    def heartbeat(
        self, job_id: int, worker: str, token: str, *, now: datetime, lease_seconds: float
    ) -> JobRecord | Unchanged:
        """Extend the lease of a job ``worker`` holds under ``token`` to ``now + lease_seconds``."""
        ...

    def complete(
        self, job_id: int, worker: str, token: str, *, now: datetime, result_json: str | None
    ) -> JobRecord | Unchanged:
        """Mark a held job completed with ``result_json`` (serialized JSON or None); clears its error."""
        ...

    def complete_many(
        self, worker: str, items: Sequence[tuple[int, str, str | None]], *, now: datetime
    ) -> list[JobRecord | Unchanged]:
        """Complete each held ``(id, token, result_json)`` in one transaction, each item judged alone;
        the answers come in the order of ``items``. Ids must be distinct."""
        ...

    def fail(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        error: str,
        retryable: bool,
        backoff: Backoff,
    ) -> JobRecord | Unchanged:
        """Record a failed attempt of a held job: pending again after ``backoff`` while ``retryable``
        and retries remain (``retry_count`` + 1), else failed. ``error`` is stored as given."""
        ...

    def expire(self, *, now: datetime, backoff: Backoff) -> list[JobRecord]:
        """Settle every running job whose lease ended before ``now``: a retryable failure by ``system``
        (pending after ``backoff``, or failed when out of retries). Returns them as they now are."""
        ...

    def cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        """Cancel a pending job (only ``owner``'s when given)."""
        ...

    def retry(self, job_id: int, actor: str, *, now: datetime) -> JobRecord | Unchanged:
        """Put a failed or cancelled job back to pending, available at ``now``, retry count 0."""
        ...

    def prune(self, *, finished_before: datetime, batch: int, throughput_before: datetime) -> int:
        """Delete finished jobs (and their history) that finished before ``finished_before``, in
        transactions of at most ``batch`` jobs, and throughput minutes before ``throughput_before``.
        Pending and running jobs are never deleted. Returns how many jobs were deleted."""
        ...

    # -- reads --------------------------------------------------------------------------------------

    def get(self, job_id: int) -> JobRecord | None:
        """The job, or None."""
        ...

    def list_jobs(
        self,
        *,
        owner: str | None = None,
        status: str | None = None,
        type: str | None = None,
        priority: int | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[JobRecord]:
        """Jobs matching every given filter, newest (highest id) first, with ids below ``before_id``."""
        ...

    def events(self, job_id: int) -> list[EventRecord]:
        """The job's history, oldest first."""
        ...

    def claimable(self, *, now: datetime, types: Sequence[str] | None = None) -> bool:
        """Would a claim at ``now`` find a job, or a lease to settle? A read that takes no lock."""
        ...

    def counts(self, *, owner: str | None = None) -> list[CountRow]:
        """Exact job counts per status, type and priority (``owner``'s jobs only when given)."""
        ...

    def oldest_pending(self, *, owner: str | None = None) -> datetime | None:
        """When the oldest pending job (the lowest pending id) was created; None when none is pending."""
        ...

    def throughput(self, *, since: datetime, owner: str | None = None) -> list[ThroughputRow]:
        """Completions and failures per minute from the minute of ``since`` on."""
        ...

    def failures(self, *, limit: int) -> list[FailureRow]:
        """The ``limit`` newest history rows that carry an error, newest first."""
        ...

    def job_types(self) -> list[JobTypeRow]:
        """The whole allowlist, by name."""
        ...

    def api_key(self, digest: str) -> KeyRow | None:
        """The unrevoked key whose SHA-256 hex digest is ``digest``, or None."""
        ...


def claim_order(job: JobRecord) -> tuple[int, datetime, int]:
    """The sort key of claim order (README, Claim order): an UPDATE's RETURNING has no order of its own."""
    return (-job.priority, job.available_at, job.id)
