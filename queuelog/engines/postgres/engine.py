"""The PostgreSQL engine: ``Engine`` on a PostgreSQL database (contracts in queuelog/engines/engine.py;
every statement in sql.py).

Every transition is one autocommitted statement that writes its own history row, so a report or a claim
is one round trip (docs/performance.md#counts-without-counting). A transaction PostgreSQL aborted to break a deadlock changed
nothing and is run again (``retry_aborted``).
"""

from __future__ import annotations

import logging
import random
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from psycopg.errors import UniqueViolation
from sqlalchemy import event

from queuelog.db import Database, DatabaseUnavailable
from queuelog.engines.engine import Engine
from queuelog.engines.postgres.sql import (
    ANY_HELD,
    AUDIT,
    BULK,
    BY_KEY,
    CANCEL,
    CANCEL_HELD,
    CLAIM,
    CLAIM_IN_ORDER,
    CLAIM_REQUEST,
    CLAIMABLE,
    COMPLETE,
    COMPLETE_EACH,
    COMPLETE_EACH_THEN_CLAIM,
    COMPLETE_MANY,
    COMPLETE_THEN_CLAIM,
    DIALECT,
    DROP_CLAIM_REQUESTS,
    EXPIRE,
    EXPIRE_CANCELLED,
    EXPIRE_CANCELLED_FLOW,
    EXPIRE_FLOW,
    FAIL,
    FAIL_THEN_CLAIM,
    FLOW_LEASE_DUE,
    FLOWS,
    GET,
    HEARTBEAT,
    INSERT,
    INSERT_IDEMPOTENT,
    KEEP_CLAIM_REQUEST,
    LOCK_LIMITED,
    MINUTE,
    PROGRESS,
    PRUNE,
    PRUNE_THROUGHPUT,
    REPORTED,
    REQUEST_CANCEL,
    REQUESTED,
    RETRY,
    SETTLE_AND_LOCK,
    SNOOZE,
    bind_items,
    bind_json,
    decode_job,
    each_reported,
    plain,
)
from queuelog.engines.records import (
    Backoff,
    BatchRecord,
    BulkAudit,
    Claimed,
    JobRecord,
    KeyConflict,
    NewBatch,
    NewJob,
    ReportedJob,
    Unchanged,
    claim_order,
    reported_job,
)
from queuelog.engines.shared import SharedEngine
from queuelog.engines.workflows import FINISHED, WorkflowEngine

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


def _utc_session(dbapi_connection: Any, _record: Any) -> None:
    """Sessions in UTC: psycopg then answers timestamptz values in ``datetime.UTC`` itself, which the
    decoders take as they are instead of converting every time of every row (docs/performance.md#writes-one-transaction-one-round-trip).
    Connections opened before this engine was made are still decoded right, by conversion."""
    with dbapi_connection.cursor() as cur:
        cur.execute("SET TIME ZONE 'UTC'")
    dbapi_connection.commit()


def retry_aborted(method: Callable[P, R]) -> Callable[P, R]:
    """Run a write again when PostgreSQL rolled its transaction back to break a deadlock or a
    serialization conflict (rare: the counter triggers write in key order). The aborted transaction
    changed nothing, so running it again is safe; after 5 tries the error goes up. Each retry is logged
    (a warning: one now and then is PostgreSQL at work, many say that something else takes the same
    locks in another order)."""

    @wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        for attempt in range(5):
            try:
                return method(*args, **kwargs)
            except DatabaseUnavailable as exc:
                if not exc.conflict or attempt == 4:
                    raise
                reason = str(exc).partition("\n")[0]  # "deadlock detected"; the details name processes
                log.warning("%s: PostgreSQL rolled it back (%s); running it again", method.__name__, reason)
                time.sleep(random.random() * 0.01 * 2**attempt)
        raise AssertionError("unreachable")

    return wrapper


KEEP = (DROP_CLAIM_REQUESTS, KEEP_CLAIM_REQUEST)  # after a claim with a request id, in its transaction


