"""The one interface between the queue layer and a database: ``QueueEngine``, with the job and event
records it speaks in (the others are in records.py). Beside it every engine offers the running jobs'
operations (running.py), the console's (console.py) and the schedules' (schedules.py).

``Queue`` (queuelog/queue/core.py) holds the policy: which types may be enqueued, backoff parameters,
metrics, long-poll wake-ups, and the exceptions the faces see. An engine holds everything that depends on
the database: its SQL, how parameters are bound, how rows are decoded. There is one engine per database
(``sqlite.py``, ``postgres.py``), side by side with the same method names; ``engine_for`` picks it once.

Every operation is whole: a call leaves the database consistent, and each of its transactions (one, but
for ``prune``'s batches) writes a ``job_events`` row for every transition it made (README, How it behaves).
A guarded transition that matched nothing returns ``Unchanged`` with the job as it is, so that the queue
layer can tell "no such job" from "not in that state" without a second round trip of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from queuelog.engines.records import (
    Backoff,
    Claimed,
    CountRow,
    FailureRow,
    JobTypeRow,
    KeyRow,
    NewJob,
    ThroughputRow,
    Unchanged,
)
from queuelog.engines.running import RunningOperations

if TYPE_CHECKING:
    from collections.abc import Callable

    from queuelog.models import AuditLog, JobType

    # A job type's change (update_job_type): the attributes to set, or a function of the type as it is
    # that gives them; and the audit row made from the type before the change and the attributes set.
    JobTypeChanges = dict[str, Any] | Callable[[JobType], dict[str, Any]]
    JobTypeAudit = Callable[[JobType, dict[str, Any]], AuditLog]


class JobRecord(NamedTuple):
    """A job as stored: the one definition of the job's columns (``JOB_COLUMNS`` follows its order).

    Times are aware UTC datetimes. ``payload`` and ``result`` are the JSON text as the database keeps it
    (never parsed on the way through: the API splices it into its answers; ``json.loads`` it to look
    inside). ``job["status"]`` reads a field by name as well as ``job.status`` does, for faces written when
    jobs were dicts.
    """

    id: int
    type: str
    payload: str
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
    result: str | None
    error: str | None
    # A running job's cancellation, progress and snoozes (docs/running-jobs.md): read them through the
    # properties below, which hide a progress report left over from an earlier attempt.
    cancel_requested_at: datetime | None
    cancel_requested_by: str | None
    progress_percent: int | None
    progress_note: str | None
    progress_at: datetime | None
    snooze_count: int

    def __getitem__(self, name: str) -> Any:  # type: ignore[override]
        return getattr(self, name)

    @property
    def cancel_requested(self) -> bool:
        """Whether someone asked to cancel this running job and it has not stopped yet (a job completed
        despite the request keeps the request's time and asker, but is no longer to be stopped)."""
        return self.status == "running" and self.cancel_requested_at is not None

    def _reported(self, value: Any) -> Any:
        # A progress report belongs to the attempt running when it came: a later claim makes it stale.
        current = self.status == "running" and self.progress_at is not None and self.claimed_at is not None
        return value if current and self.progress_at >= self.claimed_at else None  # type: ignore[operator]

    progress = property(lambda self: self._reported(self.progress_percent), doc="The attempt's 0..100.")
    progress_message = property(lambda self: self._reported(self.progress_note), doc="Its message.")
    progress_updated_at = property(lambda self: self._reported(self.progress_at), doc="Its report's time.")


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


class QueueEngine(RunningOperations, Protocol):
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
        random token, in claim order: priority DESC, available_at, id. Each pick is one statement that also
        marks the jobs, so no job is handed out twice; a job settled here may be handed out at once when
        its backoff allows."""
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
        and retries remain (``retry_count`` + 1), else failed; cancelled (``cancelled`` by ``worker`` in
        its history, the request cleared) when its cancellation was requested, in the same statement.
        ``error`` is stored as given."""
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

    # -- the allowlist's management (admins, the command line; job_types.py) -------------------------

    def all_job_types(self) -> list[JobType]:
        """Every job type, by name."""
        ...

    def add_job_type(
        self, name: str, description: str, schema: dict[str, Any] | None, *, audit: AuditLog | None = None
    ) -> JobType:
        """Add an enabled, unpaused type, and ``audit`` in the same transaction. A taken name raises
        SQLAlchemy's ``IntegrityError`` (and writes nothing)."""
        ...

    def update_job_type(
        self, name: str, changes: JobTypeChanges, *, audit: JobTypeAudit | None = None
    ) -> JobType | None:
        """Set the given attributes of type ``name``; None when there is no such type. ``changes`` may be
        a function of the type as it is, read under its row's lock, for changes that depend on it; ``audit``
        makes the change's audit row from the type before it and the changes, written in the same
        transaction, so that no change goes unrecorded."""
        ...

    def seed_job_types(self, names: list[str]) -> bool:
        """Add ``names`` when there are no job types at all; False when there were some already."""
        ...


def claim_order(job: JobRecord) -> tuple[int, datetime, int]:
    """The sort key of claim order (README, Claim order): an UPDATE's RETURNING has no order of its own."""
    return (-job.priority, job.available_at, job.id)
