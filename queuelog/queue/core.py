"""The queue layer: the one place where jobs change state.

Every transition is one guarded statement (``UPDATE ... WHERE id = :id AND status = ... RETURNING``) whose
row count decides whether it happened; nothing reads a job and then writes it on the strength of that read.
Each transition appends a row to ``job_events`` in the same transaction.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from functools import wraps
from typing import Any

from queuelog import metrics
from queuelog.db import Database, DatabaseUnavailable
from queuelog.models import utcnow
from queuelog.queue.dialects import dialect_for
from queuelog.queue.errors import (
    IdempotencyKeyReused,
    InvalidState,
    JobNotFound,
    NotLeaseHolder,
    QueueError,
)
from queuelog.queue.reads import QueueReads
from queuelog.queue.spec import JobSpec, backoff_seconds
from queuelog.queue.statements import statements
from queuelog.queue.types import JobTypeRules
from queuelog.redact import redact_error

MAX_ERROR_CHARS = 4096


def _retry_conflicts(method):
    """Run a one-transaction queue operation again when PostgreSQL aborted it to break a deadlock (rare:
    counters are written in key order). The aborted transaction changed nothing, so running it again is
    safe."""

    @wraps(method)
    def wrapper(self, *args, **kwargs):
        for attempt in range(5):
            try:
                return method(self, *args, **kwargs)
            except DatabaseUnavailable as exc:
                if not exc.conflict or attempt == 4:
                    raise
                time.sleep(random.random() * 0.01 * 2**attempt)
        raise AssertionError("unreachable")

    return wrapper


class Queue(QueueReads):
    """Enqueue, claim, complete, fail, cancel, retry and expire leases, over one ``Database``."""

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
    ):
        self.db = db
        self.d = dialect_for(db.dialect)
        self.lease_seconds = lease_seconds
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.clock = clock
        self.rand = rand
        self.types = JobTypeRules(db)
        self._sql = statements(self.d)
        if self.d.SELF_LOGGING:  # PostgreSQL: expiry, claim and history in one statement (statements.py)
            self._claim = {False: self._sql["claim"], True: self._sql["claim_typed"]}
        else:
            self._claim = {typed: self.d.sql(text) for typed, text in self.d.CLAIM.items()}
        self._pick = {typed: self.d.sql(text) for typed, text in self.d.PICK.items()}
        self.poll_interval = poll_interval
        # Wakes long polls in this process as soon as a job is enqueued here; jobs enqueued by other
        # processes are found by polling every `poll_interval` seconds (a cheap read, no lock).
        self._arrivals = threading.Condition()

    # -- helpers ------------------------------------------------------------------------------------

    def _one(self, cur: Any, name: str, params: dict[str, Any]) -> Any:
        """Run a statement and return its first row or None (all rows are read: SQLite finishes a
        RETURNING statement only when it is stepped to the end)."""
        cur.execute(self._sql[name], params)
        rows = cur.fetchall()
        return rows[0] if rows else None

    def _all(self, cur: Any, name: str, params: dict[str, Any]) -> list[Any]:
        cur.execute(self._sql[name], params)
        return cur.fetchall()

    def _event(self, cur: Any, rows: list[dict[str, Any]]) -> None:
        if self.d.SELF_LOGGING:
            return  # PostgreSQL's statements wrote their history rows themselves
        if len(rows) == 1:
            cur.execute(self._sql["event"], rows[0])
        elif rows:
            cur.executemany(self._sql["event"], rows)

    def _locate(self, cur: Any, job_id: int) -> dict[str, Any]:
        row = self._one(cur, "get", {"id": job_id})
        if row is None:
            raise JobNotFound(f"job {job_id} does not exist")
        return self.d.job(row)

    # -- enqueue ------------------------------------------------------------------------------------

    def enqueue(self, owner: str, spec: JobSpec) -> tuple[dict[str, Any], bool]:
        """Add one job; returns ``(job, created)``. ``created`` is False when an idempotent replay matched."""
        return self.enqueue_many(owner, [spec])[0]

    @_retry_conflicts
    def enqueue_many(self, owner: str, specs: list[JobSpec]) -> list[tuple[dict[str, Any], bool]]:
        """Add jobs in one transaction: all of them, or none (the error names the index of the culprit)."""
        self.types.check(specs)
        d = self.d
        now = self.clock()
        ts = d.time(now)
        out: list[tuple[dict[str, Any], bool]] = []
        events: list[dict[str, Any]] = []
        # One job is one statement on PostgreSQL (autocommitted); several need one transaction.
        with self.db.cursor(write=True, autocommit=len(specs) == 1) as cur:
            for index, spec in enumerate(specs):
                if spec.run_at is not None:
                    available = max(spec.run_at, now)
                elif spec.delay_seconds:
                    available = now + timedelta(seconds=spec.delay_seconds)
                else:
                    available = now
                params = {
                    "type": spec.type,
                    "payload": d.json(spec.payload_json),
                    "priority": spec.priority,
                    "max_retries": spec.max_retries,
                    "key": spec.idempotency_key,
                    "fingerprint": spec.fingerprint if spec.idempotency_key else None,
                    "owner": owner,
                    "available_at": d.time(available),
                    "now": ts,
                }
                if spec.idempotency_key is None:
                    row = self._one(cur, "insert", params)
                else:
                    row = self._one(cur, "insert_idempotent", params)
                    if row is None:  # the key exists: the same request again, or a conflicting one
                        existing = self._one(cur, "by_key", {"owner": owner, "key": spec.idempotency_key})
                        job = d.job(existing[:-1])
                        if existing[-1] != spec.fingerprint:
                            where = f"jobs[{index}]: " if len(specs) > 1 else ""
                            raise IdempotencyKeyReused(
                                f"{where}idempotency key already used by job {job['id']} with other parameters",
                                job["id"],
                            )
                        out.append((job, False))
                        continue
                job = d.job(row)
                out.append((job, True))
                events.append(_event_row(job["id"], ts, "enqueued", owner, 0))
            self._event(cur, events)
        if events:
            metrics.ENQUEUED.inc(len(events))
            self._notify_arrival()
        return out

    def _notify_arrival(self) -> None:
        with self._arrivals:
            self._arrivals.notify_all()

    # -- claim --------------------------------------------------------------------------------------

    @_retry_conflicts
    def claim(
        self,
        worker: str,
        *,
        types: Iterable[str] | None = None,
        limit: int = 1,
        lease_seconds: int | None = None,
    ) -> list[dict[str, Any]]:
        """Lease up to ``limit`` claimable jobs to ``worker`` in claim order; each carries ``lease_token``.

        Expired leases are settled first, in the same transaction, so that they are claimable now.
        """
        d = self.d
        now = self.clock()
        ts = d.time(now)
        lease = lease_seconds or self.lease_seconds
        type_list = list(types) if types else None
        params = {
            "now": ts,
            "limit": limit,
            "true": True,
            "worker": worker,
            "token": secrets.token_hex(16),
            "expires": d.time(now + timedelta(seconds=lease)),
        }
        if type_list:
            params["types"] = d.types(type_list)
        started = time.perf_counter()
        with self.db.cursor(write=True, autocommit=True) as cur:
            if d.SELF_LOGGING:  # PostgreSQL: expiry, claim and history in one statement
                params.update(error="lease expired", base=self.backoff_base, cap=self.backoff_max)
                cur.execute(self._claim[bool(type_list)], params)
                tagged = cur.fetchall()
                rows = [row[1:] for row in tagged if row[0] == "claimed"]
                expired = [d.job(row[1:]) for row in tagged if row[0] == "expired"]
                if len(rows) < limit and any(job["status"] == "pending" for job in expired):
                    # The statement's snapshot cannot see the jobs it just put back: claim once more so
                    # that, as on SQLite, the claim that settles a lease may hand the job out again.
                    params.update(limit=limit - len(rows), token=secrets.token_hex(16))
                    cur.execute(self._claim[bool(type_list)], params)
                    rows += [row[1:] for row in cur.fetchall() if row[0] == "claimed"]
            else:
                expired = self._expire(cur, now)
                cur.execute(self._claim[bool(type_list)], params)
                rows = cur.fetchall()
            jobs = sorted(
                (d.job(row) for row in rows),
                key=lambda job: (-job["priority"], job["available_at"], job["id"]),
            )
            self._event(cur, [_event_row(j["id"], ts, "claimed", worker, j["retry_count"] + 1) for j in jobs])
        metrics.CLAIM_SECONDS.observe(time.perf_counter() - started)
        metrics.CLAIMED.inc(len(jobs))
        _count_expired(expired)
        return jobs

    def claim_wait(
        self,
        worker: str,
        *,
        wait_seconds: float,
        types: Iterable[str] | None = None,
        limit: int = 1,
        lease_seconds: int | None = None,
    ) -> list[dict[str, Any]]:
        """Claim; when nothing is claimable, wait up to ``wait_seconds`` for work (a long poll).

        No connection or transaction is held while waiting: the wait is on a condition variable, woken by
        enqueues in this process, with a cheap read-only probe every ``poll_interval`` for the others.
        """
        types = list(types) if types else None
        deadline = time.monotonic() + wait_seconds
        while True:
            jobs = self.claim(worker, types=types, limit=limit, lease_seconds=lease_seconds)
            if jobs or time.monotonic() >= deadline:
                return jobs
            while (remaining := deadline - time.monotonic()) > 0:
                with self._arrivals:
                    self._arrivals.wait(min(self.poll_interval, remaining))
                if self.has_work(types):
                    break

    def has_work(self, types: list[str] | None = None) -> bool:
        """Is anything claimable now (or a lease due to be settled)? A read, no lock."""
        ts = self.d.time(self.clock())
        params: dict[str, Any] = {"now": ts, "limit": 1, "true": True}
        if types:
            params["types"] = self.d.types(types)
        with self.db.cursor() as cur:
            cur.execute(self._pick[bool(types)], params)
            if cur.fetchall():
                return True
            return bool(self._all(cur, "lease_due", {"now": ts}))

    # -- the holder's reports -----------------------------------------------------------------------

    def _held(self, cur: Any, job_id: int, statement: str, params: dict[str, Any]) -> dict[str, Any]:
        """Run a holder-guarded statement; tell "no such job" from "not yours" when it changes nothing."""
        row = self._one(cur, statement, params)
        if row is not None:
            return self.d.job(row)
        self._locate(cur, job_id)
        # The same answer whatever the job's state: a worker learns nothing about jobs it does not hold.
        raise NotLeaseHolder(f"job {job_id} is not held by this worker under this lease token")

    @_retry_conflicts
    def complete(
        self, job_id: int, worker: str, lease_token: str, result_json: str | None = None
    ) -> dict[str, Any]:
        """Mark a held job completed with an optional result (already serialized JSON)."""
        d = self.d
        ts = d.time(self.clock())
        params = {
            "id": job_id,
            "worker": worker,
            "token": lease_token,
            "now": ts,
            "result": d.json(result_json),
        }
        with self.db.cursor(write=True, autocommit=True) as cur:
            job = self._held(cur, job_id, "complete", params)
            self._event(cur, [_event_row(job_id, ts, "completed", worker, job["retry_count"] + 1)])
        metrics.COMPLETED.inc()
        return job

    @_retry_conflicts
    def complete_many(
        self, worker: str, items: list[tuple[int, str, str | None]]
    ) -> list[tuple[int, dict[str, Any] | QueueError]]:
        """Complete several held jobs in one transaction; each ``(id, lease_token, result_json)`` item is
        judged alone. Returns ``(id, job)`` for a success and ``(id, error)`` for a refusal, in order."""
        d = self.d
        ts = d.time(self.clock())
        done: dict[int, dict[str, Any]] = {}
        with self.db.cursor(write=True, autocommit=True) as cur:
            cur.execute(d.COMPLETE_MANY, {"worker": worker, "now": ts, **d.complete_many_params(items)})
            done = {job["id"]: job for job in map(d.job, cur.fetchall())}
            out: list[tuple[int, dict[str, Any] | QueueError]] = []
            for job_id, _, _ in items:
                if job_id in done:
                    out.append((job_id, done[job_id]))
                    continue
                try:
                    self._locate(cur, job_id)
                    out.append(
                        (
                            job_id,
                            NotLeaseHolder(f"job {job_id} is not held by this worker under this lease token"),
                        )
                    )
                except JobNotFound as exc:
                    out.append((job_id, exc))
            self._event(
                cur,
                [_event_row(j["id"], ts, "completed", worker, j["retry_count"] + 1) for j in done.values()],
            )
        metrics.COMPLETED.inc(len(done))
        return out

    @_retry_conflicts
    def heartbeat(self, job_id: int, worker: str, lease_token: str, lease_seconds: int | None = None) -> dict:
        """Extend a held job's lease to now + ``lease_seconds``."""
        d = self.d
        now = self.clock()
        expires = now + timedelta(seconds=lease_seconds or self.lease_seconds)
        params = {"id": job_id, "worker": worker, "token": lease_token, "now": d.time(now)}
        params["expires"] = d.time(expires)
        with self.db.cursor(write=True, autocommit=True) as cur:
            return self._held(cur, job_id, "heartbeat", params)

    @_retry_conflicts
    def fail(
        self, job_id: int, worker: str, lease_token: str, error: str, *, retryable: bool = True
    ) -> dict[str, Any]:
        """Record a failed attempt: back to ``pending`` after a backoff while retries remain, else ``failed``.

        The error is stored redacted (README, Security, V-10) and cut to ``MAX_ERROR_CHARS``. Redaction
        (linear in its input) sees the first ``4 * MAX_ERROR_CHARS`` characters and comes before the final
        cut, so that a secret straddling that cut is masked whole rather than kept as a fragment.
        """
        error = error[: 4 * MAX_ERROR_CHARS].replace("\x00", "\ufffd")
        error = redact_error(error.encode("utf-8", "replace").decode("utf-8"))[:MAX_ERROR_CHARS]
        d = self.d
        now = self.clock()
        ts = d.time(now)
        params = {
            "id": job_id,
            "worker": worker,
            "token": lease_token,
            "now": ts,
            "retryable": int(retryable),
            "error": error,
            "base": self.backoff_base,
            "cap": self.backoff_max,
            "jitter": self.rand(),
        }
        with self.db.cursor(write=True, autocommit=True) as cur:
            job = self._held(cur, job_id, "fail", params)
            job = self._schedule_retry(cur, job, now)
            attempt = job["retry_count"] + (0 if job["status"] == "pending" else 1)
            event = "retry_scheduled" if job["status"] == "pending" else "failed"
            self._event(cur, [_event_row(job_id, ts, event, worker, attempt, error)])
        (metrics.RETRIED if job["status"] == "pending" else metrics.FAILED).inc()
        return job

    def _schedule_retry(self, cur: Any, job: dict[str, Any], now: datetime) -> dict[str, Any]:
        """Push a job that just went back to pending into the future by the backoff for its retry count."""
        if self.d.SELF_LOGGING or job["status"] != "pending":
            return job  # PostgreSQL's statements computed the backoff themselves
        delay = backoff_seconds(job["retry_count"], self.backoff_base, self.backoff_max, self.rand)
        if delay > 0:
            available = now + timedelta(seconds=delay)
            # Same transaction as the guarded update, which holds the row: nobody can claim it in between.
            cur.execute(self._sql["set_available"], {"id": job["id"], "available_at": self.d.time(available)})
            job["available_at"] = available
        return job

    # -- leases -------------------------------------------------------------------------------------

    @_retry_conflicts
    def expire_leases(self) -> list[dict[str, Any]]:
        """Settle every job whose lease has run out; returns them as they now are."""
        with self.db.cursor(write=True, autocommit=True) as cur:
            expired = self._expire(cur, self.clock())
        _count_expired(expired)
        return expired

    def _expire(self, cur: Any, now: datetime) -> list[dict[str, Any]]:
        ts = self.d.time(now)
        rows = self._all(
            cur,
            "expire",
            {"now": ts, "error": "lease expired", "base": self.backoff_base, "cap": self.backoff_max},
        )
        jobs = []
        events = []
        for row in rows:
            job = self._schedule_retry(cur, self.d.job(row), now)
            requeued = job["status"] == "pending"
            attempt = job["retry_count"] + (0 if requeued else 1)
            events.append(
                _event_row(
                    job["id"],
                    ts,
                    "lease_expired",
                    "system",
                    attempt,
                    f"lease expired (held by {job['worker_id']})",
                )
            )
            jobs.append(job)
        self._event(cur, events)
        return jobs

    # -- people's actions ---------------------------------------------------------------------------

    @_retry_conflicts
    def cancel(self, job_id: int, actor: str, *, owner: str | None = None) -> dict[str, Any]:
        """Cancel a pending job. ``owner`` limits it to that owner's jobs (None: an admin, any job)."""
        ts = self.d.time(self.clock())
        with self.db.cursor(write=True, autocommit=True) as cur:
            if owner is None:
                row = self._one(cur, "cancel", {"id": job_id, "now": ts, "actor": actor})
            else:
                row = self._one(cur, "cancel_own", {"id": job_id, "now": ts, "owner": owner, "actor": actor})
            if row is None:
                job = self._locate(cur, job_id)
                if owner is not None and job["owner"] != owner:
                    raise JobNotFound(f"job {job_id} does not exist")
                raise InvalidState(f"job {job_id} is {job['status']}; only pending jobs can be cancelled")
            job = self.d.job(row)
            self._event(cur, [_event_row(job_id, ts, "cancelled", actor, job["retry_count"])])
        return job

    @_retry_conflicts
    def retry(self, job_id: int, actor: str) -> dict[str, Any]:
        """Put a failed or cancelled job back to pending now, with its retry count reset (admins)."""
        ts = self.d.time(self.clock())
        with self.db.cursor(write=True, autocommit=True) as cur:
            row = self._one(cur, "retry", {"id": job_id, "now": ts, "actor": actor})
            if row is None:
                job = self._locate(cur, job_id)
                raise InvalidState(
                    f"job {job_id} is {job['status']}; only failed or cancelled jobs can be retried"
                )
            job = self.d.job(row)
            self._event(cur, [_event_row(job_id, ts, "retried", actor, 0)])
        metrics.RETRIED.inc()
        self._notify_arrival()
        return job

    # -- retention ----------------------------------------------------------------------------------

    @_retry_conflicts
    def prune(self, older_than: timedelta, *, batch: int = 1000) -> int:
        """Delete finished jobs (completed, failed, cancelled) that finished more than ``older_than`` ago,
        with their events, in short transactions of ``batch`` jobs. Pending and running jobs are never
        touched. Deleting a job frees its idempotency key. Returns how many jobs were deleted."""
        cutoff = self.d.time(self.clock() - older_than)
        total = 0
        while True:
            with self.db.cursor(write=True, autocommit=True) as cur:
                cur.execute(self._sql["prune"], {"cutoff": cutoff, "batch": batch})
                deleted = cur.rowcount
            total += deleted
            if deleted < batch:
                break
        # The dashboard's per-minute throughput needs only the last hour; keep a day of it.
        with self.db.cursor(write=True, autocommit=True) as cur:
            day_ago = (self.clock() - timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
            cur.execute(self._sql["prune_throughput"], {"minute": day_ago})
        return total


def _count_expired(jobs: list[dict[str, Any]]) -> None:
    if jobs:
        metrics.EXPIRED.inc(len(jobs))
        requeued = sum(1 for job in jobs if job["status"] == "pending")
        metrics.RETRIED.inc(requeued)
        metrics.FAILED.inc(len(jobs) - requeued)


def _event_row(job_id: int, at: Any, event: str, actor: str, attempt: int, error: str | None = None):
    return {"job_id": job_id, "at": at, "event": event, "actor": actor, "attempt": attempt, "error": error}