def _claim_under_lock(
    conn: Any, cur: Any, lock: str, statement: str, params: dict[str, Any], keep: Sequence[str] = ()
) -> tuple[list[Any], bool]:
    """Queue, in the caller's pipeline, the claim's transaction: lock the limited types, claim, (keep its
    request id), look whether a job in a workflow has an expired lease (those are settled apart:
    docs/workflows.md), commit."""
    conn.execute("BEGIN")
    conn.execute(lock, params)
    cur.execute(statement, params)
    rows = cur.fetchall() if keep else None  # the kept request names the claimed jobs' token
    for step in keep:
        conn.execute(step, params)
    due = conn.execute(FLOW_LEASE_DUE, params)
    conn.execute("COMMIT")
    return (rows if rows is not None else cur.fetchall()), bool(due.fetchone()[0])


_PLAIN = {
    statement: plain(statement)
    for statement in (COMPLETE, FAIL, *CANCEL.values(), RETRY, CANCEL_HELD, SNOOZE)
}
_PLAIN_COMPLETE_MANY = plain(COMPLETE_MANY)
_PLAIN_COMPLETE_EACH = plain(COMPLETE_EACH)


def _made_alone(
    alone: Callable[[], JobRecord | Unchanged], claim: Callable[[], Claimed]
) -> tuple[JobRecord | Unchanged, Claimed]:
    """A report made ``alone``, then its ``claim`` when it was not refused: a refused report claims
    nothing."""
    outcome = alone()
    return outcome, Claimed([], []) if isinstance(outcome, Unchanged) else claim()


def _claim_params(
    worker: str,
    now: datetime,
    lease_seconds: float,
    limit: int,
    types: Sequence[str] | None,
    backoff: Backoff,
) -> dict[str, Any]:
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
    return params


