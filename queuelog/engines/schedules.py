"""The schedules' operations (``ScheduleEngine``), shared by both engines.

Managing schedules goes through the ORM models, which speak either database, with the audit row in the
same transaction. Firing a slot is one transaction of plain statements on the engine's own cursor
(``Database.cursor``): the guarded UPDATE of the schedule, the insert of the (schedule, slot) row that
makes the slot fire once, and the job, inserted by the engine's own job INSERT with its history row, so
that counts and history are those of any enqueued job (docs/schedules.md, Exactly once).
"""

from __future__ import annotations

from datetime import datetime
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from sqlalchemy import delete, select, update

from queuelog.db import Database
from queuelog.engines.base import JobRecord
from queuelog.engines.records import NewJob
from queuelog.models import AuditLog, Schedule

# Written once with ``:name`` parameters; ``Database.sql`` rewrites them for psycopg.
_ADVANCE = (
    "UPDATE schedules SET next_fire_at = :next, last_fire_at = COALESCE(:last, last_fire_at) WHERE id = :id AND revision = :revision"
    " AND next_fire_at = :due AND NOT paused RETURNING id"
)
_TOUCH = "UPDATE schedules SET last_fire_at = :slot WHERE id = :id RETURNING id"  # "run now": it exists
_CLAIM_SLOT = (
    "INSERT INTO schedule_fires (schedule_id, slot_at, job_id, fired_at) VALUES (:id, :slot, NULL, :now)"
    " ON CONFLICT DO NOTHING RETURNING schedule_id"
)
_SET_JOB = "UPDATE schedule_fires SET job_id = :job WHERE schedule_id = :id AND slot_at = :slot"
_FORGET = "DELETE FROM schedule_fires WHERE schedule_id = :id AND slot_at < :horizon"
_AUDIT = "INSERT INTO audit_log (at, actor, action, target, detail) VALUES (:now, :actor, :action, :target, :detail)"


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


def _first(cur: Any) -> Any:
    rows = cur.fetchall()  # SQLite finishes a RETURNING statement only when stepped to the end
    return rows[0] if rows else None


class ScheduleEngine(Protocol):
    """The schedules' operations (docs/schedules.md), which both engines have beside ``QueueEngine``'s
    (queuelog/engines/schedules.py). Every change writes its ``audit_log`` row in its own transaction."""

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

    def fire_schedule(self, firing: Firing, *, now: datetime) -> Fired:
        """Fire one slot in one transaction: the guarded UPDATE of the schedule (due at that revision and
        slot; for "run now", that it exists), the (schedule, slot) row, the job and its history row. Two
        firings of one slot, from any number of servers at once, make one job."""
        ...


class ScheduleOps:
    """Schedules on the engine's database (``QueueEngine``'s schedule operations)."""

    db: Database
    sql: ModuleType
    name: str

    # -- management ---------------------------------------------------------------------------------

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

    # -- firing -------------------------------------------------------------------------------------

    def fire_schedule(self, firing: Firing, *, now: datetime) -> Fired:
        bind = self.sql.bind_time
        slot, ts = bind(firing.slot), bind(now)
        sql = self.db.sql
        with self.db.cursor(write=True) as cur:
            if firing.due is None:
                guard = _first(cur.execute(sql(_TOUCH), {"id": firing.schedule_id, "slot": slot}))
            else:
                params = {"id": firing.schedule_id, "revision": firing.revision, "due": bind(firing.due)}
                next_fire = None if firing.next_fire is None else bind(firing.next_fire)
                last = None if firing.job is None else slot  # a slot passed over is not a fire time
                guard = _first(cur.execute(sql(_ADVANCE), {**params, "last": last, "next": next_fire}))
            if guard is None:
                return Fired(False, None)  # edited, paused, deleted, or fired by another server
            if (
                _first(cur.execute(sql(_CLAIM_SLOT), {"id": firing.schedule_id, "slot": slot, "now": ts}))
                is None
            ):
                return Fired(False, None)  # this slot fired already: the schedule has moved on
            cur.execute(sql(_FORGET), {"id": firing.schedule_id, "horizon": bind(firing.forget_before)})
            job = None if firing.job is None else self._insert_fired(cur, firing.owner, firing.job, now)
            if job is not None:
                cur.execute(sql(_SET_JOB), {"job": job.id, "id": firing.schedule_id, "slot": slot})
            if firing.audit is not None:
                actor, action = firing.audit
                detail = None if job is None else f"job {job.id}"
                audit = {"now": ts, "actor": actor, "action": action, "target": firing.name, "detail": detail}
                cur.execute(sql(_AUDIT), audit)
        return Fired(True, job)

    def _insert_fired(self, cur: Any, owner: str, new: NewJob, now: datetime) -> JobRecord:
        """Insert the job with the engine's own INSERT (and, on SQLite, its history row, which the
        PostgreSQL statement writes itself)."""
        params = {
            "type": new.type,
            "payload": self.sql.bind_json(new.payload_json),
            "priority": new.priority,
            "max_retries": new.max_retries,
            "key": None,
            "fingerprint": None,
            "owner": owner,
            "available_at": self.sql.bind_time(new.available_at),
            "now": self.sql.bind_time(now),
        }
        job = self.sql.decode_job(_first(cur.execute(self.sql.INSERT, params)))
        if self.name == "sqlite":
            cur.execute(self.sql.EVENT, (job.id, params["now"], "enqueued", owner, 0, None))
        return job
