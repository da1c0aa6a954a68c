"""What the two engines share, written once over their ``Dialect`` (dialect.py): ``SharedEngine``, the
base of ``SQLiteEngine`` and ``PostgresEngine``, holds the operations of ``Engine`` (engine.py) that are the
same on both databases but for their statements and values.

- The reads: jobs, history, counts, throughput, failures, the allowlist, API keys, the console's figures
  and its search (statements built in search.py). SQLite returns times as text, PostgreSQL as datetimes;
  the dialect's decoders make both aware UTC datetimes. Reads take no write lock, nor any lock a claim
  would wait for. Counts and throughput come from the tables the triggers of migration 0003 keep
  (``job_counts``, ``job_throughput``): a few rows, whatever the size of the jobs table (docs/performance.md#counts-without-counting).
- Managing the allowlist and the schedules, through the ORM models, which speak either database, with the
  audit row in the same transaction. The objects returned are models detached from their session; an add
  of a taken name raises SQLAlchemy's ``IntegrityError``.
- Firing a schedule's slot: one transaction of plain statements on the engine's own cursor
  (``Database.cursor``): the guarded UPDATE of the schedule, the insert of the (schedule, slot) row that
  makes the slot fire once, and the job, inserted by the engine's own job INSERT with its history row
  (``_insert_fired``), so that counts and history are those of any enqueued job (docs/schedules.md,
  Exactly once).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select, update

from queuelog.db import Database
from queuelog.engines.dialect import Dialect
from queuelog.engines.records import (
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
    NewJob,
    SearchPage,
    ThroughputRow,
    WorkerKeyRow,
)
from queuelog.engines.search import bind, count_statement, present, scans, search_statements
from queuelog.models import AuditLog, JobType, Schedule, utcnow


def first_row(cur: Any) -> Any:
    """The first row or None. Every row is read: SQLite finishes a RETURNING statement only when it is
    stepped to the end."""
    rows = cur.fetchall()
    return rows[0] if rows else None


class SharedEngine:
    """The operations of ``Engine`` written once, over ``dialect``. A subclass sets ``dialect`` and
    implements the rest of ``Engine`` and ``_insert_fired``."""

    dialect: Dialect

    def __init__(self, db: Database):
        self.db = db
        self.name = self.dialect.name

    # -- reads --------------------------------------------------------------------------------------------

    def _rows(self, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
        # One statement, its own transaction: on PostgreSQL without BEGIN and COMMIT, two round trips fewer
        # (the API key check of every request comes here).
        with self.db.cursor(autocommit=True) as cur:
            return cur.execute(statement, params or {}).fetchall()

    def get(self, job_id: int) -> JobRecord | None:
        rows = self._rows(self.dialect.get, {"id": job_id})
        return self.dialect.decode_job(rows[0]) if rows else None

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
        filters = {"owner": owner, "status": status, "type": type, "priority": priority}
        params: dict[str, Any] = {name: value for name, value in filters.items() if value is not None}
        statement = self.dialect.list_statement(tuple(params), before_id is not None)
        rows = self._rows(statement, {**params, "before_id": before_id, "limit": limit})
        return [self.dialect.decode_job(row) for row in rows]

    def events(self, job_id: int) -> list[EventRecord]:
        time = self.dialect.decode_time
        return [
            EventRecord(i, time(at), event, actor, attempt, error)
            for i, at, event, actor, attempt, error in self._rows(self.dialect.events, {"job_id": job_id})
        ]

    def counts(self, *, owner: str | None = None) -> list[CountRow]:
        rows = self._rows(self.dialect.counts[owner is not None], {"owner": owner})
        return [CountRow(status, job_type, priority, int(n)) for status, job_type, priority, n in rows]

    def oldest_pending(self, *, owner: str | None = None) -> datetime | None:
        rows = self._rows(self.dialect.oldest[owner is not None], {"owner": owner})
        return self.dialect.decode_time(rows[0][0]) if rows else None

    def throughput(self, *, since: datetime, owner: str | None = None) -> list[ThroughputRow]:
        minute = self.dialect.minute
        params = {"owner": owner, "since": since.astimezone(UTC).strftime(minute)}
        return [
            ThroughputRow(status, datetime.strptime(at, minute).replace(tzinfo=UTC), int(n))
            for status, at, n in self._rows(self.dialect.throughput[owner is not None], params)
        ]

    def failures(self, *, limit: int) -> list[FailureRow]:
        time = self.dialect.decode_time
        return [
            FailureRow(job_id, time(at), error, job_type, status)
            for job_id, at, error, job_type, status in self._rows(self.dialect.failures, {"limit": limit})
        ]

    def job_types(self) -> list[JobTypeRow]:
        return [
            JobTypeRow(name, bool(enabled), bool(paused), self.dialect.schema_text(schema))
            for name, enabled, paused, schema in self._rows(self.dialect.job_types)
        ]

    def api_key(self, digest: str) -> KeyRow | None:
        rows = self._rows(self.dialect.api_key, {"digest": digest})
        if not rows:
            return None
        key_id, kind, name, last_used, username, role, active = rows[0]
        active = None if active is None else bool(active)
        return KeyRow(key_id, kind, name, self.dialect.decode_time(last_used), username, role, active)

    # -- the console's figures ---------------------------------------------------------------------------

    def held_jobs(self, *, limit: int) -> list[HeldJob]:
        time = self.dialect.decode_time
        return [
            HeldJob(job_id, job_type, worker, time(claimed), time(expires), progress, message)
            for job_id, job_type, worker, claimed, expires, progress, message in self._rows(
                self.dialect.held_jobs, {"limit": limit}
            )
        ]

    def held_counts(self) -> dict[str, int]:
        return {worker: int(n) for worker, n in self._rows(self.dialect.held_counts)}

    def recent_finished(self, status: str, *, since: datetime, limit: int) -> list[FinishedJob]:
        params = {"status": status, "since": self.dialect.bind_time(since), "limit": limit}
        return self._finished(self._rows(self.dialect.recent_finished, params))

    def recent_of_type(self, job_type: str, *, limit: int) -> list[FinishedJob]:
        return self._finished(self._rows(self.dialect.recent_of_type, {"type": job_type, "limit": limit}))

    def _finished(self, rows: list[Any]) -> list[FinishedJob]:
        time = self.dialect.decode_time
        return [
            FinishedJob(job_id, job_type, status, worker, time(available), time(claimed), time(finished))
            for job_id, job_type, status, worker, available, claimed, finished in rows
        ]

    def worker_keys(self, *, since: datetime, limit: int) -> list[WorkerKeyRow]:
        time = self.dialect.decode_time
        params = {"since": self.dialect.bind_time(since), "limit": limit}
        return [
            WorkerKeyRow(name, time(created), time(used), time(revoked))
            for name, created, used, revoked in self._rows(self.dialect.worker_keys, params)
        ]

    # -- search ------------------------------------------------------------------------------------------

    def search(self, search: JobSearch, *, before_id: int | None, limit: int, scan: int) -> SearchPage:
        names = present(search)
        params = {**bind(search, self.dialect), "before_id": before_id}
        keyset = before_id is not None
        with self.db.cursor() as cur:
            lowest, full = None, False
            if scans(names):
                window, _ = search_statements(self.dialect, names, keyset, False)
                lowest, examined = cur.execute(window, {**params, "scan": scan}).fetchone()
                full = lowest is not None and examined >= scan
            _, page = search_statements(self.dialect, names, keyset, full)
            rows = cur.execute(page, {**params, "floor": lowest, "limit": limit + 1}).fetchall()
        jobs = [self.dialect.decode_job(row) for row in rows[:limit]]
        if len(rows) > limit:
            return SearchPage(jobs, jobs[-1].id, False)
        return SearchPage(jobs, lowest if full else None, full)

    def count_matching(self, search: JobSearch, *, action: str, ceiling: int, cap: int) -> int:
        statement = count_statement(self.dialect, present(search), action)
        params = {**bind(search, self.dialect), "ceiling": ceiling, "cap": cap}
        with self.db.cursor() as cur:
            return int(cur.execute(statement, params).fetchone()[0])

    def newest_id(self) -> int:
        with self.db.cursor() as cur:
            row = cur.execute(self.dialect.newest_id).fetchone()
        return int(row[0] or 0)

    # -- the allowlist's management ---------------------------------------------------------------------

    def all_job_types(self) -> list[JobType]:
        with self.db.session() as session:
            return list(session.scalars(select(JobType).order_by(JobType.name)))

    def add_job_type(
        self, name: str, description: str, schema: dict[str, Any] | None, *, audit: AuditLog | None = None
    ) -> JobType:
        with self.db.session(write=True) as session, session.begin():
            job_type = JobType(name=name, description=description, payload_schema=schema)
            session.add(job_type)
            if audit is not None:
                session.add(audit)
        return job_type

    def update_job_type(
        self, name: str, changes: JobTypeChanges, *, audit: JobTypeAudit | None = None
    ) -> JobType | None:
        with self.db.session(write=True) as session, session.begin():
            # Locked while it changes (PostgreSQL; SQLite's write lock is taken already): a claim spending
            # the rate limit's bucket in between would otherwise keep tokens a changed rate clears, and two
            # admins changing the rate and its period at once would each write the other's old value.
            job_type = session.scalar(select(JobType).where(JobType.name == name).with_for_update())
            if job_type is None:
                return None
            if callable(changes):
                changes = changes(job_type)
            if audit is not None:
                session.add(audit(job_type, changes))
            for key, value in changes.items():
                setattr(job_type, key, value)
            job_type.updated_at = utcnow()
        return job_type

    def seed_job_types(self, names: list[str]) -> bool:
        with self.db.session() as session:  # a read first: a started database needs no write lock here
            if session.scalar(select(JobType.id).limit(1)) is not None:
                return False
        with self.db.session(write=True) as session, session.begin():
            if session.scalar(select(JobType.id).limit(1)) is not None:
                return False
            for name in names:
                session.add(JobType(name=name, description=""))
        return True

    # -- schedules ---------------------------------------------------------------------------------------

    def all_schedules(self) -> list[Schedule]:
        with self.db.session() as session:
            return list(session.scalars(select(Schedule).order_by(Schedule.name)))

    def get_schedule(self, name: str) -> Schedule | None:
        with self.db.session() as session:
            return session.scalar(select(Schedule).where(Schedule.name == name))

    def add_schedule(self, values: dict[str, Any], *, actor: str, now: datetime) -> Schedule:
        with self.db.session(write=True) as session, session.begin():
            schedule = Schedule(**values, revision=0, created_by=actor, created_at=now, updated_at=now)
            session.add(schedule)
            session.add(AuditLog(at=now, actor=actor, action="schedule.create", target=values["name"]))
        return schedule

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
        guard = [Schedule.name == name] + ([Schedule.revision == revision] if revision is not None else [])
        statement = (
            update(Schedule)
            .where(*guard)
            .values(**changes, revision=Schedule.revision + 1, updated_at=now)
            .returning(Schedule)
        )
        with self.db.session(write=True) as session, session.begin():
            schedule = session.scalars(statement).first()
            if schedule is not None:
                session.add(AuditLog(at=now, actor=actor, action=action, target=name, detail=detail))
        return schedule

    def delete_schedule(self, name: str, *, actor: str, now: datetime) -> bool:
        with self.db.session(write=True) as session, session.begin():
            gone = session.execute(
                delete(Schedule).where(Schedule.name == name).returning(Schedule.id)
            ).first()
            if gone is not None:
                session.add(AuditLog(at=now, actor=actor, action="schedule.delete", target=name))
        return gone is not None

    def due_schedules(self, *, now: datetime, limit: int) -> list[Schedule]:
        statement = (
            select(Schedule)
            .where(Schedule.paused.is_(False), Schedule.next_fire_at <= now)
            .order_by(Schedule.next_fire_at)
            .limit(limit)
        )
        with self.db.session() as session:
            return list(session.scalars(statement))

    def next_schedule_time(self) -> datetime | None:
        statement = (
            select(Schedule.next_fire_at)
            .where(Schedule.paused.is_(False), Schedule.next_fire_at.is_not(None))
            .order_by(Schedule.next_fire_at)
            .limit(1)
        )
        with self.db.session() as session:
            return session.scalars(statement).first()

    # firing -------------------------------------------------------------------------------------

    def fire_schedule(self, firing: Firing, *, now: datetime) -> Fired:
        d = self.dialect
        bind = d.bind_time
        slot, ts = bind(firing.slot), bind(now)
        with self.db.cursor(write=True) as cur:
            if firing.due is None:
                guard = first_row(cur.execute(d.touch_schedule, {"id": firing.schedule_id, "slot": slot}))
            else:
                params = {"id": firing.schedule_id, "revision": firing.revision, "due": bind(firing.due)}
                next_fire = None if firing.next_fire is None else bind(firing.next_fire)
                last = None if firing.job is None else slot  # a slot passed over is not a fire time
                guard = first_row(
                    cur.execute(d.advance_schedule, {**params, "last": last, "next": next_fire})
                )
            if guard is None:
                return Fired(False, None)  # edited, paused, deleted, or fired by another server
            if (
                first_row(cur.execute(d.claim_slot, {"id": firing.schedule_id, "slot": slot, "now": ts}))
                is None
            ):
                return Fired(False, None)  # this slot fired already: the schedule has moved on
            cur.execute(d.forget_slots, {"id": firing.schedule_id, "horizon": bind(firing.forget_before)})
            job = None if firing.job is None else self._insert_fired(cur, firing.owner, firing.job, now)
            if job is not None:
                cur.execute(d.set_slot_job, {"job": job.id, "id": firing.schedule_id, "slot": slot})
            if firing.audit is not None:
                actor, action = firing.audit
                detail = None if job is None else f"job {job.id}"
                audit = {"now": ts, "actor": actor, "action": action, "target": firing.name, "detail": detail}
                cur.execute(d.audit, audit)
        return Fired(True, job)

    def _insert_fired(self, cur: Any, owner: str, new: NewJob, now: datetime) -> JobRecord:
        """Insert a fired slot's job, with its history row, by the engine's own INSERT on ``cur``."""
        raise NotImplementedError
