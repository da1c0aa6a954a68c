"""The one interface between the queue layer and a database: ``Engine``. Its records are beside it
(records.py); each database's implementation is a folder of its own (``sqlite/``, ``postgres/``), and what
the two share is written once over ``Dialect`` (dialect.py, shared.py).

``Queue`` (queuelog/queue/core.py) holds the policy: which types may be enqueued, backoff parameters,
metrics, long-poll wake-ups, and the exceptions the faces see. An engine holds everything that depends on
the database: its SQL, how parameters are bound, how rows are decoded. ``engine_for`` picks it once.

Every operation is whole: a call leaves the database consistent, and each of its transactions (one, but
for ``prune``'s batches) writes a ``job_events`` row for every transition it made (docs/concepts.md#states).
A guarded transition that matched nothing returns ``Unchanged`` with the job as it is, so that the queue
layer can tell "no such job" from "not in that state" without a second round trip of its own.

Each implementation is checked against this protocol by mypy (``make_engine`` in each folder is typed to
return an ``Engine``): a missing or mistyped method is a type error.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from queuelog.engines.records import (
    Backoff,
    BatchRecord,
    BulkAudit,
    Claimed,
    CountRow,
    EventRecord,
    FailureRow,
    FinishedJob,
    Fired,
    Firing,
    HeldJob,
    JobRecord,
    JobSearch,
    JobTypeAudit,
    JobTypeChanges,
    JobTypeRow,
    KeyRow,
    NewBatch,
    NewJob,
    ReportedJob,
    SearchPage,
    ThroughputRow,
    Unchanged,
    WorkerKeyRow,
)
from queuelog.models import AuditLog, JobType, Schedule


class Engine(Protocol):
    """Whole operations on jobs in one database. Times passed in are aware datetimes (the queue layer's
    clock); every write that changes a job adds its history row in the same transaction."""

    name: str  # the Database's dialect: "sqlite" or "postgresql"

    # -- jobs: writes ------------------------------------------------------------------------------

    def insert(
        self, owner: str, jobs: Sequence[NewJob], now: datetime, *, scope: str | None = None
    ) -> list[tuple[JobRecord, bool]]:
        """Insert ``jobs`` for ``owner`` in one transaction, all or none: ``(job, True)`` for a new job,
        ``(job, False)`` when its idempotency key already named a job with the same fingerprint (that
        job is returned). Concurrent inserts with one key make one job. Raises ``KeyConflict``.

        A job with dependencies (``depends_on``: existing jobs, which must be ``scope``'s when given, else
        ``DependencyMissing``; ``after``: earlier jobs of ``jobs``) starts ``waiting`` on the unfinished
        ones, ``pending`` when all completed, ``cancelled`` (a history row naming it) when one failed or
        was cancelled, unless it runs whatever their outcome (docs/workflows.md)."""
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
        request_id: str | None = None,
    ) -> Claimed:
        """Settle expired leases (as ``expire`` does), then lease up to ``limit`` pending jobs available
        at ``now`` whose type is in ``types`` (any when None) and not paused, to ``worker`` under a fresh
        random token, in claim order: priority DESC, available_at, id. Each pick is one statement that also
        marks the jobs, so no job is handed out twice; a job settled here may be handed out at once when
        its backoff allows.

        With a ``request_id``: when an earlier claim of ``worker`` with that id leased jobs whose lease
        has not ended, those of them still held under it are returned (same leases, nothing settled or
        claimed); else the claim runs and, if it leased anything, its request id is kept with it in the
        same transaction. Two claims with one id at once lease one set of jobs."""
        ...

    def heartbeat(
        self, job_id: int, worker: str, token: str, *, now: datetime, lease_seconds: float
    ) -> JobRecord | Unchanged:
        """Extend the lease of a job ``worker`` holds under ``token`` to ``now + lease_seconds``."""
        ...

    def complete(
        self, job_id: int, worker: str, token: str, *, now: datetime, result_json: str | None
    ) -> JobRecord | Unchanged:
        """Mark a held job completed with ``result_json`` (serialized JSON or None); clears its error.
        Repeated by ``worker`` with the ``token`` of the report that ended the attempt (complete or fail),
        it changes nothing and returns the job as it is: the repeat answers as the first report did."""
        ...

    def complete_many(
        self, worker: str, items: Sequence[tuple[int, str, str | None]], *, now: datetime
    ) -> list[JobRecord | Unchanged]:
        """Complete each held ``(id, token, result_json)`` in one transaction, each item judged alone;
        the answers come in the order of ``items``. Ids must be distinct."""
        ...

    def complete_each(
        self, worker: str, items: Sequence[tuple[int, str, str | None]], *, now: datetime
    ) -> list[ReportedJob | Unchanged]:
        """``complete_many`` for a caller that needs no job back (a compact answer): the same transitions,
        history and refusals, with a ``ReportedJob`` in place of each job ``complete_many`` would return."""
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
        ``error`` is stored as given. A repeat of the report that ended the attempt returns the job as it
        is, as ``complete`` does."""
        ...

    def complete_and_claim(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        result_json: str | None,
        lease_seconds: float,
        limit: int,
        types: Sequence[str] | None,
        backoff: Backoff,
        request_id: str | None = None,
    ) -> tuple[JobRecord | Unchanged, Claimed]:
        """``complete`` and then ``claim`` in one transaction (docs/api.md#report-and-claim-in-one-request):
        the claim happens only when the report did, and claims as a claim right after it would (the slot
        the report freed under a concurrency limit is free); a refused report (``Unchanged``) claims
        nothing and changes nothing. The report and the claim are committed together. With
        ``request_id``, the claim is as ``claim``'s with it: the report sent again (it answers as the
        first did) answers the jobs the first one's claim leased, while their leases last."""
        ...

    def fail_and_claim(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        error: str,
        retryable: bool,
        lease_seconds: float,
        limit: int,
        types: Sequence[str] | None,
        backoff: Backoff,
        request_id: str | None = None,
    ) -> tuple[JobRecord | Unchanged, Claimed]:
        """``fail`` and then ``claim`` in one transaction, as ``complete_and_claim``. The claim may hand
        the failed job out again when its backoff allows it at ``now``."""
        ...

    def complete_each_and_claim(
        self,
        worker: str,
        items: Sequence[tuple[int, str, str | None]],
        *,
        now: datetime,
        lease_seconds: float,
        limit: int,
        types: Sequence[str] | None,
        backoff: Backoff,
        request_id: str | None = None,
    ) -> tuple[list[ReportedJob | Unchanged], Claimed]:
        """``complete_each`` and then ``claim`` (docs/api.md#report-and-claim-in-one-request): the claim
        sees every completion (the slots they freed under a concurrency limit are free) and happens
        whatever each item's outcome, since each item stands alone. In one transaction, but for the
        items of jobs in a workflow and the refused or repeated ones, which PostgreSQL settles after it,
        in a transaction of their own (as ``complete_each`` does). ``request_id`` as
        ``complete_and_claim``'s."""
        ...

    def expire(self, *, now: datetime, backoff: Backoff) -> list[JobRecord]:
        """Settle every running job whose lease ended before ``now``: a retryable failure by ``system``
        (pending after ``backoff``, or failed when out of retries). Returns them as they now are."""
        ...

    def cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        """Cancel a pending or waiting job (only ``owner``'s when given)."""
        ...

    def retry(self, job_id: int, actor: str, *, now: datetime) -> JobRecord | Unchanged:
        """Put a failed or cancelled job back to pending, available at ``now``, retry count 0; a job with
        dependencies waits on them again (pending at once when they are all finished)."""
        ...

    def prune(self, *, finished_before: datetime, batch: int, throughput_before: datetime) -> int:
        """Delete finished jobs (and their history) that finished before ``finished_before``, in
        transactions of at most ``batch`` jobs, and throughput minutes before ``throughput_before``.
        Pending and running jobs are never deleted. Returns how many jobs were deleted."""
        ...

    # -- workflows: dependencies and batches (docs/workflows.md; written once in workflows.py) ------
    # Every transition above that finishes a job (complete, complete_many, a final fail, cancel, a lease
    # expiry, cancel_held, a snooze that cancels, bulk actions) or retries one does, in its transaction,
    # what that implies for the jobs waiting on it and for its batch: waiting dependents released (one
    # statement, however many) or cancelled transitively (a history row naming the dependency), the batch's
    # count of finished members kept, and the batch finished by the transition that finishes its last
    # member, its callbacks enqueued then, each once ever.

    def create_batch(
        self, owner: str, batch: NewBatch, *, now: datetime, scope: str | None = None
    ) -> tuple[BatchRecord, bool]:
        """Create a batch of ``batch.jobs`` (dependencies as for ``insert``), all or none: ``(batch, True)``;
        ``(batch, False)`` when its idempotency key named a batch made with the same fingerprint. Raises
        ``BatchConflict`` (the key, another fingerprint), ``DependencyMissing``."""
        ...

    def get_batch(self, batch_id: int) -> BatchRecord | None:
        """The batch with its members' ids (in the order they were enqueued) and counts, or None."""
        ...

    def list_batches(
        self,
        *,
        owner: str | None = None,
        status: str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[BatchRecord]:
        """Batches matching every given filter, newest first, with ids below ``before_id``."""
        ...

    def cancel_batch(
        self, batch_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> BatchRecord | None:
        """Cancel the batch's pending and waiting members and request the cancellation of its running ones
        (only ``owner``'s batch when given); None when there is no such batch."""
        ...

    def retry_batch(self, batch_id: int, actor: str, *, now: datetime) -> BatchRecord | None:
        """Retry the batch's failed and cancelled members (as ``retry`` does); the batch runs again. Its
        callbacks, once enqueued, are never enqueued again. None when there is no such batch."""
        ...

    def add_to_batch(
        self, batch_id: int, worker: str, token: str, jobs: Sequence[NewJob], *, now: datetime
    ) -> list[JobRecord] | str:
        """Add ``jobs`` (the batch owner's; dependencies among the owner's jobs) to the batch, for the
        worker that holds one of its running members under ``token``: the jobs, or ``"not_holder"``, or
        ``"finished"`` (a finished batch takes no more jobs)."""
        ...

    def dependents(self, job_id: int, *, limit: int = 100) -> list[int]:
        """The ids of the jobs that depend on ``job_id``, lowest first, at most ``limit``."""
        ...

    # -- running jobs: cancellation, progress, snoozes (docs/running-jobs.md) ----------------------
    def request_cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        """Record ``actor``'s request to cancel a running job (only ``owner``'s when given) whose
        cancellation was not requested yet; its history gets ``cancel_requested`` by ``actor``. The job
        keeps running until its worker stops it (``cancel_held``), fails or snoozes it (it ends cancelled),
        or its lease expires (it ends cancelled, by ``system``)."""
        ...

    def cancel_held(
        self, job_id: int, worker: str, token: str, *, now: datetime, error: str | None = None
    ) -> JobRecord | Unchanged:
        """End a job ``worker`` holds under ``token`` whose cancellation was requested: cancelled, its
        lease and request cleared, ``cancelled`` by ``worker`` in its history (with ``error`` when the
        worker reported a failure)."""
        ...

    def report_progress(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        lease_seconds: float,
        percent: int | None,
        message: str | None,
    ) -> JobRecord | Unchanged:
        """A heartbeat that also stores the attempt's progress (``percent`` 0..100 and ``message``, either
        None): one guarded statement, no history row."""
        ...

    def snooze(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        delay_seconds: float,
        max_snoozes: int,
    ) -> JobRecord | Unchanged:
        """Hand a held job back, pending again at ``now + delay_seconds`` with its retry count unchanged
        and its snooze count + 1, when it was snoozed fewer than ``max_snoozes`` times (``snoozed`` in its
        history). A job whose cancellation was requested ends cancelled instead, whatever its count."""
        ...

    # -- reads and search --------------------------------------------------------------------------

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

    def batch_counts(self) -> dict[str, int]:
        """How many batches there are in each status that has any (the metrics' gauge; docs/batches.md)."""
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

    def search(self, search: JobSearch, *, before_id: int | None, limit: int, scan: int) -> SearchPage:
        """Jobs matching ``search``, newest first, with ids below ``before_id``: at most ``limit`` of
        them, found among at most ``scan`` candidates (the newest rows below ``before_id`` that match the
        indexed fields), so that no search reads more than ``scan`` rows whatever it looks for."""
        ...

    def count_matching(self, search: JobSearch, *, action: str, ceiling: int, cap: int) -> int:
        """How many jobs with ids up to ``ceiling`` match ``search`` and are in a status ``action``
        (``retry``, ``cancel``, ``delete``) applies to, counting at most ``cap`` (a bulk action's
        confirmation)."""
        ...

    def newest_id(self) -> int:
        """The highest job id there is, 0 when there are no jobs."""
        ...

    # -- console figures: the workers page and the per-type figures (docs/console.md) --------------
    # Each is bounded by its ``limit`` (or by the running jobs) and served by an index, whatever the size
    # of the jobs table.

    def held_jobs(self, *, limit: int) -> list[HeldJob]:
        """Running jobs, the soonest lease expiry first (through the partial index of running jobs)."""
        ...

    def held_counts(self) -> dict[str, int]:
        """How many jobs each worker holds now (running jobs only)."""
        ...

    def recent_finished(self, status: str, *, since: datetime, limit: int) -> list[FinishedJob]:
        """The ``limit`` jobs that became ``status`` (completed or failed) most recently, at or after
        ``since``, newest first (through the index on status and finish time)."""
        ...

    def recent_of_type(self, job_type: str, *, limit: int) -> list[FinishedJob]:
        """The ``limit`` newest jobs (highest ids) of ``job_type``, whatever their status, newest first."""
        ...

    def worker_keys(self, *, since: datetime, limit: int) -> list[WorkerKeyRow]:
        """Worker keys used at or after ``since`` (revoked or not), the most recently used first."""
        ...

    # -- bulk actions (the console) ----------------------------------------------------------------
    def bulk(
        self,
        action: str,
        job_ids: Sequence[int],
        actor: str,
        *,
        now: datetime,
        audit: BulkAudit | None = None,
    ) -> list[int]:
        """Apply ``action`` to the jobs ``job_ids`` in one short transaction and return the ids it
        changed: ``retry`` (failed or cancelled jobs back to pending, retry count 0), ``cancel`` (pending
        jobs) with a history row by ``actor`` for each, or ``delete`` (finished jobs, with their
        history). The status each action needs is part of the statement: a job in another state is left
        alone, whatever happened to it since it was chosen. ``audit``'s row, with the number changed, is
        written in the same transaction (also when none changed)."""
        ...

    # -- schedules: management, and firing a slot (docs/schedules.md) ------------------------------
    # Every change writes its ``audit_log`` row in its own transaction.

    def all_schedules(self) -> list[Schedule]:
        """Every schedule, by name."""
        ...

    def get_schedule(self, name: str) -> Schedule | None:
        """The schedule named ``name``, or None."""
        ...

    def add_schedule(self, values: dict[str, Any], *, actor: str, now: datetime) -> Schedule:
        """Add a schedule with the given columns, created by ``actor``. A taken name raises SQLAlchemy's
        ``IntegrityError``, and nothing is written."""
        ...

    def update_schedule(
        self,
        name: str,
        changes: dict[str, Any],
        *,
        actor: str,
        action: str,
        now: datetime,
        revision: int | None = None,
        detail: str | None = None,
    ) -> Schedule | None:
        """Set ``changes`` and raise the revision, in one guarded UPDATE (only at ``revision`` when given),
        audited as ``action`` with ``detail``; None when no schedule matched."""
        ...

    def delete_schedule(self, name: str, *, actor: str, now: datetime) -> bool:
        """Delete the schedule and its fire rows (its jobs stay); False when there was none."""
        ...

    def due_schedules(self, *, now: datetime, limit: int) -> list[Schedule]:
        """Unpaused schedules whose next fire time is at or before ``now``, soonest first."""
        ...

    def next_schedule_time(self) -> datetime | None:
        """The earliest next fire time of the unpaused schedules (None: none will fire), in one read."""
        ...

    def fire_schedule(self, firing: Firing, *, now: datetime) -> Fired:
        """Fire one slot in one transaction: the guarded UPDATE of the schedule (due at that revision and
        slot; for "run now", that it exists), the (schedule, slot) row, the job and its history row. Two
        firings of one slot, from any number of servers at once, make one job."""
        ...

    # -- the allowlist's management (admins, the command line) -------------------------

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
