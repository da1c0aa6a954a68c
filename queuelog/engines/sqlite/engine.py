"""The SQLite engine: ``Engine`` over one SQLite file (contracts in queuelog/engines/engine.py; every
statement in sql.py).

Every write is one ``BEGIN IMMEDIATE`` transaction behind the Database's writer locks
(docs/configuration.md#sqlite-and-postgresql): the guarded UPDATE, the backoff it implies and the history rows are written together, and
no other writer can come in between. Statements run on raw DB-API cursors: no per-call compilation on the
hot path (docs/performance.md#lighter-rows-and-indexes).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from queuelog.db import Database
from queuelog.engines.engine import Engine
from queuelog.engines.records import (
    JOB_FIELDS,
    Backoff,
    BulkAudit,
    Claimed,
    JobRecord,
    KeyConflict,
    NewJob,
    ReportedJob,
    Unchanged,
    claim_order,
    in_workflow,
    reported_job,
)
from queuelog.engines.shared import SharedEngine, first_row
from queuelog.engines.sqlite.sql import (
    AUDIT,
    BULK,
    BULK_DELETE_HISTORY,
    BULK_EVENT,
    BY_KEY,
    CANCEL,
    CANCEL_HELD,
    CLAIM_BY_TYPE,
    CLAIM_IN_ORDER,
    CLAIM_PROBE,
    CLAIM_REQUEST,
    CLAIMABLE,
    COMPLETE,
    COMPLETE_EACH,
    COMPLETE_MANY,
    DIALECT,
    DROP_CLAIM_REQUESTS,
    EACH_FIELDS,
    EVENT,
    EVENTS_ALIKE,
    EXPIRE,
    EXPIRE_CANCELLED,
    FAIL,
    FLOWS,
    GET,
    HEARTBEAT,
    INSERT,
    INSERT_IDEMPOTENT,
    KEEP_CLAIM_REQUEST,
    MINUTE,
    PROGRESS,
    PRUNE,
    PRUNE_DEPENDENCIES,
    PRUNE_HISTORY,
    PRUNE_THROUGHPUT,
    REPORTED,
    REQUEST_CANCEL,
    REQUESTED,
    RETRY,
    SET_AVAILABLE,
    SNOOZE,
    SPEND,
    bind_items,
    bind_time,
    decode_job,
)
from queuelog.engines.workflows import FINISHED, WorkflowEngine

# Columns of a ``jobs`` row as the statements return it (JOB_COLUMNS' order), read before it is decoded.
_ID, _TYPE, _RETRIES = (JOB_FIELDS.index(name) for name in ("id", "type", "retry_count"))


class _Picked(NamedTuple):
    """A claim's rows as its statement returned them, and the expired leases it settled. The writers' lock
    is held for the statements only: the rows are decoded and put in claim order (``_decoded_claim``)
    after the transaction, while other writers go on. (Decoding cannot fail on rows the engines wrote; if
    it did, the claim stands: a claim repeated with its ``request_id`` answers the same jobs.)"""

    rows: list[Any]
    expired: list[JobRecord]


def _decoded_claim(picked: _Picked) -> Claimed:
    """The claim's jobs as records, in claim order."""
    return Claimed(sorted(map(decode_job, picked.rows), key=claim_order), picked.expired)


def _each_answer(
    items: Sequence[tuple[int, str, str | None]], rows: list[Any], refused: dict[int, JobRecord | Unchanged]
) -> list[ReportedJob | Unchanged]:
    """``complete_each``'s answer to each item, from its statement's rows (EACH_FIELDS) and the refusals."""
    key, status, dependents, batch = (
        EACH_FIELDS.index(f) for f in ("id", "status", "dependents", "batch_id")
    )
    done = {
        row[key]: ReportedJob(row[key], row[status], in_workflow(row[dependents], row[batch])) for row in rows
    }
    return [done[i] if i in done else reported_job(refused[i]) for i, _, _ in items]


