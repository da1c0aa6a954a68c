"""The records the engines speak in (engine.py, ``Engine``): jobs and their history, jobs to insert,
outcomes, the backoff policy, schedule firings, searches, and the typed rows of counts, throughput,
failures, the allowlist, API keys and the console's reads."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple

from queuelog.models import STATUSES, AuditLog, JobType

# A job type's change (``Engine.update_job_type``): the attributes to set, or a function of the type as it
# is that gives them; and the audit row made from the type before the change and the attributes set.
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
    # Workflows (docs/workflows.md): the batch it is a member of, or whose callback it is (then
    # ``callback_of`` too); how many jobs
    # were enqueued depending on it; its dependencies and, while it waits, those still unfinished (JSON
    # arrays of ids as text; None when there are none).
    batch_id: int | None
    callback_of: int | None
    dependents: int
    depends_on: str | None
    waiting_on: str | None

    def __getitem__(self, name: str) -> Any:  # type: ignore[override]
        return getattr(self, name)

    @property
    def cancel_requested(self) -> bool:
        """Whether someone asked to cancel this running job and it has not stopped yet (a job completed
        despite the request keeps the request's time and asker, but is no longer to be stopped)."""
        return self.status == "running" and self.cancel_requested_at is not None

    def _reported(self, value: Any) -> Any:
        # A progress report belongs to the attempt running when it came: a later claim makes it stale.
        at, claimed = self.progress_at, self.claimed_at
        current = self.status == "running" and at is not None and claimed is not None and at >= claimed
        return value if current else None

    @property
    def in_workflow(self) -> bool:
        """Whether a change of its status concerns other jobs or a batch: only then does a transition do
        more than change the job itself (docs/workflows.md)."""
        return in_workflow(self.dependents, self.batch_id)

    @property
    def progress(self) -> int | None:
        """The attempt's 0..100."""
        return self._reported(self.progress_percent)

    @property
    def progress_message(self) -> str | None:
        """Its message."""
        return self._reported(self.progress_note)

    @property
    def progress_updated_at(self) -> datetime | None:
        """Its report's time."""
        return self._reported(self.progress_at)


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


def claim_order(job: JobRecord) -> tuple[int, datetime, int]:
    """The sort key of claim order (docs/concepts.md#claim-order): an UPDATE's RETURNING has no order of its own."""
    return (-job.priority, job.available_at, job.id)


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
    # Workflows (docs/workflows.md): ids of existing jobs it waits for, and indexes of earlier jobs of the
    # same insert it waits for (a batch's refs); "run" to run whatever their outcome (None: cancel).
    depends_on: tuple[int, ...] = ()
    after: tuple[int, ...] = ()
    on_dependency_failure: str | None = None


class DependencyMissing(Exception):
    """``insert``: jobs depend on jobs that do not exist or that the owner may not see; ``missing`` lists
    each as ``(index, position, job_id)``: ``jobs[index].depends_on[position]`` is ``job_id``, in order.
    The whole insert was rolled back."""

    def __init__(self, missing: list[tuple[int, int, int]]):
        super().__init__(", ".join(f"jobs[{i}].depends_on[{p}]: no job {job_id}" for i, p, job_id in missing))
        self.missing = missing


class BatchRecord(NamedTuple):
    """A batch (docs/workflows.md) with its members' ids in the order they were enqueued and their counts
    by status. ``on_success`` and ``on_finish`` are the callbacks' job bodies as JSON text, or None."""

    id: int
    owner: str
    description: str
    status: str
    total: int
    finished: int
    failed: int
    on_success: str | None
    on_finish: str | None
    on_success_job: int | None
    on_finish_job: int | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    jobs: tuple[int, ...] = ()
    counts: dict[str, int] | None = None

    def __getitem__(self, name: str) -> Any:  # type: ignore[override]
        return getattr(self, name)


BATCH_FIELDS = BatchRecord._fields[:-2]
BATCH_COLUMNS = ", ".join(BATCH_FIELDS)


class Callback(NamedTuple):
    """A batch's callback job as its body gave it: enqueued when the batch finishes, pending at once."""

    type: str
    payload_json: str
    priority: int
    max_retries: int


class NewBatch(NamedTuple):
    """A batch to create: its members (their ``after`` index other members), callbacks, and an optional
    idempotency key with the fingerprint of the request."""

    description: str
    jobs: list[NewJob]
    on_success: Callback | None
    on_finish: Callback | None
    idempotency_key: str | None
    fingerprint: str | None


class BatchConflict(Exception):
    """``create_batch``: the idempotency key already names ``batch``, made with another body."""

    def __init__(self, batch: BatchRecord):
        super().__init__(f"idempotency key already used by batch {batch.id}")
        self.batch = batch


class Unchanged(NamedTuple):
    """A guarded transition whose guard matched nothing, so nothing changed. ``job`` is the job as it is
    now, None when there is no such job."""

    job: JobRecord | None


def in_workflow(dependents: int, batch_id: int | None) -> bool:
    """``JobRecord.in_workflow`` from the two columns it reads (a row an engine has not decoded)."""
    return dependents > 0 or batch_id is not None


class ReportedJob(NamedTuple):
    """A job after a report that a caller wants no job back for (``Engine.complete_each``): its id, its
    status (completed; or, for a repeat of an earlier report, what that report left) and whether its
    change concerns other jobs (``JobRecord.in_workflow``)."""

    id: int
    status: str
    in_workflow: bool


def reported_job(outcome: JobRecord | Unchanged) -> ReportedJob | Unchanged:
    """``complete_many``'s answer to an item as ``complete_each`` gives it."""
    if isinstance(outcome, Unchanged):
        return outcome
    return ReportedJob(outcome.id, outcome.status, outcome.in_workflow)


class Claimed(NamedTuple):
    """What a claim did: the jobs it leased, in claim order, and the jobs whose expired leases it settled
    (as they are after settling: pending again, or failed when out of retries)."""

    jobs: list[JobRecord]
    expired: list[JobRecord]


class Backoff(NamedTuple):
    """How long a failed attempt waits before the next (docs/concepts.md#retry-backoff): for retry number n,
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


class CountRow(NamedTuple):
    """Jobs per status, type and priority (from the trigger-kept ``job_counts``; exact)."""

    status: str
    type: str
    priority: int
    n: int


def counts_by_type(rows: Iterable[CountRow]) -> dict[str, dict[str, int]]:
    """The counts as ``{type: {status: n}}``, every status present (0 when none)."""
    by_type: dict[str, dict[str, int]] = {}
    for row in rows:
        statuses = by_type.setdefault(row.type, dict.fromkeys(STATUSES, 0))
        statuses[row.status] = statuses.get(row.status, 0) + row.n
    return by_type


class ThroughputRow(NamedTuple):
    """Jobs that became ``status`` (completed or failed) during the UTC minute starting at ``minute``."""

    status: str
    minute: datetime
    n: int


class FailureRow(NamedTuple):
    """A history row that carries an error, with its job's type and current status."""

    job_id: int
    at: datetime
    error: str
    type: str
    status: str


class JobTypeRow(NamedTuple):
    """One entry of the allowlist; ``payload_schema`` is the schema as canonical JSON text, or None."""

    name: str
    enabled: bool
    paused: bool
    payload_schema: str | None


class KeyRow(NamedTuple):
    """An unrevoked API key with its user (``username`` is None for worker keys and orphaned keys)."""

    id: int
    kind: str
    name: str
    last_used_at: datetime | None
    username: str | None
    role: str | None
    active: bool | None


class Firing(NamedTuple):
    """One slot to fire. A due schedule is guarded by its ``revision`` and stored next fire time ``due``,
    and moves to ``next_fire``; all three are None for "run now". ``slot`` keys the fire row (the slot
    fired, or the first one passed over); ``job`` is None when the slot is passed over. ``audit`` is
    (actor, action) for a person's act. Fire rows older than ``forget_before`` are deleted: no slot that
    old can come due again."""

    schedule_id: int
    name: str
    slot: datetime
    due: datetime | None
    revision: int | None
    next_fire: datetime | None
    job: NewJob | None
    owner: str
    forget_before: datetime
    audit: tuple[str, str] | None = None


class Fired(NamedTuple):
    """What a firing did: ``fired`` False when the slot was not (or no longer) due or already fired
    (another server did it); ``job`` the job it made, if any."""

    fired: bool
    job: JobRecord | None


class BulkAudit(NamedTuple):
    """The audit log's row of a bulk action, which the engine writes in the transaction of the changes it
    records (so that no change goes unrecorded, and no row claims a change that was rolled back):
    ``target`` says which jobs were meant (``selected``, ``matching``, an error group), ``detail`` how they
    were chosen (their ids, the search); the row adds how many jobs the transaction changed."""

    target: str
    detail: str

    def row(self, action: str, actor: str, changed: int, now: Any) -> dict[str, Any]:
        """The parameters of the dialect's ``audit`` statement (``now`` bound as the engine binds times)."""
        return {
            "now": now,
            "actor": actor,
            "action": f"jobs.bulk_{action}",
            "target": self.target,
            "detail": f"{self.detail}; jobs changed: {changed}",
        }


class JobSearch(NamedTuple):
    """What a search of the jobs looks for (every given field must match; None or empty: any).

    ``id``, ``owner``, ``status``, ``type``, ``priority`` and ``batch_id`` are matched through the jobs
    table's indexes;
    the others are checked on a bounded window of the newest rows that match those (docs/console.md#search).
    Times are aware datetimes, ``*_from`` inclusive and ``*_to`` exclusive. ``error`` is a piece of the
    stored error, matched without regard to ASCII case. ``payload_path`` names keys of nested objects,
    and the value found there, written as text (``true``, ``42``, ``ada@example.com``), must equal
    ``payload_value``. ``ids``, when given, limits the search to those jobs (an error group's, which the
    errors page links to); an empty tuple matches nothing.
    """

    id: int | None = None
    owner: str | None = None
    status: str | None = None
    type: str | None = None
    priority: int | None = None
    worker: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    finished_from: datetime | None = None
    finished_to: datetime | None = None
    error: str | None = None
    payload_path: tuple[str, ...] = ()
    payload_value: str | None = None
    ids: tuple[int, ...] | None = None
    batch_id: int | None = None  # a batch's members (docs/workflows.md), through ix_jobs_batch


class SearchPage(NamedTuple):
    """One page of a search, newest first. ``next_before`` continues it (as ``before_id``; None when no
    older job can match). ``window_full`` says the page stopped because it had examined its whole window
    of candidates, not because it had found enough: the jobs below ``next_before`` are not examined yet."""

    jobs: list[JobRecord]
    next_before: int | None
    window_full: bool


# -- the console's reads (workers page, per-type figures) -------------------------------------------------


class HeldJob(NamedTuple):
    """A running job and its lease: who holds it, since when, until when, and how far it got."""

    id: int
    type: str
    worker_id: str
    claimed_at: datetime
    lease_expires_at: datetime
    progress: int | None = None  # the running attempt's last report, 0..100
    progress_message: str | None = None


class FinishedJob(NamedTuple):
    """A job's last attempt as its row keeps it, for figures: ``finished_at`` is None while it is not
    finished; ``claimed_at`` is None for a job never claimed (cancelled while pending)."""

    id: int
    type: str
    status: str
    worker_id: str | None
    available_at: datetime
    claimed_at: datetime | None
    finished_at: datetime | None


class WorkerKeyRow(NamedTuple):
    """A worker key (its name is the worker id of every job it claims)."""

    name: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
