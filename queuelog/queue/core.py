"""The queue layer: the one place where jobs change state, and the policy around it.

The database work is the engine's (queuelog/engines/): every transition there is one guarded statement
whose result decides whether it happened, with its history row in the same transaction. ``Queue`` adds the
policy: which types may be enqueued and their schemas, when a job becomes available, backoff parameters,
error redaction, metrics, long-poll wake-ups, and the exceptions the faces translate for their callers.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import NamedTuple

from queuelog import metrics
from queuelog.db import Database
from queuelog.engines import (
    Backoff,
    Claimed,
    EventRecord,
    JobRecord,
    KeyConflict,
    ReportedJob,
    Unchanged,
    engine_for,
)
from queuelog.engines.records import DependencyMissing
from queuelog.models import FINISHED, utcnow
from queuelog.queue.errors import (
    Code,
    IdempotencyKeyReused,
    InvalidState,
    JobNotFound,
    NotLeaseHolder,
    QueueError,
)
from queuelog.queue.longpoll import LongPolls
from queuelog.queue.running import RunningJobs
from queuelog.queue.spec import JobSpec
from queuelog.queue.types import JobTypeRules
from queuelog.queue.wakeups import WaitingPollsFull, Wakeups
from queuelog.queue.workflows import Workflows, dependency_refusal
from queuelog.redact import redact_error

MAX_ERROR_CHARS = 4096
# The request id of the claim this context makes (Queue.claim_request): every claim of a long poll carries
# it, however the poll waits in between.
_CLAIM_REQUEST: ContextVar[str | None] = ContextVar("claim_request", default=None)


class Queue(LongPolls, RunningJobs, Workflows):
    """Enqueue, claim, complete, fail, cancel, retry, expire leases and prune, over one ``Database``; and
    running jobs' cancellation, progress and snoozes (running.py).

    Jobs come back as ``JobRecord`` (queuelog/engines/records.py). A refused transition raises a
    ``QueueError`` with a code (queue/errors.py): ``JobNotFound``, ``NotLeaseHolder`` (the same whatever the
    job's state), ``InvalidState`` or ``IdempotencyKeyReused``.
    """

    def __init__(
        self,
        db: Database,
        *,
        lease_seconds: int = 300,
        backoff_base: float = 2.0,
        backoff_max: float = 3600.0,
        clock: Callable[[], datetime] = utcnow,
        rand: Callable[[], float] = random.random,
        poll_interval: float = 0.2,
        max_snoozes: int = 50,
        wakeups: str = "signal",
        safety_net: float = 5.0,
        max_waiting: int = 500,
    ):
        self.db = db
        self.engine = engine_for(db)
        self.lease_seconds = lease_seconds
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.clock = clock
        self.rand = rand
        self.types = JobTypeRules(db)
        self.max_snoozes = max_snoozes
        engine = self.engine  # the probe holds no reference to the queue: its threads must let go of it

        def probe(types: list[str] | None) -> bool:
            return engine.claimable(now=clock(), types=types)

        self.wakeups = Wakeups(
            db,
            probe,
            mode=wakeups,
            safety_net=safety_net,
            poll_interval=poll_interval,
            max_waiting=max_waiting,
        )

    def ready(self, jobs: Iterable[JobRecord]) -> None:
        """Wake-ups for ``jobs`` that are pending after a commit: now, or when they come due."""
        due: dict[tuple[str, float | None], int] = {}
        now = self.clock()  # the due times go by this queue's clock, made Unix times of this machine
        for job in jobs:
            if job.status != "pending":
                continue
            delay = (job.available_at - now).total_seconds()
            key = (job.type, time.time() + delay if delay > 0 else None)
            due[key] = due.get(key, 0) + 1
        for (name, at), count in due.items():
            self.wakeups.ready((name,), due=at, count=count)

    def followed(self, jobs: Iterable[JobRecord | ReportedJob]) -> None:
        """Wake-ups for what finishing ``jobs`` may have made claimable in the same transaction: their
        released dependents and their batches' callbacks (docs/workflows.md), of types the queue layer does
        not see, so any waiting long poll looks. On PostgreSQL those rows notify by themselves."""
        count = sum(1 for job in jobs if job.in_workflow and job.status in FINISHED)
        if count:
            self.wakeups.ready(None, count=count)

    def _backoff(self) -> Backoff:
        return Backoff(self.backoff_base, self.backoff_max, self.rand)

    # -- enqueue ------------------------------------------------------------------------------------

    def enqueue(self, owner: str, spec: JobSpec, *, scope: str | None = None) -> tuple[JobRecord, bool]:
        """Add one job; returns ``(job, created)``. ``created`` is False when an idempotent replay matched."""
        return self.enqueue_many(owner, [spec], scope=scope, listed=False)[0]

    def enqueue_many(
        self, owner: str, specs: list[JobSpec], *, scope: str | None = None, listed: bool = True
    ) -> list[tuple[JobRecord, bool]]:
        """Add jobs in one transaction: all of them, or none (the error names each culprit's index,
        ``jobs[i].field``, unless ``listed`` is false: one job enqueued alone).
        A job's dependencies must be ``scope``'s jobs when given (a producer's own; docs/workflows.md)."""
        self.types.check(specs, listed=listed)
        now = self.clock()
        jobs = [spec.new_job(now) for spec in specs]
        try:
            out = self.engine.insert(owner, jobs, now, scope=scope)
        except DependencyMissing as exc:
            raise dependency_refusal(exc, listed=listed) from None
        except KeyConflict as exc:
            field = f"jobs[{exc.index}].idempotency_key" if listed else "idempotency_key"
            raise IdempotencyKeyReused(Code.IDEMPOTENCY_KEY_REUSED, field=field, job_id=exc.job.id) from None
        created = sum(1 for _, new in out if new)
        if created:
            metrics.ENQUEUED.inc(created)
            self.ready(job for job, new in out if new)
        return out

    # -- claim --------------------------------------------------------------------------------------

    def claim(
        self,
        worker: str,
        *,
        types: Iterable[str] | None = None,
        limit: int = 1,
        lease_seconds: int | None = None,
    ) -> list[JobRecord]:
        """Lease up to ``limit`` claimable jobs to ``worker`` in claim order; each carries ``lease_token``.

        Expired leases are settled first, in the same transaction, so that they are claimable now. Within
        ``claim_request(request_id)``, a claim repeated with that id answers the jobs the first one leased
        (docs/operations.md#outages).
        """
        now = self.clock()
        started = time.perf_counter()
        claimed = self.engine.claim(
            worker,
            now=now,
            lease_seconds=lease_seconds or self.lease_seconds,
            limit=limit,
            types=list(types) if types else None,
            backoff=self._backoff(),
            request_id=_CLAIM_REQUEST.get(),
        )
        jobs = _count_claimed(claimed, started)
        self.ready(claimed.expired)
        return jobs

    @contextmanager
    def claim_request(self, request_id: str | None) -> Iterator[None]:
        """The claims made within (a claim, or each look of a long poll) carry ``request_id``."""
        if request_id is None:
            yield
            return
        token = _CLAIM_REQUEST.set(request_id)
        try:
            yield
        finally:
            _CLAIM_REQUEST.reset(token)

    # -- the holder's reports -----------------------------------------------------------------------

    @staticmethod
    def _refusal(job_id: int, outcome: Unchanged) -> QueueError:
        if outcome.job is None:
            return JobNotFound(Code.JOB_NOT_FOUND, job_id=job_id)
        # The same answer whatever the job's state: a worker learns nothing about jobs it does not hold.
        return NotLeaseHolder(Code.NOT_LEASE_HOLDER, job_id=job_id)

    def _held(self, job_id: int, outcome: JobRecord | Unchanged) -> JobRecord:
        if isinstance(outcome, Unchanged):
            raise self._refusal(job_id, outcome)
        return outcome

    def complete(
        self, job_id: int, worker: str, lease_token: str, result_json: str | None = None
    ) -> JobRecord:
        """Mark a held job completed with an optional result (already serialized JSON)."""
        outcome = self.engine.complete(job_id, worker, lease_token, now=self.clock(), result_json=result_json)
        job = self._held(job_id, outcome)
        metrics.COMPLETED.inc()
        self.followed([job])
        return job

    def complete_many(
        self, worker: str, items: list[tuple[int, str, str | None]]
    ) -> list[tuple[int, JobRecord | QueueError]]:
        """Complete several held jobs in one transaction; each ``(id, lease_token, result_json)`` item is
        judged alone. Returns ``(id, job)`` for a success and ``(id, error)`` for a refusal, in order. The
        ids must be distinct (ValueError): the engines find each item by its job's id."""
        outcomes = self.engine.complete_many(worker, _distinct(items), now=self.clock())
        out: list[tuple[int, JobRecord | QueueError]] = []
        for (job_id, _, _), outcome in zip(items, outcomes, strict=True):
            out.append(
                (job_id, self._refusal(job_id, outcome) if isinstance(outcome, Unchanged) else outcome)
            )
        metrics.COMPLETED.inc(sum(1 for outcome in outcomes if not isinstance(outcome, Unchanged)))
        self.followed(outcome for outcome in outcomes if not isinstance(outcome, Unchanged))
        return out

    def complete_each(
        self, worker: str, items: list[tuple[int, str, str | None]]
    ) -> list[tuple[int, QueueError | None]]:
        """``complete_many`` for a caller that needs no job back (a compact answer, docs/api.md): the same
        transaction, with ``(id, None)`` for a success. Lighter on SQLite, where it returns no rows of
        jobs while the writers' lock is held."""
        outcomes = self.engine.complete_each(worker, _distinct(items), now=self.clock())
        return self._each_done(items, outcomes)

    def complete_each_and_claim(
        self, worker: str, items: list[tuple[int, str, str | None]], then: NextClaim
    ) -> tuple[list[tuple[int, QueueError | None]], list[JobRecord]]:
        """``complete_each``, then claim as ``then`` asks, in one transaction
        (docs/api.md#report-and-claim-in-one-request): each item's outcome, as ``complete_each``'s, and
        the jobs claimed. The claim happens whatever each item's outcome; when nothing was claimable and
        ``then`` waits, the wait (a long poll, as ``claim_wait``'s) comes after the commit."""
        started = time.perf_counter()
        outcomes, claimed = self.engine.complete_each_and_claim(
            worker,
            _distinct(items),
            now=self.clock(),
            lease_seconds=then.lease_seconds or self.lease_seconds,
            limit=then.limit,
            types=then.types,
            backoff=self._backoff(),
            request_id=then.request_id,
        )
        answers = self._each_done(items, outcomes)
        self.ready(claimed.expired)
        return answers, self._then_wait(worker, then, _count_claimed(claimed, started))

    def _each_done(
        self, items: list[tuple[int, str, str | None]], outcomes: list[ReportedJob | Unchanged]
    ) -> list[tuple[int, QueueError | None]]:
        """A compact batch completion's answer to each item; counts and wakes for the jobs completed."""
        done = [outcome for outcome in outcomes if not isinstance(outcome, Unchanged)]
        metrics.COMPLETED.inc(len(done))
        self.followed(done)
        return [
            (job_id, self._refusal(job_id, outcome) if isinstance(outcome, Unchanged) else None)
            for (job_id, _, _), outcome in zip(items, outcomes, strict=True)
        ]

    def complete_and_claim(
        self, job_id: int, worker: str, lease_token: str, result_json: str | None, then: NextClaim
    ) -> tuple[JobRecord, list[JobRecord]]:
        """``complete``, then claim as ``then`` asks, in one transaction (docs/api.md#report-and-claim-in-one-request):
        the job as completed and the jobs claimed. A refused report raises as ``complete`` does, and
        claims nothing. When nothing was claimable and ``then`` waits, the wait (a long poll, as
        ``claim_wait``'s) comes after the report is committed."""
        started = time.perf_counter()
        outcome, claimed = self.engine.complete_and_claim(
            job_id,
            worker,
            lease_token,
            now=self.clock(),
            result_json=result_json,
            lease_seconds=then.lease_seconds or self.lease_seconds,
            limit=then.limit,
            types=then.types,
            backoff=self._backoff(),
            request_id=then.request_id,
        )
        job = self._held(job_id, outcome)
        metrics.COMPLETED.inc()
        self.followed([job])
        self.ready(claimed.expired)
        return job, self._then_wait(worker, then, _count_claimed(claimed, started))

    def fail_and_claim(
        self, job_id: int, worker: str, lease_token: str, error: str, retryable: bool, then: NextClaim
    ) -> tuple[JobRecord, list[JobRecord]]:
        """``fail``, then claim as ``then`` asks, in one transaction, as ``complete_and_claim``."""
        started = time.perf_counter()
        outcome, claimed = self.engine.fail_and_claim(
            job_id,
            worker,
            lease_token,
            now=self.clock(),
            error=_stored_error(error),
            retryable=retryable,
            lease_seconds=then.lease_seconds or self.lease_seconds,
            limit=then.limit,
            types=then.types,
            backoff=self._backoff(),
            request_id=then.request_id,
        )
        job = self._held(job_id, outcome)
        _count_failed(job)
        self.ready([job])
        self.followed([job])
        self.ready(claimed.expired)
        return job, self._then_wait(worker, then, _count_claimed(claimed, started))

    def claim_next(self, worker: str, then: NextClaim) -> list[JobRecord]:
        """Claim as a report's ``then`` asks, in a transaction of its own (a batch completion that answers
        whole jobs: ``complete_many`` first; a report whose claim found nothing and waits). With no room
        left to wait in this process, none: the report stands, and its answer says it."""
        try:
            with self.claim_request(then.request_id):
                return self.claim_wait(
                    worker,
                    wait_seconds=then.wait_seconds,
                    types=then.types,
                    limit=then.limit,
                    lease_seconds=then.lease_seconds,
                )
        except WaitingPollsFull:
            return []

    def _then_wait(self, worker: str, then: NextClaim, jobs: list[JobRecord]) -> list[JobRecord]:
        """The jobs a report claimed; when none and ``then`` waits, a long poll after the commit."""
        return jobs if jobs or then.wait_seconds <= 0 else self.claim_next(worker, then)

    def heartbeat(
        self, job_id: int, worker: str, lease_token: str, lease_seconds: int | None = None
    ) -> JobRecord:
        """Extend a held job's lease to now + ``lease_seconds``."""
        lease = lease_seconds or self.lease_seconds
        outcome = self.engine.heartbeat(job_id, worker, lease_token, now=self.clock(), lease_seconds=lease)
        return self._held(job_id, outcome)

    def fail(
        self, job_id: int, worker: str, lease_token: str, error: str, *, retryable: bool = True
    ) -> JobRecord:
        """Record a failed attempt: back to ``pending`` after a backoff while retries remain, else ``failed``.

        The error is stored redacted (docs/operations.md#redaction-of-error-text) and cut to ``MAX_ERROR_CHARS``. Redaction
        (linear in its input) sees the first ``4 * MAX_ERROR_CHARS`` characters and comes before the final
        cut, so that a secret straddling that cut is masked whole rather than kept as a fragment.
        """
        outcome = self.engine.fail(
            job_id,
            worker,
            lease_token,
            now=self.clock(),
            error=_stored_error(error),
            retryable=retryable,
            backoff=self._backoff(),
        )
        job = self._held(job_id, outcome)
        _count_failed(job)
        self.ready([job])
        self.followed([job])
        return job

    # -- leases -------------------------------------------------------------------------------------

    def expire_leases(self) -> list[JobRecord]:
        """Settle every job whose lease has run out; returns them as they now are."""
        expired = self.engine.expire(now=self.clock(), backoff=self._backoff())
        _count_expired(expired)
        self.ready(expired)
        self.followed(expired)
        return expired

    # -- people's actions ---------------------------------------------------------------------------

    def cancel(self, job_id: int, actor: str, *, owner: str | None = None) -> JobRecord:
        """Cancel a pending job, or ask the worker of a running one to stop it (the job comes back still
        running, ``cancel_requested``). ``owner`` limits it to that owner's jobs (None: an admin, any job)."""
        outcome = self.engine.cancel(job_id, actor, now=self.clock(), owner=owner)
        if isinstance(outcome, Unchanged) and outcome.job is not None and outcome.job.status == "running":
            outcome = self._request_cancel(job_id, actor, owner)
        if isinstance(outcome, Unchanged):
            job = outcome.job
            if job is None or (owner is not None and job.owner != owner):
                raise JobNotFound(Code.JOB_NOT_FOUND, job_id=job_id)
            raise InvalidState(Code.NOT_CANCELLABLE, job_id=job_id, status=job.status)
        self.followed([outcome])
        return outcome

    def retry(self, job_id: int, actor: str) -> JobRecord:
        """Put a failed or cancelled job back to pending now, with its retry count reset (admins); a job
        with dependencies waits on them again (docs/workflows.md)."""
        outcome = self.engine.retry(job_id, actor, now=self.clock())
        if isinstance(outcome, Unchanged):
            if outcome.job is None:
                raise JobNotFound(Code.JOB_NOT_FOUND, job_id=job_id)
            raise InvalidState(Code.NOT_RETRYABLE, job_id=job_id, status=outcome.job.status)
        metrics.RETRIED.inc()
        self.ready([outcome])
        return outcome

    # -- retention ----------------------------------------------------------------------------------

    def prune(self, older_than: timedelta, *, batch: int = 1000) -> int:
        """Delete finished jobs (completed, failed, cancelled) that finished more than ``older_than`` ago,
        with their events, in short transactions of ``batch`` jobs. Pending and running jobs are never
        touched. Deleting a job frees its idempotency key. Returns how many jobs were deleted.

        The dashboard's per-minute throughput needs only the last hour; a day of it is kept."""
        now = self.clock()
        return self.engine.prune(
            finished_before=now - older_than, batch=batch, throughput_before=now - timedelta(days=1)
        )

    # -- reads --------------------------------------------------------------------------------------

    def get(self, job_id: int) -> JobRecord | None:
        """The job, or None."""
        return self.engine.get(job_id)

    def events(self, job_id: int) -> list[EventRecord]:
        """The job's history, oldest first."""
        return self.engine.events(job_id)

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
        """Jobs newest first, filtered; ``before_id`` continues a previous page (keyset pagination)."""
        return self.engine.list_jobs(
            owner=owner, status=status, type=type, priority=priority, before_id=before_id, limit=limit
        )


class NextClaim(NamedTuple):
    """What a report asks to claim next (docs/api.md#report-and-claim-in-one-request): as ``claim_wait``'s
    arguments."""

    limit: int = 1
    wait_seconds: float = 0
    types: list[str] | None = None
    lease_seconds: int | None = None
    request_id: str | None = None  # as a claim's: the report sent again answers the same jobs


def _stored_error(error: str) -> str:
    """A failure's error as stored: redacted and cut (``Queue.fail``)."""
    error = error[: 4 * MAX_ERROR_CHARS].replace("\x00", "\ufffd")
    return redact_error(error.encode("utf-8", "replace").decode("utf-8"))[:MAX_ERROR_CHARS]


def _count_failed(job: JobRecord) -> None:
    if job.status != "cancelled":  # cancelled: its cancellation was requested (docs/running-jobs.md)
        (metrics.RETRIED if job.status == "pending" else metrics.FAILED).inc()


def _distinct(items: list[tuple[int, str, str | None]]) -> list[tuple[int, str, str | None]]:
    """A batch completion's items, whose ids must be distinct (ValueError)."""
    if len({job_id for job_id, _, _ in items}) != len(items):
        raise ValueError("complete_many: each job may appear once")
    return items


def _count_claimed(claimed: Claimed, started: float) -> list[JobRecord]:
    metrics.CLAIM_SECONDS.observe(time.perf_counter() - started)
    metrics.CLAIMED.inc(len(claimed.jobs))
    _count_expired(claimed.expired)
    return claimed.jobs


def _count_expired(jobs: list[JobRecord]) -> None:
    if jobs:
        metrics.EXPIRED.inc(len(jobs))
        requeued = sum(1 for job in jobs if job.status == "pending")
        metrics.RETRIED.inc(requeued)
        metrics.FAILED.inc(len(jobs) - requeued)
