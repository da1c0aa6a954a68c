"""Workflows on both engines (docs/workflows.md): jobs that wait for other jobs, and batches with callbacks.

Written once over ``Flows``, the statements each engine's folder writes in its own dialect
(``sqlite/sql.py``, ``postgres/sql.py``: ``FLOWS``). Every operation runs on the cursor of one write
transaction that the engine opens, so that a job's transition and all it implies are one:

- ``_settle`` follows every transition of a job that is part of a workflow (``JobRecord.in_workflow``):
  the waiting jobs that depended on a job that ended failed or cancelled end cancelled, transitively, with a
  history row naming that dependency (one statement to find them all, one to cancel them); the waiting jobs
  that depended on a finished or retried job are looked at again, and those whose dependencies are all
  finished become pending (one statement, however many dependents); each batch concerned counts its
  finished members (one statement per batch), and the transition that finishes its last member finishes
  it and enqueues its callbacks, once, under the guard ``status = 'running'``.
- A job without dependents, dependencies or batch never comes here: its transitions cost what they did.
- Inserting jobs that wait (``_insert_jobs``): where the engine has the statements (PostgreSQL,
  ``Flows.insert_many``), a whole insert, a batch of 1,000 chained jobs as much as one job, is a constant
  number of statements (``_insert_at_once``); elsewhere (SQLite, in process) a few statements per job.
  PostgreSQL inserts several plain jobs here too (a batch of 1,000 is as few statements); one plain job
  stays its engine's one autocommitted statement.

On PostgreSQL two transactions may finish two dependencies of one job at once, each unable to see the
other's change: ``lock_waiting`` locks the waiting dependents first (in id order), so that the second
waits for the first to commit and then, in a statement that starts after that, sees both finished.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from queuelog.db import DatabaseUnavailable
from queuelog.engines.records import (
    BATCH_FIELDS,
    BatchConflict,
    BatchRecord,
    Callback,
    DependencyMissing,
    JobRecord,
    KeyConflict,
    NewBatch,
    NewJob,
)

FINISHED = frozenset({"completed", "failed", "cancelled"})
MEMBER_STATUSES = ("waiting", "pending", "running", "completed", "failed", "cancelled")


@dataclass(frozen=True, eq=False)
class Flows:
    """One database's statements and binders for workflows (each engine's ``FLOWS``). ``:ids``-style
    parameters take a list of ids as ``bind_ids`` makes it; ``event`` takes positional tuples."""

    bind_ids: Callable[[Sequence[int]], Any]
    bind_time: Callable[[datetime], Any]
    bind_json: Callable[[str | None], Any]
    decode_job: Callable[[Sequence[Any]], JobRecord]
    decode_time: Callable[[Any], Any]
    event: str  # (job_id, at, event, actor, attempt, error)
    take_dependencies: dict[bool, str]  # by "only the owner's": ids -> (id, status) of those found
    find_dependencies: dict[bool, str]  # the same read alone: ids -> (id) of those found
    insert: str  # a job with every workflow column; ON CONFLICT DO NOTHING (an idempotency key)
    by_key: str  # JOB_COLUMNS, fingerprint
    dependency: str  # (job_id, depends_on_id)
    doomed: str  # ids -> (id, cause): waiting jobs that a failed or cancelled job cancels, transitively
    cancel_doomed: str  # ids -> JOB_COLUMNS
    lock_waiting: str | None  # ids, own -> lock the waiting candidates (PostgreSQL)
    refresh: (
        str  # ids (dependents of), own (these themselves) -> (id, status, retry_count) of those looked at
    )
    count_batch: str  # id, done, failed, now -> finished, total, status
    finish_batch: str  # id, now -> owner, status, on_success, on_finish, on_success_job, on_finish_job
    set_callbacks: str  # id, success, finish
    insert_batch: str  # -> id
    batch_by_key: str  # owner, key -> id, fingerprint
    get_batch: str  # id -> BATCH_COLUMNS
    set_batch_counts: str  # id, total, finished, failed
    members: str  # ids -> batch_id, id, status
    list_batches: Callable[[tuple[str, ...], bool], str]  # filters, keyset -> BATCH_COLUMNS
    cancel_members: str  # id, now -> JOB_COLUMNS
    request_cancel_members: str  # id, now, actor -> id, retry_count
    retry_members: str  # id, now -> JOB_COLUMNS
    holds_member: str  # id, worker, token -> id
    grow_batch: str  # id, n, now -> owner
    dependents_of: str  # id, limit -> job_id
    # A whole insert in a constant number of statements (PostgreSQL; None: one job at a time):
    reserve_ids: str | None = None  # n -> id: n new jobs' ids, in any order
    by_keys: str | None = None  # owner, keys -> idempotency_key, fingerprint, JOB_COLUMNS
    take_counted: dict[bool, str] | None = None  # by "only the owner's": ids, counts -> (id, status)
    insert_many: str | None = None  # the new jobs, their dependencies and history rows -> JOB_COLUMNS
    bind_many: Callable[[dict[str, list[Any]]], dict[str, Any]] | None = None  # insert_many's arrays


def _starting(
    new: NewJob, deps: Sequence[int], statuses: dict[int, str]
) -> tuple[str, int | None, list[int]]:
    """A new job's first status as its dependencies ``deps`` stand (``statuses``): cancelled by the first
    failed or cancelled one (its id the cause) unless it runs anyway, waiting while any is unfinished,
    else pending; and the unfinished ones."""
    unfinished = [d for d in deps if statuses[d] not in FINISHED]
    bad = [d for d in deps if statuses[d] in ("failed", "cancelled")]
    if bad and new.on_dependency_failure != "run":
        return "cancelled", min(bad), unfinished
    return ("waiting" if unfinished else "pending"), None, unfinished


def _ids_json(ids: Sequence[int]) -> str | None:
    return None if not ids else json.dumps(sorted(ids), separators=(",", ":"))


class WorkflowEngine:
    """The workflow operations of ``Engine``, over ``flows``. The engine opens the transactions
    (``_flow_cursor``) and calls ``_settle`` after each transition of a job in a workflow."""

    flows: Flows
    db: Any

    def _flow_cursor(self) -> Any:
        """A cursor in one write transaction, committed at the end of the block."""
        return self.db.cursor(write=True)

    def _log(self, cur: Any, events: Sequence[tuple[Any, ...]]) -> None:
        if len(events) == 1:
            cur.execute(self.flows.event, events[0])
        elif events:
            cur.executemany(self.flows.event, events)

    # -- inserting jobs that wait --------------------------------------------------------------------------

    def _insert_jobs(
        self,
        cur: Any,
        owner: str,
        jobs: Sequence[NewJob],
        now: datetime,
        *,
        scope: str | None,
        batch_id: int | None = None,
    ) -> list[tuple[JobRecord, bool]]:
        """Insert ``jobs`` on ``cur`` with their dependencies: each starts waiting, pending, or cancelled
        (a dependency failed or was cancelled already), as its dependencies stand, read under their lock.
        Dependencies must be ``scope``'s jobs (any when None). Raises ``DependencyMissing``,
        ``KeyConflict``."""
        f = self.flows
        keys = [new.idempotency_key for new in jobs if new.idempotency_key is not None]
        if f.insert_many is not None and len(set(keys)) == len(keys):
            return self._insert_at_once(cur, owner, jobs, now, keys, scope=scope, batch_id=batch_id)
        ts = f.bind_time(now)
        out: list[tuple[JobRecord, bool]] = []
        events: list[tuple[Any, ...]] = []
        by_index: dict[int, JobRecord] = {}  # the jobs of this insert, for refs to earlier ones
        for index, new in enumerate(jobs):
            if new.idempotency_key is not None:
                existing = cur.execute(f.by_key, {"owner": owner, "key": new.idempotency_key}).fetchone()
                if existing is not None:
                    job = f.decode_job(existing[:-1])
                    if existing[-1] != new.fingerprint:
                        raise KeyConflict(index, job)
                    out.append((job, False))
                    by_index[index] = job
                    continue
            deps = list(new.depends_on) + [by_index[i].id for i in new.after]
            statuses: dict[int, str] = {}
            if deps:
                rows = cur.execute(
                    f.take_dependencies[scope is not None], {"ids": f.bind_ids(deps), "owner": scope}
                ).fetchall()
                statuses = {int(i): status for i, status in rows}
                if any(dep not in statuses for dep in new.depends_on):
                    raise DependencyMissing(self._missing(cur, owner, jobs, index, scope))
            status, cause, unfinished = _starting(new, deps, statuses)
            params = {
                "type": new.type,
                "payload": f.bind_json(new.payload_json),
                "priority": new.priority,
                "status": status,
                "max_retries": new.max_retries,
                "key": new.idempotency_key,
                "fingerprint": new.fingerprint,
                "owner": owner,
                "available_at": f.bind_time(new.available_at),
                "now": ts,
                "finished_at": ts if status == "cancelled" else None,
                "batch_id": batch_id,
                "callback_of": None,
                "depends_on": _ids_json(deps),
                "waiting_on": _ids_json(unfinished) if status == "waiting" else None,
                "on_failure": new.on_dependency_failure,
            }
            row = cur.execute(f.insert, params).fetchone()
            if row is None:  # a concurrent insert took the key (PostgreSQL): a replay, or a conflict
                existing = cur.execute(f.by_key, {"owner": owner, "key": new.idempotency_key}).fetchone()
                job = f.decode_job(existing[:-1])
                if existing[-1] != new.fingerprint:
                    raise KeyConflict(index, job)
                out.append((job, False))
                by_index[index] = job
                continue
            job = f.decode_job(row)
            by_index[index] = job
            out.append((job, True))
            if deps:
                cur.executemany(f.dependency, [(job.id, d) for d in sorted(set(deps))])
            events.append((job.id, ts, "enqueued", owner, 0, None))
            if cause is not None:
                events.append((job.id, ts, "cancelled", f"job {cause}", 0, None))
        self._log(cur, events)
        return out

    def _missing(
        self, cur: Any, owner: str, jobs: Sequence[NewJob], first: int, scope: str | None
    ) -> list[tuple[int, int, int]]:
        """Each dependency, named by id, of ``jobs[first]`` and the new jobs after it that does not exist
        or that ``scope`` may not see, as ``DependencyMissing`` lists them: read (not taken) on the way
        to refusing an insert made one job at a time, so that the refusal names each. A replay (a key
        in use, or used earlier in the request) keeps the dependencies its job had: it is not read."""
        f = self.flows
        keys = {new.idempotency_key for new in jobs[:first]}
        read = []
        for index in range(first, len(jobs)):
            key = jobs[index].idempotency_key
            if index > first and key is not None:
                if key in keys or cur.execute(f.by_key, {"owner": owner, "key": key}).fetchone():
                    continue
            keys.add(key)
            read.append(index)
        named = sorted({dep for index in read for dep in jobs[index].depends_on})
        rows = cur.execute(f.find_dependencies[scope is not None], {"ids": f.bind_ids(named), "owner": scope})
        found = {int(row[0]) for row in rows.fetchall()}
        return [
            (index, at, dep)
            for index in read
            for at, dep in enumerate(jobs[index].depends_on)
            if dep not in found
        ]

    def _insert_at_once(
        self,
        cur: Any,
        owner: str,
        jobs: Sequence[NewJob],
        now: datetime,
        keys: list[str],
        *,
        scope: str | None,
        batch_id: int | None,
    ) -> list[tuple[JobRecord, bool]]:
        """``_insert_jobs`` (``keys``: the jobs' idempotency keys, each once) in a constant number of
        statements, however many jobs and dependencies: the jobs their keys name already, the new jobs'
        ids, the existing dependencies (locked, their ``dependents`` counted), then one statement that
        inserts every new job with its dependency rows and history rows. Each new job's status follows from its dependencies' as ``_insert_jobs`` decides it;
        a dependency on an earlier job of the same insert is read from what this one decided for it."""
        f = self.flows
        assert f.reserve_ids and f.by_keys and f.take_counted and f.insert_many and f.bind_many
        ts = f.bind_time(now)
        existing: dict[str, tuple[JobRecord, Any]] = {}
        if keys:
            for row in cur.execute(f.by_keys, {"owner": owner, "keys": keys}).fetchall():
                existing[row[0]] = (f.decode_job(row[2:]), row[1])
        fresh = [i for i, new in enumerate(jobs) if new.idempotency_key not in existing]
        ids: dict[int, int] = {}  # index -> id, for every job of the insert
        if fresh:
            reserved = sorted(int(r[0]) for r in cur.execute(f.reserve_ids, {"n": len(fresh)}).fetchall())
            ids = dict(zip(fresh, reserved, strict=True))
        for index, new in enumerate(jobs):
            if index not in ids:
                ids[index] = existing[new.idempotency_key or ""][0].id
        # Existing dependencies: jobs named by id, and earlier jobs of this insert that were there already.
        deps_of: dict[int, list[int]] = {}
        outside: dict[int, int] = {}  # existing dependency -> how many new jobs depend on it
        created = set(ids[i] for i in fresh)
        for index in fresh:
            new = jobs[index]
            deps = list(new.depends_on) + [ids[i] for i in new.after]
            deps_of[index] = deps
            for dep in set(deps) - created:
                outside[dep] = outside.get(dep, 0) + 1
        statuses: dict[int, str] = {}
        if outside:
            taken = sorted(outside)
            params = {"ids": f.bind_ids(taken), "counts": [outside[d] for d in taken], "owner": scope}
            rows = cur.execute(f.take_counted[scope is not None], params).fetchall()
            statuses = {int(i): status for i, status in rows}
        missing = [
            (index, at, dep)
            for index in fresh
            for at, dep in enumerate(jobs[index].depends_on)
            if dep not in statuses and dep not in created
        ]
        if missing:  # each new job's, named at once (replays keep the dependencies they had)
            raise DependencyMissing(missing)
        out: list[tuple[JobRecord, bool]] = []
        columns: dict[str, list[Any]] = {
            name: []
            for name in (
                "ids", "types", "payloads", "priorities", "statuses", "max_retries", "keys",
                "fingerprints", "available_at", "depends_on", "waiting_on", "on_failure", "dependents",
                "edge_jobs", "edge_deps", "cancelled", "causes",
            )
        }  # fmt: skip
        dependents: dict[int, int] = {}
        for index, new in enumerate(jobs):
            if index not in deps_of:
                job, fingerprint = existing[new.idempotency_key or ""]
                if fingerprint != new.fingerprint:
                    raise KeyConflict(index, job)
                continue
            deps = deps_of[index]
            job_id = ids[index]
            status, cause, unfinished = _starting(new, deps, statuses)
            if cause is not None:
                columns["cancelled"].append(job_id)
                columns["causes"].append(cause)
            statuses[job_id] = status
            for dep in sorted(set(deps)):
                columns["edge_jobs"].append(job_id)
                columns["edge_deps"].append(dep)
                if dep in created:
                    dependents[dep] = dependents.get(dep, 0) + 1
            for name, value in (
                ("ids", job_id), ("types", new.type), ("payloads", new.payload_json),
                ("priorities", new.priority), ("statuses", status), ("max_retries", new.max_retries),
                ("keys", new.idempotency_key), ("fingerprints", new.fingerprint),
                ("available_at", new.available_at), ("depends_on", _ids_json(deps)),
                ("waiting_on", _ids_json(unfinished) if status == "waiting" else None),
                ("on_failure", new.on_dependency_failure),
            ):  # fmt: skip
                columns[name].append(value)
        columns["dependents"] = [dependents.get(i, 0) for i in columns["ids"]]
        made: dict[int, JobRecord] = {}
        if columns["ids"]:
            params = {**f.bind_many(columns), "owner": owner, "now": ts, "batch_id": batch_id}
            made = {job.id: job for job in map(f.decode_job, cur.execute(f.insert_many, params).fetchall())}
            if len(made) != len(columns["ids"]):
                # A concurrent insert took one of the keys since they were looked up: the whole
                # transaction runs again (the engine's retry), and then finds that job.
                raise DatabaseUnavailable("a concurrent insert took an idempotency key", conflict=True)
        for index, new in enumerate(jobs):
            if index in deps_of:
                out.append((made[ids[index]], True))
            else:
                out.append((existing[new.idempotency_key or ""][0], False))
        return out

    def _callback(self, cur: Any, owner: str, batch_id: int, body: str, now: datetime) -> int:
        f = self.flows
        spec = Callback(**json.loads(body))
        ts = f.bind_time(now)
        params = {
            "type": spec.type,
            "payload": f.bind_json(spec.payload_json),
            "priority": spec.priority,
            "status": "pending",
            "max_retries": spec.max_retries,
            "key": None,
            "fingerprint": None,
            "owner": owner,
            "available_at": ts,
            "now": ts,
            "finished_at": None,
            "batch_id": batch_id,
            "callback_of": batch_id,
            "depends_on": None,
            "waiting_on": None,
            "on_failure": None,
        }
        job = f.decode_job(cur.execute(f.insert, params).fetchone())
        self._log(cur, [(job.id, ts, "enqueued", "system", 0, None)])
        return job.id

    # -- after a transition ---------------------------------------------------------------------------------

    def _settle(
        self,
        cur: Any,
        now: datetime,
        changed: Sequence[JobRecord],
        *,
        reopened: Sequence[JobRecord] = (),
    ) -> None:
        """What ``changed`` jobs (that just finished) and ``reopened`` jobs (failed or cancelled ones just
        retried) imply for other jobs and batches, on ``cur``, in the transaction that changed them."""
        f = self.flows
        ts = f.bind_time(now)
        finished = [job for job in changed if job.status in FINISHED]
        bad = [job.id for job in finished if job.dependents and job.status != "completed"]
        doomed: list[JobRecord] = []
        if bad:
            causes = dict(cur.execute(f.doomed, {"ids": f.bind_ids(bad)}).fetchall())
            if causes:
                rows = cur.execute(f.cancel_doomed, {"ids": f.bind_ids(list(causes)), "now": ts}).fetchall()
                doomed = [f.decode_job(row) for row in rows]
                events = [(j.id, ts, "cancelled", f"job {causes[j.id]}", j.retry_count, None) for j in doomed]
                self._log(cur, events)
        sources = [job.id for job in [*finished, *reopened, *doomed] if job.dependents]
        own = [job.id for job in reopened if job.status == "waiting"]
        if sources or own:
            params = {"ids": f.bind_ids(sources), "own": f.bind_ids(own), "now": ts}
            if f.lock_waiting is not None:
                cur.execute(f.lock_waiting, params).fetchall()
            refreshed = cur.execute(f.refresh, params).fetchall()  # (id, status, retry_count)
            events = [
                (i, ts, "released", "system", n, None) for i, status, n in refreshed if status == "pending"
            ]
            self._log(cur, events)
        # Batches: members that finished (+1) or were reopened (-1).
        deltas: dict[int, list[int]] = {}
        for job in [*finished, *doomed]:
            if job.batch_id is not None and job.callback_of is None:
                d = deltas.setdefault(job.batch_id, [0, 0])
                d[0] += 1
                d[1] += job.status != "completed"
        for job in reopened:
            if job.batch_id is not None and job.callback_of is None:
                d = deltas.setdefault(job.batch_id, [0, 0])
                d[0] -= 1
                d[1] -= 1
        for batch_id in sorted(deltas):
            done, failed = deltas[batch_id]
            params = {"id": batch_id, "done": done, "failed": failed, "now": ts}
            counted = cur.execute(f.count_batch, params).fetchone()
            if counted is not None and counted[2] == "running" and counted[0] >= counted[1]:
                self._finish_batch(cur, batch_id, now)

    def _finish_batch(self, cur: Any, batch_id: int, now: datetime) -> None:
        """Finish the batch if it is running with every member finished; enqueue its callbacks, each the
        first time only (a batch retried and finished again enqueues none it enqueued before)."""
        f = self.flows
        row = cur.execute(f.finish_batch, {"id": batch_id, "now": f.bind_time(now)}).fetchone()
        if row is None:
            return  # not every member finished, or another transaction finished it
        owner, status, on_success, on_finish, success_job, finish_job = row
        if on_finish is not None and finish_job is None:
            finish_job = self._callback(cur, owner, batch_id, on_finish, now)
        if status == "succeeded" and on_success is not None and success_job is None:
            success_job = self._callback(cur, owner, batch_id, on_success, now)
        if (success_job, finish_job) != (row[4], row[5]):
            cur.execute(f.set_callbacks, {"id": batch_id, "success": success_job, "finish": finish_job})

    # -- batches -------------------------------------------------------------------------------------------

    def create_batch(
        self, owner: str, batch: NewBatch, *, now: datetime, scope: str | None = None
    ) -> tuple[BatchRecord, bool]:
        f = self.flows
        ts = f.bind_time(now)
        with self._flow_cursor() as cur:
            if batch.idempotency_key is not None:
                row = cur.execute(f.batch_by_key, {"owner": owner, "key": batch.idempotency_key}).fetchone()
                if row is not None:
                    existing = self._read_batch(cur, int(row[0]))
                    assert existing is not None
                    if row[1] != batch.fingerprint:
                        raise BatchConflict(existing)
                    return existing, False
            params = {
                "owner": owner,
                "description": batch.description,
                "key": batch.idempotency_key,
                "fingerprint": batch.fingerprint,
                "on_success": None if batch.on_success is None else json.dumps(batch.on_success._asdict()),
                "on_finish": None if batch.on_finish is None else json.dumps(batch.on_finish._asdict()),
                "now": ts,
            }
            row = cur.execute(f.insert_batch, params).fetchone()
            if row is None:  # a concurrent request with the key made it (PostgreSQL)
                key_row = cur.execute(
                    f.batch_by_key, {"owner": owner, "key": batch.idempotency_key}
                ).fetchone()
                existing = self._read_batch(cur, int(key_row[0]))
                assert existing is not None
                if key_row[1] != batch.fingerprint:
                    raise BatchConflict(existing)
                return existing, False
            batch_id = int(row[0])
            jobs = [
                job
                for job, _ in self._insert_jobs(cur, owner, batch.jobs, now, scope=scope, batch_id=batch_id)
            ]
            done = [job for job in jobs if job.status in FINISHED]
            failed = sum(1 for job in done if job.status != "completed")
            counts = {"id": batch_id, "total": len(jobs), "finished": len(done), "failed": failed}
            cur.execute(f.set_batch_counts, counts)
            if len(done) == len(jobs):
                self._finish_batch(cur, batch_id, now)
            created = self._read_batch(cur, batch_id)
        assert created is not None
        return created, True

    def _read_batch(self, cur: Any, batch_id: int) -> BatchRecord | None:
        row = cur.execute(self.flows.get_batch, {"id": batch_id}).fetchone()
        if row is None:
            return None
        return self._with_members(cur, [self._decode_batch(row)])[0]

    def _decode_batch(self, row: Sequence[Any]) -> BatchRecord:
        values = dict(zip(BATCH_FIELDS, row, strict=True))
        for name in ("created_at", "updated_at", "finished_at"):
            values[name] = self.flows.decode_time(values[name])
        return BatchRecord(**values)

    def _with_members(self, cur: Any, batches: list[BatchRecord]) -> list[BatchRecord]:
        if not batches:
            return []
        members: dict[int, list[int]] = {b.id: [] for b in batches}
        counts: dict[int, dict[str, int]] = {b.id: dict.fromkeys(MEMBER_STATUSES, 0) for b in batches}
        ids = self.flows.bind_ids([b.id for b in batches])
        for batch_id, job_id, status in cur.execute(self.flows.members, {"ids": ids}).fetchall():
            members[batch_id].append(int(job_id))
            counts[batch_id][status] = counts[batch_id].get(status, 0) + 1
        return [b._replace(jobs=tuple(members[b.id]), counts=counts[b.id]) for b in batches]

    def get_batch(self, batch_id: int) -> BatchRecord | None:
        with self.db.cursor() as cur:
            return self._read_batch(cur, batch_id)

    def list_batches(
        self,
        *,
        owner: str | None = None,
        status: str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[BatchRecord]:
        filters = {"owner": owner, "status": status}
        params: dict[str, Any] = {name: value for name, value in filters.items() if value is not None}
        statement = self.flows.list_batches(tuple(params), before_id is not None)
        with self.db.cursor() as cur:
            rows = cur.execute(statement, {**params, "before_id": before_id, "limit": limit}).fetchall()
            return self._with_members(cur, [self._decode_batch(row) for row in rows])

    def cancel_batch(
        self, batch_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> BatchRecord | None:
        f = self.flows
        ts = f.bind_time(now)
        with self._flow_cursor() as cur:
            batch = self._read_batch(cur, batch_id)
            if batch is None or (owner is not None and batch.owner != owner):
                return None
            rows = cur.execute(f.cancel_members, {"id": batch_id, "now": ts}).fetchall()
            cancelled = [f.decode_job(row) for row in rows]
            self._log(cur, [(j.id, ts, "cancelled", actor, j.retry_count, None) for j in cancelled])
            asked = cur.execute(
                f.request_cancel_members, {"id": batch_id, "now": ts, "actor": actor}
            ).fetchall()
            self._log(cur, [(int(i), ts, "cancel_requested", actor, n + 1, None) for i, n in asked])
            self._settle(cur, now, cancelled)
            return self._read_batch(cur, batch_id)

    def retry_batch(self, batch_id: int, actor: str, *, now: datetime) -> BatchRecord | None:
        f = self.flows
        ts = f.bind_time(now)
        with self._flow_cursor() as cur:
            rows = cur.execute(f.retry_members, {"id": batch_id, "now": ts}).fetchall()
            retried = [f.decode_job(row) for row in rows]
            self._log(cur, [(j.id, ts, "retried", actor, 0, None) for j in retried])
            self._settle(cur, now, [], reopened=retried)
            return self._read_batch(cur, batch_id)

    def add_to_batch(
        self,
        batch_id: int,
        worker: str,
        token: str,
        jobs: Sequence[NewJob],
        *,
        now: datetime,
    ) -> list[JobRecord] | str:
        f = self.flows
        ts = f.bind_time(now)
        with self._flow_cursor() as cur:
            # The member's row stays locked to the end: it cannot finish (nor the batch) meanwhile.
            held = cur.execute(f.holds_member, {"id": batch_id, "worker": worker, "token": token}).fetchone()
            if held is None:
                return "not_holder"
            grown = cur.execute(f.grow_batch, {"id": batch_id, "n": len(jobs), "now": ts}).fetchone()
            if grown is None:
                return "finished"
            owner = grown[0]
            made = [
                job for job, _ in self._insert_jobs(cur, owner, jobs, now, scope=owner, batch_id=batch_id)
            ]
            self._settle(cur, now, [job for job in made if job.status in FINISHED])
            return made

    def dependents(self, job_id: int, *, limit: int = 100) -> list[int]:
        with self.db.cursor() as cur:
            rows = cur.execute(self.flows.dependents_of, {"id": job_id, "limit": limit}).fetchall()
        return [int(row[0]) for row in rows]

    def batch_counts(self) -> dict[str, int]:
        # Plain SQL of both dialects, without parameters; the batches table is small beside the jobs.
        with self.db.cursor() as cur:
            rows = cur.execute("SELECT status, count(*) FROM batches GROUP BY status").fetchall()
        return {str(status): int(n) for status, n in rows}