def _fail_params(
    job_id: int, worker: str, token: str, now: datetime, error: str, retryable: bool, backoff: Backoff
) -> dict[str, Any]:
    return {
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


class PostgresEngine(WorkflowEngine, SharedEngine):
    """``Engine`` on PostgreSQL (queuelog/engines/engine.py states each operation's contract). A job in a
    workflow changes state in a transaction that also settles what its transition implies (workflows.py);
    any other job's transition stays one autocommitted statement."""

    dialect = DIALECT
    flows = FLOWS

    # How long a claim trusts the last look at whether any type has a limit or is paused (seconds).
    held_check_seconds = 2.0

    def __init__(self, db: Database):
        super().__init__(db)
        self._held_checked_until = 0.0
        self._any_held = True
        if not event.contains(db.engine, "connect", _utc_session):
            event.listen(db.engine, "connect", _utc_session)

    def _locate(self, cur: Any, job_id: int) -> JobRecord | None:
        row = cur.execute(GET, {"id": job_id}).fetchone()
        return None if row is None else decode_job(row)

    def _reported(self, cur: Any, job_id: int, worker: str, token: str) -> JobRecord | Unchanged:
        """A report (complete, fail) its guard refused: the job as it is, as if the report succeeded when
        it repeats the one that ended the attempt (docs/operations.md#outages), else Unchanged."""
        row = cur.execute(REPORTED, {"id": job_id, "worker": worker, "token": token}).fetchone()
        if row is None:
            return Unchanged(None)
        job = decode_job(row[:-1])
        return job if row[-1] else Unchanged(job)

    def _report(self, statement: str, params: dict[str, Any]) -> JobRecord | Unchanged:
        """``_guarded`` for a report (complete, fail): a repeat of the report that ended the attempt
        answers the job as it is."""
        return self._guarded(statement, params, report=True)

    def _refused(self, cur: Any, params: dict[str, Any], report: bool) -> JobRecord | Unchanged:
        if report:
            return self._reported(cur, params["id"], params["worker"], params["token"])
        return Unchanged(self._locate(cur, params["id"]))

    def _guarded(
        self, statement: str, params: dict[str, Any], *, report: bool = False
    ) -> JobRecord | Unchanged:
        """Run a guarded, self-logging statement on job ``params["id"]``: the job as changed, or
        Unchanged with the job as it is (for a ``report``, see ``_reported``). A transition (one of
        ``_PLAIN``) runs as it is for a job outside every workflow; for a job in one, in a transaction
        that settles what it implies."""
        quick = _PLAIN.get(statement)
        with self.db.cursor(write=True, autocommit=True) as cur:
            row = cur.execute(quick or statement, params).fetchone()
            if row is not None:
                return decode_job(row)
            job = self._locate(cur, params["id"])
            if quick is None or job is None or not (job.in_workflow or job.depends_on is not None):
                return self._refused(cur, params, report) if report else Unchanged(job)
        with self.db.cursor(write=True) as cur:
            row = cur.execute(statement, params).fetchone()
            if row is None:
                return self._refused(cur, params, report)
            job = decode_job(row)
            if statement is RETRY:
                self._settle(cur, params["now"], [], reopened=[job])
                return self._locate(cur, job.id) or job
            if job.status in FINISHED:
                self._settle(cur, params["now"], [job])
            return job

    @retry_aborted
    def insert(
        self, owner: str, jobs: Sequence[NewJob], now: datetime, *, scope: str | None = None
    ) -> list[tuple[JobRecord, bool]]:
        if len(jobs) != 1 or jobs[0].depends_on or jobs[0].after:
            # Several jobs, or one that waits: one transaction of a constant number of statements
            # (workflows.py, ``_insert_jobs``), plain jobs as much as jobs that wait.
            with self.db.cursor(write=True) as cur:
                return self._insert_jobs(cur, owner, jobs, now, scope=scope)
        # One plain job is one statement, autocommitted.
        [new] = jobs
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
        with self.db.cursor(write=True, autocommit=True) as cur:
            while True:
                row = cur.execute(statement, params).fetchone()
                if row is not None:
                    return [(decode_job(row), True)]
                # The key names a job. An insert racing ours waited for it to commit, and each
                # statement reads what is committed: the job is there, unless pruned just now.
                existing = cur.execute(BY_KEY, {"owner": owner, "key": new.idempotency_key}).fetchone()
                if existing is not None:
                    job = decode_job(existing[:-1])
                    if existing[-1] != new.fingerprint:
                        raise KeyConflict(0, job)
                    return [(job, False)]

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
        if request_id is not None:
            earlier = self._requested(worker, request_id, now)
            if earlier is not None:
                return earlier
            try:
                return self._claim(worker, now, lease_seconds, limit, types, backoff, request_id)
            except UniqueViolation:  # the same request at the same moment: the one that won answers
                return self._requested(worker, request_id, now) or Claimed([], [])
        return self._claim(worker, now, lease_seconds, limit, types, backoff, None)

    def _requested(self, worker: str, request_id: str, now: datetime) -> Claimed | None:
        """The jobs leased by ``worker``'s earlier claim with ``request_id``, while its lease lasts."""
        asked = {"worker": worker, "request_id": request_id, "now": now}
        with self.db.cursor() as cur:
            earlier = cur.execute(CLAIM_REQUEST, asked).fetchone()
            if earlier is None:
                return None
            rows = cur.execute(REQUESTED, {**asked, "token": earlier[0]}).fetchall()
        return Claimed(sorted(map(decode_job, rows), key=claim_order), [])

    def _claim(
        self,
        worker: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        types: Sequence[str] | None,
        backoff: Backoff,
        request_id: str | None,
    ) -> Claimed:
        params = _claim_params(worker, now, lease_seconds, limit, types, backoff)
        keep = KEEP if request_id is not None else ()
        if keep:
            params["request_id"] = request_id
        statement = self._claim_statement(bool(types))
        tagged, due = self._transact_claim(SETTLE_AND_LOCK[bool(types)], statement, params, keep)
        return self._claimed(tagged, statement, params, due=due, keep=keep)

    @retry_aborted
    def _transact_claim(
        self, lock: str, statement: str, params: dict[str, Any], keep: Sequence[str]
    ) -> tuple[list[Any], bool]:
        """One claim transaction (``_claim_under_lock``), retried alone when aborted: it changed nothing
        then, while what came before it (a report, a first claim) is committed and never run twice.

        Its first statement (``lock``) settles, at the same time as the claim, the expired leases of jobs
        whose cancellation was requested (these end cancelled, not retried) and locks the limited types'
        rows; then the claim, whose snapshot is taken under the lock (docs/flow-control.md). Pipelined, so
        that the claim stays one round trip; BEGIN and COMMIT by hand, which costs less than psycopg's
        transaction blocks (an error leaves the transaction to the cursor's rollback). One statement fewer
        is worth about 0.1 ms of client CPU."""
        with self.db.cursor(write=True, autocommit=True) as cur:
            conn = cur.connection
            with conn.pipeline():
                tagged, due = _claim_under_lock(conn, cur, lock, statement, params, keep)
        return tagged, due

    def _claimed(
        self,
        tagged: list[Any],
        statement: str,
        params: dict[str, Any],
        again: bool = False,
        *,
        due: bool = False,
        keep: Sequence[str] = (),
    ) -> Claimed:
        """The claim's outcome from its committed statement's rows (``tagged``); ``again`` when the
        statement made a job claimable that its snapshot could not see (a failure's retry); ``due`` when
        a job in a workflow has an expired lease (settled with what its end implies, in a transaction of
        its own: docs/workflows.md)."""
        limit = params["limit"]
        rows = [row[1:] for row in tagged if row[0] == "claimed"]
        expired = [decode_job(row[1:]) for row in tagged if row[0] == "expired"]
        if due:
            expired += self._expire_flows(params["now"], Backoff(params["base"], params["cap"]))
        if len(rows) < limit and (again or any(job.status == "pending" for job in expired)):
            # The statement's snapshot cannot see the jobs it just put back: claim once more so that,
            # as on SQLite, the claim that settles a lease may hand the job out again.
            params.update(limit=limit - len(rows))
            if not keep:  # a request id's jobs share one token (its kept request names it)
                params.update(token=secrets.token_hex(16))
            lock = LOCK_LIMITED["types" in params]
            # The request is kept once: by the first transaction when it leased a job (the same token
            # names these too), else by this one.
            tagged, _ = self._transact_claim(lock, statement, params, () if rows else keep)
            rows += [row[1:] for row in tagged if row[0] == "claimed"]
        return Claimed(sorted(map(decode_job, rows), key=claim_order), expired)

    def _report_and_claim(
        self,
        report: dict[str, str],
        params: dict[str, Any],
        alone: Callable[[], JobRecord | Unchanged],
        request_id: str | None,
    ) -> tuple[JobRecord | Unchanged, Claimed]:
        """A guarded, self-logging report and the claim in one statement (``report`` maps each claim
        statement to it, sql.py), in the claim's transaction: one round trip, as a claim alone. The
        statement reports only on a job outside every workflow; any other report (a job in a workflow,
        whose transition settles its dependents and batch; a repeated report; a refused one) is made
        ``alone``, then, when it was not refused, the claim follows in a transaction of its own. A report
        sent again with its claim's ``request_id`` is made alone (it answers as the first did) and answers
        the jobs the first claim leased."""
        if request_id is not None:
            earlier = self._requested(params["worker"], request_id, params["now"])
            if earlier is not None:
                return _made_alone(alone, lambda: earlier)
            params["request_id"] = request_id
        try:
            return self._reported_and_claimed(report, params, alone, request_id)
        except UniqueViolation:  # the same request at the same moment: the one that won answers
            assert request_id is not None  # only a kept request can collide
            return _made_alone(
                alone, lambda: self._requested(params["worker"], request_id, params["now"]) or Claimed([], [])
            )

    def _reported_and_claimed(
        self,
        report: dict[str, str],
        params: dict[str, Any],
        alone: Callable[[], JobRecord | Unchanged],
        request_id: str | None,
    ) -> tuple[JobRecord | Unchanged, Claimed]:
        keep = KEEP if request_id is not None else ()
        statement, tagged, due = self._combined(report, params, keep)
        done = [row[1:] for row in tagged if row[0] == "reported"]
        if done:
            job = decode_job(done[0])
            claimed = [row for row in tagged if row[0] != "reported"]
            # What the statement's snapshot cannot see, a claim after it can, as on SQLite: a failure's
            # retry due at once, and the slot the report freed under a type's concurrency limit (while
            # any type has a limit or is paused, ``_claim_statement``).
            again = self._any_held or (job.status == "pending" and job.available_at <= params["now"])
            return job, self._claimed(claimed, statement, params, again, due=due, keep=keep)
        return _made_alone(alone, lambda: self._claim_after(params, request_id))

    def _claim_after(self, params: dict[str, Any], request_id: str | None) -> Claimed:
        """The claim of a report made alone, as ``claim`` with the report's claim parameters."""
        expires = params["expires"] - params["now"]
        return self.claim(
            params["worker"],
            now=params["now"],
            lease_seconds=expires.total_seconds(),
            limit=params["limit"],
            types=params.get("types"),
            backoff=Backoff(params["base"], params["cap"]),
            request_id=request_id,
        )

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
        params = _claim_params(worker, now, lease_seconds, limit, types, backoff)
        params.update(id=job_id, held=token, result=bind_json(result_json))

        def alone() -> JobRecord | Unchanged:
            return self.complete(job_id, worker, token, now=now, result_json=result_json)

        return self._report_and_claim(COMPLETE_THEN_CLAIM, params, alone, request_id)

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
        params = _claim_params(worker, now, lease_seconds, limit, types, backoff)
        params.update(_fail_params(job_id, worker, token, now, error, retryable, backoff))
        params.update(held=token, token=secrets.token_hex(16))  # the report's token, the new lease's

        def alone() -> JobRecord | Unchanged:
            return self.fail(
                job_id, worker, token, now=now, error=error, retryable=retryable, backoff=backoff
            )

        return self._report_and_claim(FAIL_THEN_CLAIM, params, alone, request_id)

    def _claim_statement(self, typed: bool) -> str:
        """The claim statement that carries both ways (sql.py), or, while no type has a limit or is
        paused, the one in order alone, which costs the server less planning. Whether any has is looked
        at every ``held_check_seconds``: both statements claim right whatever the types are, so a look a
        moment old costs time at most, never a wrong claim."""
        moment = time.monotonic()
        if moment >= self._held_checked_until:
            with self.db.cursor(autocommit=True) as cur:
                self._any_held = bool(cur.execute(ANY_HELD).fetchone()[0])
            self._held_checked_until = moment + self.held_check_seconds
        return (CLAIM if self._any_held else CLAIM_IN_ORDER)[typed]

    def claimable(self, *, now: datetime, types: Sequence[str] | None = None) -> bool:
        params: dict[str, Any] = {"now": now, "limit": 1}
        if types:
            params["types"] = list(types)
        with self.db.cursor(autocommit=True) as cur:
            return bool(cur.execute(CLAIMABLE[bool(types)], params).fetchone()[0])

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
        return self._report(COMPLETE, params)

    @retry_aborted
    def complete_many(
        self, worker: str, items: Sequence[tuple[int, str, str | None]], *, now: datetime
    ) -> list[JobRecord | Unchanged]:
        with self.db.cursor(write=True, autocommit=True) as cur:
            params = {"worker": worker, "now": now, **bind_items(items)}
            rows = cur.execute(_PLAIN_COMPLETE_MANY, params).fetchall()
            done = {job.id: job for job in map(decode_job, rows)}
            rest = {i: self._locate(cur, i) for i, _, _ in items if i not in done}
            # A job outside every workflow that the statement refused: a repeated report answers it.
            reported = {
                i: self._reported(cur, i, worker, token)
                for i, token, _ in items
                if i not in done
                and not ((job := rest[i]) and (job.in_workflow or job.depends_on is not None))
            }
        flow = [
            item
            for item in items
            if (job := rest.get(item[0])) is not None and (job.in_workflow or job.depends_on is not None)
        ]
        if flow:
            with self.db.cursor(write=True) as cur:
                rows = cur.execute(
                    COMPLETE_MANY, {"worker": worker, "now": now, **bind_items(flow)}
                ).fetchall()
                settled = [decode_job(row) for row in rows]
                self._settle(cur, now, settled)
                done.update((job.id, job) for job in settled)
                reported.update(
                    (i, self._reported(cur, i, worker, token)) for i, token, _ in flow if i not in done
                )
        return [done[i] if i in done else reported[i] for i, _, _ in items]

    @retry_aborted
    def complete_each(
        self, worker: str, items: Sequence[tuple[int, str, str | None]], *, now: datetime
    ) -> list[ReportedJob | Unchanged]:
        with self.db.cursor(write=True, autocommit=True) as cur:
            params = {"worker": worker, "now": now, **bind_items(items)}
            rows = cur.execute(_PLAIN_COMPLETE_EACH, params).fetchall()
        done: dict[int, ReportedJob | Unchanged] = {
            job_id: ReportedJob(job_id, status, False)
            for job_id, status in rows  # plain: no workflow
        }
        self._complete_left(worker, items, done, now)
        return [done[i] for i, _, _ in items]

    def _complete_left(
        self,
        worker: str,
        items: Sequence[tuple[int, str, str | None]],
        done: dict[int, ReportedJob | Unchanged],
        now: datetime,
    ) -> bool:
        """Answer in ``done`` the items a plain batch completion left: reports refused or repeated, and
        jobs in a workflow, which ``complete_many`` settles (rare: a worker reports the jobs it holds).
        Whether a job in a workflow completed: its end may have released others."""
        left = [item for item in items if item[0] not in done]
        if not left:
            return False
        outcomes = self.complete_many(worker, left, now=now)
        done.update((item[0], reported_job(outcome)) for item, outcome in zip(left, outcomes, strict=True))
        return any(not isinstance(outcome, Unchanged) and outcome.in_workflow for outcome in outcomes)

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
        params = _claim_params(worker, now, lease_seconds, limit, types, backoff)
        params.update(bind_items(items))
        if request_id is not None:
            earlier = self._requested(worker, request_id, now)
            if earlier is not None:  # sent again: the completions answer as the first time did
                return self.complete_each(worker, items, now=now), earlier
            params["request_id"] = request_id
        keep = KEEP if request_id is not None else ()
        try:
            statement, tagged, due = self._combined(COMPLETE_EACH_THEN_CLAIM, params, keep)
        except UniqueViolation:  # the same request at the same moment: the one that won answers
            assert request_id is not None  # only a kept request can collide
            earlier = self._requested(worker, request_id, now)
            return self.complete_each(worker, items, now=now), earlier or Claimed([], [])
        done: dict[int, ReportedJob | Unchanged] = {
            job_id: ReportedJob(job_id, status, False) for job_id, status in each_reported(tagged)
        }
        # The items the statement left first, before a lease of a job in a workflow can be settled as
        # expired (``due``): one that ended with its token still right is completed, as on SQLite.
        released = self._complete_left(worker, items, done, now)
        # The statement's snapshot cannot see the slots its completions freed under a concurrency limit
        # (while any type has one, or is paused), nor the jobs a workflow's end released: a claim after it
        # can, as on SQLite.
        claimed = [row for row in tagged if row[0] != "reported"]
        again = self._any_held or released
        claim = self._claimed(claimed, statement, params, again, due=due, keep=keep)
        return [done[i] for i, _, _ in items], claim

    def _combined(
        self, combined: dict[str, str], params: dict[str, Any], keep: Sequence[str]
    ) -> tuple[str, list[Any], bool]:
        """A report (or a batch of completions) and the claim in one statement (``combined`` maps each
        claim statement to it, sql.py), in the claim's transaction (``_transact_claim``, retried alone):
        one round trip, and the counters counted once, in key order. Returns the claim statement the
        engine would run alone, the tagged rows, and whether a job in a workflow has an expired lease."""
        typed = "types" in params
        statement = self._claim_statement(typed)
        tagged, due = self._transact_claim(SETTLE_AND_LOCK[typed], combined[statement], params, keep)
        return statement, tagged, due

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
        return self._report(FAIL, _fail_params(job_id, worker, token, now, error, retryable, backoff))

    def expire(self, *, now: datetime, backoff: Backoff) -> list[JobRecord]:
        return self._expire_plain(now, backoff) + self._expire_flows(now, backoff)

    @retry_aborted
    def _expire_plain(self, now: datetime, backoff: Backoff) -> list[JobRecord]:
        """Settle the expired leases of jobs outside every workflow: two autocommitted statements, the
        cancelled first (these are not retried); run again when aborted, which settles only what is left."""
        with self.db.cursor(write=True, autocommit=True) as cur:
            cur.execute(EXPIRE_CANCELLED, {"now": now})
            rows = cur.execute(EXPIRE, {"now": now, "base": backoff.base, "cap": backoff.cap}).fetchall()
        return [decode_job(row) for row in rows]

    @retry_aborted
    def _expire_flows(self, now: datetime, backoff: Backoff) -> list[JobRecord]:
        """Settle the expired leases of jobs in a workflow, in one transaction with what their ends imply."""
        with self.db.cursor(write=True) as cur:
            cancelled = [
                decode_job(row) for row in cur.execute(EXPIRE_CANCELLED_FLOW, {"now": now}).fetchall()
            ]
            params = {"now": now, "base": backoff.base, "cap": backoff.cap}
            jobs = [decode_job(row) for row in cur.execute(EXPIRE_FLOW, params).fetchall()]
            ended = [job for job in [*cancelled, *jobs] if job.status in FINISHED]
            if ended:
                self._settle(cur, now, ended)
        return jobs

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

    # -- running jobs (docs/running-jobs.md) -------------------------------------------------------------

    @retry_aborted
    def request_cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        params = {"id": job_id, "now": now, "actor": actor, "owner": owner}
        return self._guarded(REQUEST_CANCEL[owner is not None], params)

    @retry_aborted
    def cancel_held(
        self, job_id: int, worker: str, token: str, *, now: datetime, error: str | None = None
    ) -> JobRecord | Unchanged:
        params = {"id": job_id, "worker": worker, "token": token, "now": now, "error": error}
        return self._guarded(CANCEL_HELD, params)

    @retry_aborted
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
            "now": now,
            "expires": now + timedelta(seconds=lease_seconds),
            "percent": percent,
            "message": message,
        }
        return self._guarded(PROGRESS, params)

    @retry_aborted
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
        params = {
            "id": job_id,
            "worker": worker,
            "token": token,
            "now": now,
            "available_at": now + timedelta(seconds=delay_seconds),
            "max_snoozes": max_snoozes,
        }
        return self._guarded(SNOOZE, params)

    # -- bulk actions (the console) ----------------------------------------------------------------------

    @retry_aborted
    def bulk(
        self,
        action: str,
        job_ids: Sequence[int],
        actor: str,
        *,
        now: datetime,
        audit: BulkAudit | None = None,
    ) -> list[int]:
        params = {"ids": [int(i) for i in job_ids], "now": now, "actor": actor}
        if action == "delete":
            # One statement needs no transaction of its own; with its audit row it does.
            with self.db.cursor(write=True, autocommit=audit is None) as cur:
                deleted = sorted(row[0] for row in cur.execute(BULK[action], params).fetchall())
                if audit is not None:
                    cur.execute(AUDIT, audit.row(action, actor, len(deleted), now))
            return deleted
        with self.db.cursor(write=True) as cur:
            jobs = [decode_job(row) for row in cur.execute(BULK[action], params).fetchall()]
            if audit is not None:
                cur.execute(AUDIT, audit.row(action, actor, len(jobs), now))
            if action == "retry":
                again = [j for j in jobs if j.in_workflow or j.depends_on is not None]
                if again:
                    self._settle(cur, now, [], reopened=again)
            else:
                ended = [j for j in jobs if j.in_workflow]
                if ended:
                    self._settle(cur, now, ended)
        return sorted(j.id for j in jobs)

    # -- workflows (workflows.py): a transaction PostgreSQL aborted to break a deadlock is run again ------

    @retry_aborted
    def create_batch(
        self, owner: str, batch: NewBatch, *, now: datetime, scope: str | None = None
    ) -> tuple[BatchRecord, bool]:
        return super().create_batch(owner, batch, now=now, scope=scope)

    @retry_aborted
    def cancel_batch(
        self, batch_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> BatchRecord | None:
        return super().cancel_batch(batch_id, actor, now=now, owner=owner)

    @retry_aborted
    def retry_batch(self, batch_id: int, actor: str, *, now: datetime) -> BatchRecord | None:
        return super().retry_batch(batch_id, actor, now=now)

    @retry_aborted
    def add_to_batch(
        self, batch_id: int, worker: str, token: str, jobs: Sequence[NewJob], *, now: datetime
    ) -> list[JobRecord] | str:
        return super().add_to_batch(batch_id, worker, token, jobs, now=now)

    # -- a schedule's fired job (shared.py fires the slot) --------------------------------------------------

    def _insert_fired(self, cur: Any, owner: str, new: NewJob, now: datetime) -> JobRecord:
        """The job's INSERT, which writes its history row itself."""
        params = {
            "type": new.type,
            "payload": bind_json(new.payload_json),
            "priority": new.priority,
            "max_retries": new.max_retries,
            "key": None,
            "fingerprint": None,
            "owner": owner,
            "available_at": new.available_at,
            "now": now,
        }
        rows = cur.execute(INSERT, params).fetchall()
        return decode_job(rows[0])


def make_engine(db: Database) -> Engine:
    """The PostgreSQL engine for ``db``, typed as the protocol: mypy checks here that ``PostgresEngine`` has
    every method of ``Engine`` with its signature."""
    return PostgresEngine(db)
