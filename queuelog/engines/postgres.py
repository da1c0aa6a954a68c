"""The PostgreSQL engine: ``QueueEngine`` on a PostgreSQL database (contracts in base.py; statements in
postgres_sql.py).

Every transition is one autocommitted statement that writes its own history row, so a report or a claim
is one round trip (README, Performance). A transaction PostgreSQL aborted to break a deadlock changed
nothing and is run again (``retry_aborted``).
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import wraps
from typing import Any, TypeVar

from sqlalchemy import event

from queuelog.db import Database, DatabaseUnavailable
from queuelog.engines import postgres_sql
from queuelog.engines.base import JobRecord, claim_order
from queuelog.engines.job_types import OrmJobTypes
from queuelog.engines.postgres_sql import (
    ANY_HELD,
    BY_KEY,
    CANCEL,
    CLAIM,
    CLAIM_IN_ORDER,
    COMPLETE,
    COMPLETE_MANY,
    EXPIRE,
    FAIL,
    GET,
    HEARTBEAT,
    INSERT,
    INSERT_IDEMPOTENT,
    LEASE_DUE,
    LOCK_LIMITED,
    MINUTE,
    PICK,
    PRUNE,
    PRUNE_THROUGHPUT,
    RETRY,
    bind_items,
    bind_json,
    decode_job,
)
from queuelog.engines.reads import EngineReads, SearchReads
from queuelog.engines.records import Backoff, Claimed, KeyConflict, NewJob, Unchanged
from queuelog.engines.schedules import ScheduleOps

F = TypeVar("F", bound=Callable[..., Any])


def _utc_session(dbapi_connection: Any, _record: Any) -> None:
    """Sessions in UTC: psycopg then answers timestamptz values in ``datetime.UTC`` itself, which the
    decoders take as they are instead of converting every time of every row (README, Performance).
    Connections opened before this engine was made are still decoded right, by conversion."""
    with dbapi_connection.cursor() as cur:
        cur.execute("SET TIME ZONE 'UTC'")
    dbapi_connection.commit()


def retry_aborted(method: F) -> F:
    """Run a write again when PostgreSQL rolled its transaction back to break a deadlock or a
    serialization conflict (rare: the counter triggers write in key order). The aborted transaction
    changed nothing, so running it again is safe; after 5 tries the error goes up."""

    @wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(5):
            try:
                return method(*args, **kwargs)
            except DatabaseUnavailable as exc:
                if not exc.conflict or attempt == 4:
                    raise
                time.sleep(random.random() * 0.01 * 2**attempt)
        raise AssertionError("unreachable")

    return wrapper  # type: ignore[return-value]


# After retry_aborted, which the running jobs' operations use too.
from queuelog.engines.postgres_running import EXPIRE_CANCELLED, SETTLE_AND_LOCK, PostgresRunning  # noqa: E402


def _claim_under_lock(conn: Any, cur: Any, lock: str, statement: str, params: dict[str, Any]) -> list[Any]:
    """Queue, in the caller's pipeline, the claim's transaction: lock the limited types, claim, commit."""
    conn.execute("BEGIN")
    conn.execute(lock, params)
    cur.execute(statement, params)
    conn.execute("COMMIT")
    return cur.fetchall()


class PostgresEngine(EngineReads, SearchReads, OrmJobTypes, ScheduleOps, PostgresRunning):
    """``QueueEngine`` on PostgreSQL (queuelog/engines/base.py states each operation's contract)."""

    name = "postgresql"
    sql = postgres_sql  # statements and decoders, for the shared reads (reads.py)

    # How long a claim trusts the last look at whether any type has a limit or is paused (seconds).
    held_check_seconds = 2.0

    def __init__(self, db: Database):
        self.db = db
        self._held_checked_until = 0.0
        self._any_held = True
        if not event.contains(db.engine, "connect", _utc_session):
            event.listen(db.engine, "connect", _utc_session)

    def _locate(self, cur: Any, job_id: int) -> JobRecord | None:
        row = cur.execute(GET, {"id": job_id}).fetchone()
        return None if row is None else decode_job(row)

    def _guarded(self, statement: str, params: dict[str, Any]) -> JobRecord | Unchanged:
        """Run a guarded, self-logging statement on job ``params["id"]``: the job as changed, or
        Unchanged with the job as it is."""
        with self.db.cursor(write=True, autocommit=True) as cur:
            row = cur.execute(statement, params).fetchone()
            return decode_job(row) if row is not None else Unchanged(self._locate(cur, params["id"]))

    @retry_aborted
    def insert(self, owner: str, jobs: Sequence[NewJob], now: datetime) -> list[tuple[JobRecord, bool]]:
        out: list[tuple[JobRecord, bool]] = []
        # One job is one statement (autocommitted); several need one transaction.
        with self.db.cursor(write=True, autocommit=len(jobs) == 1) as cur:
            for index, new in enumerate(jobs):
                params = {
                    "type": new.type,
                    "payload": bind_json(new.payload_json),
                    "priority": new.priority,
                    "max_retries": new.max_retries,
                    "key": new.idempotency_key,
                    "fingerprint": new.fingerprint,
                    "owner": owner,
                    "available_at": new.available_at,
                    "now": now,
                }
                statement = INSERT if new.idempotency_key is None else INSERT_IDEMPOTENT
                while True:
                    row = cur.execute(statement, params).fetchone()
                    if row is not None:
                        out.append((decode_job(row), True))
                        break
                    # The key names a job. An insert racing ours waited for it to commit, and each
                    # statement reads what is committed: the job is there, unless pruned just now.
                    existing = cur.execute(BY_KEY, {"owner": owner, "key": new.idempotency_key}).fetchone()
                    if existing is not None:
                        job = decode_job(existing[:-1])
                        if existing[-1] != new.fingerprint:
                            raise KeyConflict(index, job)
                        out.append((job, False))
                        break
        return out

    @retry_aborted
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
        params = {
            "now": now,
            "limit": limit,
            "worker": worker,
            "token": secrets.token_hex(16),
            "expires": now + timedelta(seconds=lease_seconds),
            "base": backoff.base,
            "cap": backoff.cap,
        }
        if types:
            params["types"] = list(types)
        lock = LOCK_LIMITED[bool(types)]
        with self.db.cursor(write=True, autocommit=True) as cur:
            conn = cur.connection
            statement = self._claim_statement(cur, bool(types))
            # The claim's transaction. Its first statement settles, at the same time as the claim, the
            # expired leases of jobs whose cancellation was requested (these end cancelled, not retried)
            # and locks the limited types' rows; then the claim, whose snapshot is taken under the lock
            # (docs/flow-control.md). Pipelined, so that the claim stays one round trip; BEGIN and COMMIT
            # by hand, which costs less than psycopg's transaction blocks (an error leaves the transaction
            # to the cursor's rollback). One statement fewer is worth about 0.1 ms of client CPU.
            with conn.pipeline():
                tagged = _claim_under_lock(conn, cur, SETTLE_AND_LOCK[bool(types)], statement, params)
            rows = [row[1:] for row in tagged if row[0] == "claimed"]
            expired = [decode_job(row[1:]) for row in tagged if row[0] == "expired"]
            if len(rows) < limit and any(job.status == "pending" for job in expired):
                # The statement's snapshot cannot see the jobs it just put back: claim once more so that,
                # as on SQLite, the claim that settles a lease may hand the job out again.
                params.update(limit=limit - len(rows), token=secrets.token_hex(16))
                with conn.pipeline():
                    tagged = _claim_under_lock(conn, cur, lock, statement, params)
                rows += [row[1:] for row in tagged if row[0] == "claimed"]
        return Claimed(sorted(map(decode_job, rows), key=claim_order), expired)

    def _claim_statement(self, cur: Any, typed: bool) -> str:
        """The claim statement that carries both ways (postgres_sql.py), or, while no type has a limit or is
        paused, the one in order alone, which costs the server less planning. Whether any has is looked
        at every ``held_check_seconds``: both statements claim right whatever the types are, so a look a
        moment old costs time at most, never a wrong claim."""
        moment = time.monotonic()
        if moment >= self._held_checked_until:
            self._any_held = bool(cur.execute(ANY_HELD).fetchone()[0])
            self._held_checked_until = moment + self.held_check_seconds
        return (CLAIM if self._any_held else CLAIM_IN_ORDER)[typed]

    def claimable(self, *, now: datetime, types: Sequence[str] | None = None) -> bool:
        params: dict[str, Any] = {"now": now, "limit": 1}
        if types:
            params["types"] = list(types)
        with self.db.cursor() as cur:
            if cur.execute(PICK[bool(types)], params).fetchall():
                return True
            return bool(cur.execute(LEASE_DUE, params).fetchall())

    @retry_aborted
    def heartbeat(
        self, job_id: int, worker: str, token: str, *, now: datetime, lease_seconds: float
    ) -> JobRecord | Unchanged:
        expires = now + timedelta(seconds=lease_seconds)
        return self._guarded(
            HEARTBEAT, {"id": job_id, "worker": worker, "token": token, "now": now, "expires": expires}
        )

    @retry_aborted
    def complete(
        self, job_id: int, worker: str, token: str, *, now: datetime, result_json: str | None
    ) -> JobRecord | Unchanged:
        params = {
            "id": job_id,
            "worker": worker,
            "token": token,
            "now": now,
            "result": bind_json(result_json),
        }
        return self._guarded(COMPLETE, params)

    @retry_aborted
    def complete_many(
        self, worker: str, items: Sequence[tuple[int, str, str | None]], *, now: datetime
    ) -> list[JobRecord | Unchanged]:
        with self.db.cursor(write=True, autocommit=True) as cur:
            rows = cur.execute(COMPLETE_MANY, {"worker": worker, "now": now, **bind_items(items)}).fetchall()
            done = {job.id: job for job in map(decode_job, rows)}
            return [done[i] if i in done else Unchanged(self._locate(cur, i)) for i, _, _ in items]

    @retry_aborted
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
        params = {
            "id": job_id,
            "worker": worker,
            "token": token,
            "now": now,
            "retryable": retryable,
            "error": error,
            "base": backoff.base,
            "cap": backoff.cap,
            "jitter": backoff.rand(),
        }
        return self._guarded(FAIL, params)

    @retry_aborted
    def expire(self, *, now: datetime, backoff: Backoff) -> list[JobRecord]:
        with self.db.cursor(write=True, autocommit=True) as cur:
            cur.execute(EXPIRE_CANCELLED, {"now": now})  # first, at the same time: these are not retried
            rows = cur.execute(EXPIRE, {"now": now, "base": backoff.base, "cap": backoff.cap}).fetchall()
        return [decode_job(row) for row in rows]

    @retry_aborted
    def cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        params = {"id": job_id, "now": now, "owner": owner, "actor": actor}
        return self._guarded(CANCEL[owner is not None], params)

    @retry_aborted
    def retry(self, job_id: int, actor: str, *, now: datetime) -> JobRecord | Unchanged:
        return self._guarded(RETRY, {"id": job_id, "now": now, "actor": actor})

    def prune(self, *, finished_before: datetime, batch: int, throughput_before: datetime) -> int:
        total = 0
        while (deleted := self._count(PRUNE, {"cutoff": finished_before, "batch": batch})) == batch:
            total += deleted
        self._run(PRUNE_THROUGHPUT, {"minute": throughput_before.astimezone(UTC).strftime(MINUTE)})
        return total + deleted

    @retry_aborted
    def _count(self, statement: str, params: dict[str, Any]) -> int:
        """One autocommitted statement that answers a count."""
        with self.db.cursor(write=True, autocommit=True) as cur:
            return int(cur.execute(statement, params).fetchone()[0])

    @retry_aborted
    def _run(self, statement: str, params: dict[str, Any]) -> int:
        """One autocommitted statement; how many rows it touched."""
        with self.db.cursor(write=True, autocommit=True) as cur:
            return cur.execute(statement, params).rowcount

    # -- bulk actions (the console; SearchOperations in console.py) ------------------------------------------

    @retry_aborted
    def bulk(self, action: str, job_ids: Sequence[int], actor: str, *, now: datetime) -> list[int]:
        params = {"ids": [int(i) for i in job_ids], "now": now, "actor": actor}
        with self.db.cursor(write=True, autocommit=True) as cur:
            return sorted(row[0] for row in cur.execute(postgres_sql.BULK[action], params).fetchall())