def _log_alike(cur: Any, at: str, event: str, actor: str, jobs: Sequence[tuple[int, int]]) -> None:
    """Add the history rows of one transition of ``jobs``, each ``(job_id, attempt)``: the rest alike."""
    if len(jobs) == 1:
        cur.execute(EVENT, (jobs[0][0], at, event, actor, jobs[0][1], None))
    elif jobs:
        pairs = ",".join([f"[{job_id:d},{attempt:d}]" for job_id, attempt in jobs])
        cur.execute(EVENTS_ALIKE, {"at": at, "event": event, "actor": actor, "jobs": f"[{pairs}]"})


def _log(cur: Any, events: Sequence[tuple[int, str, str, str, int, str | None]]) -> None:
    """Add history rows: (job_id, at, event, actor, attempt, error)."""
    if len(events) == 1:
        cur.execute(EVENT, events[0])
    elif events:
        cur.executemany(EVENT, events)


class SQLiteEngine(WorkflowEngine, SharedEngine):
    """``Engine`` on SQLite (queuelog/engines/engine.py states each operation's contract). A transition of
    a job in a workflow settles what it implies (workflows.py) in its own transaction."""

    dialect = DIALECT
    flows = FLOWS

    def _after(self, cur: Any, now: datetime, jobs: Sequence[JobRecord]) -> None:
        """Settle the finished jobs of ``jobs`` that are part of a workflow (nothing for any other job)."""
        ended = [job for job in jobs if job.in_workflow and job.status in FINISHED]
        if ended:
            self._settle(cur, now, ended)

    def _locate(self, cur: Any, job_id: int) -> JobRecord | None:
        row = cur.execute(GET, {"id": job_id}).fetchone()
        return None if row is None else decode_job(row)

    def _guarded(self, cur: Any, statement: str, params: dict[str, Any]) -> JobRecord | Unchanged:
        """Run a guarded UPDATE of job ``params["id"]``: the job as changed, or Unchanged with it as it is."""
        row = first_row(cur.execute(statement, params))
        return decode_job(row) if row is not None else Unchanged(self._locate(cur, params["id"]))

    def _reported(self, cur: Any, job_id: int, worker: str, token: str) -> JobRecord | Unchanged:
        """A report (complete, fail) its guard refused: the job as it is, as if the report succeeded when
        it repeats the one that ended the attempt (docs/operations.md#outages), else Unchanged."""
        row = cur.execute(REPORTED, {"id": job_id, "worker": worker, "token": token}).fetchone()
        if row is None:
            return Unchanged(None)
        job = decode_job(row[:-1])
        return job if row[-1] else Unchanged(job)

    def insert(
        self, owner: str, jobs: Sequence[NewJob], now: datetime, *, scope: str | None = None
    ) -> list[tuple[JobRecord, bool]]:
        if any(new.depends_on or new.after for new in jobs):
            with self.db.cursor(write=True) as cur:
                return self._insert_jobs(cur, owner, jobs, now, scope=scope)
        ts = bind_time(now)
        out: list[tuple[JobRecord, bool]] = []
        with self.db.cursor(write=True) as cur:
            for index, new in enumerate(jobs):
                params = {
                    "type": new.type,
                    "payload": new.payload_json,
                    "priority": new.priority,
                    "max_retries": new.max_retries,
                    "key": new.idempotency_key,
                    "fingerprint": new.fingerprint,
                    "owner": owner,
                    "available_at": bind_time(new.available_at),
                    "now": ts,
                }
                statement = INSERT if new.idempotency_key is None else INSERT_IDEMPOTENT
                row = first_row(cur.execute(statement, params))
                if row is not None:
                    out.append((decode_job(row), True))
                    continue
                # The key names a job already (the writer lock keeps it there): a replay, or a conflict.
                existing = cur.execute(BY_KEY, {"owner": owner, "key": new.idempotency_key}).fetchone()
                job = decode_job(existing[:-1])
                if existing[-1] != new.fingerprint:
                    raise KeyConflict(index, job)
                out.append((job, False))
            _log_alike(cur, ts, "enqueued", owner, [(job.id, 0) for job, created in out if created])
        return out

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
        with self.db.cursor(write=True) as cur:
            picked = self._claim(cur, worker, now, lease_seconds, limit, types, backoff, request_id)
        return _decoded_claim(picked)

    def _claim(
        self,
        cur: Any,
        worker: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        types: Sequence[str] | None,
        backoff: Backoff,
        request_id: str | None = None,
    ) -> _Picked:
        """The claim, in the caller's transaction; ``_decoded_claim`` decodes its rows after it."""
        ts = bind_time(now)
        params = {
            "now": ts,
            "limit": limit,
            "worker": worker,
            "token": secrets.token_hex(16),
            "expires": bind_time(now + timedelta(seconds=lease_seconds)),
        }
        if types:
            params["types"] = json.dumps(list(types))
        if request_id is not None:  # the writers' lock: no other claim with this id runs meanwhile
            asked = {"worker": worker, "request_id": request_id, "now": ts}
            earlier = cur.execute(CLAIM_REQUEST, asked).fetchone()
            if earlier is not None:
                return _Picked(cur.execute(REQUESTED, {**asked, "token": earlier[0]}).fetchall(), [])
        due, limited, waiting = cur.execute(CLAIM_PROBE, {"now": ts}).fetchone()
        # First: a job settled here may be claimed at once.
        expired = self._expire(cur, now, backoff) if due else []
        # Down the claim index while it has nothing to pass over; else type by type (sql.py).
        if types or waiting:
            statement = CLAIM_BY_TYPE[bool(types)]
        else:
            statement = CLAIM_IN_ORDER[limited]
        rows = cur.execute(statement, params).fetchall()
        if limited and rows:
            cur.execute(SPEND, {"now": ts, "taken": json.dumps([row[_TYPE] for row in rows])})
        _log_alike(cur, ts, "claimed", worker, [(row[_ID], row[_RETRIES] + 1) for row in rows])
        if request_id is not None and rows:
            cur.execute(DROP_CLAIM_REQUESTS, {"now": ts})
            cur.execute(KEEP_CLAIM_REQUEST, {**params, "request_id": request_id})
        return _Picked(rows, expired)

    def claimable(self, *, now: datetime, types: Sequence[str] | None = None) -> bool:
        params = {"now": bind_time(now), "limit": 1}
        if types:
            params["types"] = json.dumps(list(types))
        with self.db.cursor() as cur:
            return bool(cur.execute(CLAIMABLE[bool(types)], params).fetchone()[0])

    def heartbeat(
        self, job_id: int, worker: str, token: str, *, now: datetime, lease_seconds: float
    ) -> JobRecord | Unchanged:
        expires = bind_time(now + timedelta(seconds=lease_seconds))
        params = {"id": job_id, "worker": worker, "token": token, "now": bind_time(now), "expires": expires}
        with self.db.cursor(write=True) as cur:
            return self._guarded(cur, HEARTBEAT, params)

    def complete(
        self, job_id: int, worker: str, token: str, *, now: datetime, result_json: str | None
    ) -> JobRecord | Unchanged:
        with self.db.cursor(write=True) as cur:
            return self._complete(cur, job_id, worker, token, now, result_json)

    def _complete(
        self, cur: Any, job_id: int, worker: str, token: str, now: datetime, result_json: str | None
    ) -> JobRecord | Unchanged:
        """The completion, in the caller's transaction."""
        ts = bind_time(now)
        params = {"id": job_id, "worker": worker, "token": token, "now": ts, "result": result_json}
        row = first_row(cur.execute(COMPLETE, params))
        if row is None:
            return self._reported(cur, job_id, worker, token)
        job = decode_job(row)
        _log(cur, [(job_id, ts, "completed", worker, job.retry_count + 1, None)])
        if job.in_workflow:
            self._settle(cur, now, [job])
        return job

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
        with self.db.cursor(write=True) as cur:
            job = self._complete(cur, job_id, worker, token, now, result_json)
            if isinstance(job, Unchanged):
                return job, Claimed([], [])
            picked = self._claim(cur, worker, now, lease_seconds, limit, types, backoff, request_id)
        return job, _decoded_claim(picked)

    def complete_many(
        self, worker: str, items: Sequence[tuple[int, str, str | None]], *, now: datetime
    ) -> list[JobRecord | Unchanged]:
        with self.db.cursor(write=True) as cur:
            rows, refused = self._complete_items(cur, COMPLETE_MANY, JOB_FIELDS, worker, items, now)
        done = {job.id: job for job in map(decode_job, rows)}
        return [done[i] if i in done else refused[i] for i, _, _ in items]

    def complete_each(
        self, worker: str, items: Sequence[tuple[int, str, str | None]], *, now: datetime
    ) -> list[ReportedJob | Unchanged]:
        with self.db.cursor(write=True) as cur:
            rows, refused = self._complete_items(cur, COMPLETE_EACH, EACH_FIELDS, worker, items, now)
        return _each_answer(items, rows, refused)

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
        with self.db.cursor(write=True) as cur:
            rows, refused = self._complete_items(cur, COMPLETE_EACH, EACH_FIELDS, worker, items, now)
            picked = self._claim(cur, worker, now, lease_seconds, limit, types, backoff, request_id)
        return _each_answer(items, rows, refused), _decoded_claim(picked)

    def _complete_items(
        self,
        cur: Any,
        statement: str,
        fields: Sequence[str],
        worker: str,
        items: Sequence[tuple[int, str, str | None]],
        now: datetime,
    ) -> tuple[list[Any], dict[int, JobRecord | Unchanged]]:
        """A batch completion, in the caller's transaction: the rows ``statement`` returned (``fields`` of
        each job completed) and the answer to each item it refused (``_reported``). The writers' lock is
        held for the statements: the rows are decoded after the transaction, but for those of jobs in a
        workflow, which settle in it."""
        at = fields.index
        key, retries, dependents, batch = at("id"), at("retry_count"), at("dependents"), at("batch_id")
        ts = bind_time(now)
        params = {"worker": worker, "now": ts, **bind_items(items)}
        rows = cur.execute(statement, params).fetchall()
        _log_alike(cur, ts, "completed", worker, [(row[key], row[retries] + 1) for row in rows])
        flows = [row for row in rows if in_workflow(row[dependents], row[batch])]
        if flows:  # the whole rows, or each job read again (a compact statement's)
            whole = fields is JOB_FIELDS
            jobs = [decode_job(row) if whole else self._locate(cur, row[key]) for row in flows]
            self._after(cur, now, [job for job in jobs if job is not None])
        completed = {row[key] for row in rows}
        refused = {i: self._reported(cur, i, worker, token) for i, token, _ in items if i not in completed}
        return rows, refused

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
        with self.db.cursor(write=True) as cur:
            return self._fail(cur, job_id, worker, token, now, error, retryable, backoff)

    def _fail(
        self,
        cur: Any,
        job_id: int,
        worker: str,
        token: str,
        now: datetime,
        error: str,
        retryable: bool,
        backoff: Backoff,
    ) -> JobRecord | Unchanged:
        """The failure's report, in the caller's transaction."""
        ts = bind_time(now)
        params = {"id": job_id, "worker": worker, "token": token, "now": ts, "retryable": int(retryable)}
        row = first_row(cur.execute(FAIL, {**params, "error": error}))
        if row is None:
            return self._reported(cur, job_id, worker, token)
        job = self._push_back(cur, decode_job(row), now, backoff)
        if job.status == "pending":  # retry_count already counts the attempt that failed
            _log(cur, [(job_id, ts, "retry_scheduled", worker, job.retry_count, error)])
        else:  # failed, or cancelled when that was requested (docs/running-jobs.md)
            _log(cur, [(job_id, ts, job.status, worker, job.retry_count + 1, error)])
            self._after(cur, now, [job])
        return job

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
        with self.db.cursor(write=True) as cur:
            job = self._fail(cur, job_id, worker, token, now, error, retryable, backoff)
            if isinstance(job, Unchanged):
                return job, Claimed([], [])
            picked = self._claim(cur, worker, now, lease_seconds, limit, types, backoff, request_id)
        return job, _decoded_claim(picked)

    def expire(self, *, now: datetime, backoff: Backoff) -> list[JobRecord]:
        with self.db.cursor(write=True) as cur:
            return self._expire(cur, now, backoff)

    def _expire(self, cur: Any, now: datetime, backoff: Backoff) -> list[JobRecord]:
        ts = bind_time(now)
        cancelled = self._expire_cancelled(cur, ts)  # first: these end cancelled, not retried
        rows = cur.execute(EXPIRE, {"now": ts}).fetchall()
        jobs = [self._push_back(cur, decode_job(row), now, backoff) for row in rows]
        events = []
        for job in jobs:
            attempt = job.retry_count if job.status == "pending" else job.retry_count + 1
            held = f"lease expired (held by {job.worker_id})"
            events.append((job.id, ts, "lease_expired", "system", attempt, held))
        _log(cur, events)
        self._after(cur, now, [*cancelled, *jobs])
        return jobs

    def _push_back(self, cur: Any, job: JobRecord, now: datetime, backoff: Backoff) -> JobRecord:
        """Move a job that just went back to pending into the future by its backoff. The transaction holds
        the write lock, so nobody can claim it in between."""
        delay = backoff.seconds(job.retry_count) if job.status == "pending" else 0
        if delay <= 0:
            return job
        available = now + timedelta(seconds=delay)
        cur.execute(SET_AVAILABLE, {"id": job.id, "available_at": bind_time(available)})
        return job._replace(available_at=available)

    def cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        ts = bind_time(now)
        with self.db.cursor(write=True) as cur:
            job = self._guarded(cur, CANCEL[owner is not None], {"id": job_id, "now": ts, "owner": owner})
            if not isinstance(job, Unchanged):
                _log(cur, [(job_id, ts, "cancelled", actor, job.retry_count, None)])
                self._after(cur, now, [job])
        return job

    def retry(self, job_id: int, actor: str, *, now: datetime) -> JobRecord | Unchanged:
        ts = bind_time(now)
        with self.db.cursor(write=True) as cur:
            job = self._guarded(cur, RETRY, {"id": job_id, "now": ts})
            if not isinstance(job, Unchanged):
                _log(cur, [(job_id, ts, "retried", actor, 0, None)])
                if job.in_workflow or job.depends_on is not None:
                    self._settle(cur, now, [], reopened=[job])
                    job = (
                        self._locate(cur, job_id) or job
                    )  # released at once when nothing is left to wait for
        return job

    def prune(self, *, finished_before: datetime, batch: int, throughput_before: datetime) -> int:
        cutoff = bind_time(finished_before)
        total = 0
        while True:
            with self.db.cursor(write=True) as cur:
                cur.execute(PRUNE_HISTORY, {"cutoff": cutoff, "batch": batch})
                cur.execute(PRUNE_DEPENDENCIES, {"cutoff": cutoff, "batch": batch})
                deleted = cur.execute(PRUNE, {"cutoff": cutoff, "batch": batch}).rowcount
            total += deleted
            if deleted < batch:
                break
        with self.db.cursor(write=True) as cur:
            cur.execute(PRUNE_THROUGHPUT, {"minute": throughput_before.astimezone(UTC).strftime(MINUTE)})
        return total

    # -- running jobs (docs/running-jobs.md) -------------------------------------------------------------

    def request_cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        ts = bind_time(now)
        params = {"id": job_id, "now": ts, "actor": actor, "owner": owner}
        with self.db.cursor(write=True) as cur:
            job = self._guarded(cur, REQUEST_CANCEL[owner is not None], params)
            if not isinstance(job, Unchanged):
                cur.execute(EVENT, (job_id, ts, "cancel_requested", actor, job.retry_count + 1, None))
        return job

    def cancel_held(
        self, job_id: int, worker: str, token: str, *, now: datetime, error: str | None = None
    ) -> JobRecord | Unchanged:
        ts = bind_time(now)
        params = {"id": job_id, "worker": worker, "token": token, "now": ts, "error": error}
        with self.db.cursor(write=True) as cur:
            job = self._guarded(cur, CANCEL_HELD, params)
            if not isinstance(job, Unchanged):
                cur.execute(EVENT, (job_id, ts, "cancelled", worker, job.retry_count + 1, error))
                self._after(cur, now, [job])
        return job

    def _expire_cancelled(self, cur: Any, ts: str) -> list[JobRecord]:
        """End cancelled, by ``system``, the running jobs whose cancellation was requested and whose lease
        expired before ``ts``: part of settling expired leases, in its transaction."""
        jobs = [decode_job(row) for row in cur.execute(EXPIRE_CANCELLED, {"now": ts}).fetchall()]
        if jobs:
            cur.executemany(EVENT, [(j.id, ts, "cancelled", "system", j.retry_count + 1, None) for j in jobs])
        return jobs

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
        params = {
            "id": job_id,
            "worker": worker,
            "token": token,
            "now": bind_time(now),
            "expires": bind_time(now + timedelta(seconds=lease_seconds)),
            "percent": percent,
            "message": message,
        }
        with self.db.cursor(write=True) as cur:
            return self._guarded(cur, PROGRESS, params)

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
        ts = bind_time(now)
        params = {
            "id": job_id,
            "worker": worker,
            "token": token,
            "now": ts,
            "available_at": bind_time(now + timedelta(seconds=delay_seconds)),
            "max_snoozes": max_snoozes,
        }
        with self.db.cursor(write=True) as cur:
            job = self._guarded(cur, SNOOZE, params)
            if not isinstance(job, Unchanged):
                event = "cancelled" if job.status == "cancelled" else "snoozed"
                cur.execute(EVENT, (job_id, ts, event, worker, job.retry_count + 1, None))
                self._after(cur, now, [job])
        return job

    # -- bulk actions (the console) ----------------------------------------------------------------------

    def bulk(
        self,
        action: str,
        job_ids: Sequence[int],
        actor: str,
        *,
        now: datetime,
        audit: BulkAudit | None = None,
    ) -> list[int]:
        ts = bind_time(now)
        ids = json.dumps([int(i) for i in job_ids])
        with self.db.cursor(write=True) as cur:
            rows = cur.execute(BULK[action], {"ids": ids, "now": ts}).fetchall()
            event = BULK_EVENT.get(action)
            if event:
                jobs = [decode_job(row) for row in rows]
                # A retry starts again from attempt 0; a cancellation belongs to the attempts made.
                _log(
                    cur,
                    [(j.id, ts, event, actor, 0 if action == "retry" else j.retry_count, None) for j in jobs],
                )
                if action == "retry":
                    again = [j for j in jobs if j.in_workflow or j.depends_on is not None]
                    if again:
                        self._settle(cur, now, [], reopened=again)
                else:
                    self._after(cur, now, jobs)
            elif rows:
                cur.execute(BULK_DELETE_HISTORY, {"ids": json.dumps([row[0] for row in rows])})
            if audit is not None:
                cur.execute(AUDIT, audit.row(action, actor, len(rows), ts))
        return sorted(row[0] for row in rows)

    # -- a schedule's fired job (shared.py fires the slot) --------------------------------------------------

    def _insert_fired(self, cur: Any, owner: str, new: NewJob, now: datetime) -> JobRecord:
        ts = bind_time(now)
        params = {
            "type": new.type,
            "payload": new.payload_json,
            "priority": new.priority,
            "max_retries": new.max_retries,
            "key": None,
            "fingerprint": None,
            "owner": owner,
            "available_at": bind_time(new.available_at),
            "now": ts,
        }
        job = decode_job(first_row(cur.execute(INSERT, params)))
        _log(cur, [(job.id, ts, "enqueued", owner, 0, None)])
        return job


def make_engine(db: Database) -> Engine:
    """The SQLite engine for ``db``, typed as the protocol: mypy checks here that ``SQLiteEngine`` has every
    method of ``Engine`` with its signature."""
    return SQLiteEngine(db)
