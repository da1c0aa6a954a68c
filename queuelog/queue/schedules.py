"""Periodic jobs: the policy of schedules (docs/schedules.md). The engines hold the SQL (engines/shared.py).

``Schedules`` checks what admins give (``check``), previews fire times, makes every change through the
engine with its audit row, and fires the schedules that are due (``fire_due``), which the maintenance loop
calls at a short tick. Firing is safe from any number of processes at once: the engine's firing is one
guarded transaction that makes one job per slot, so correctness does not depend on the loop's election.

The loop does not read the schedules at every tick: ``fire_when_due`` keeps the earliest next fire time
of the unpaused schedules (one read) and reads again only when that time comes, when a schedule changes
in this process, or ``RECHECK_SECONDS`` after its last read (a change made by another process: the CLI,
another server). The recheck plus a tick stays within half of ``GRACE`` (``recheck_for``: shorter with a
long tick), so the first slot of a schedule made anywhere fires on time.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from queuelog.engines.records import Fired, Firing, NewJob
from queuelog.models import Schedule
from queuelog.queue.cron import MAX_INTERVAL_SECONDS, Timing, cron_refusal, place_zone, slot_after, upcoming
from queuelog.queue.errors import Code, InvalidValues, JobValidationError, QueueError
from queuelog.queue.spec import JobSpec

if TYPE_CHECKING:
    from queuelog.engines.records import JobRecord
    from queuelog.queue.core import Queue

log = logging.getLogger("queuelog.schedules")

NAME_MAX_LENGTH = 55  # "schedule:" + the name fits a job's owner
NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{NAME_MAX_LENGTH - 1}}}$"
MISSED_POLICIES = ("fire_once", "skip")
OWNER_PREFIX = "schedule:"  # fired jobs' owner (docs/schedules.md, Fired jobs)
GRACE = timedelta(seconds=60)  # a slot fired within this long after its time is on time, not missed
FORGET_AFTER = timedelta(days=7)  # fire rows older than this before the slot being fired are deleted
RECHECK_SECONDS = 30.0  # fire_when_due reads the next fire time again at least this often (<< GRACE)


def recheck_for(tick: float) -> float:
    """How often ``fire_when_due`` must read again at a tick of ``tick`` seconds, so that a change made in
    another process, read at most a recheck and a tick after it was made, is fired within half of ``GRACE``:
    ``RECHECK_SECONDS``, shorter for a long tick, 0 (every tick) from a tick of half ``GRACE`` on."""
    return max(0.0, min(RECHECK_SECONDS, GRACE.total_seconds() / 2 - tick))


class _Changes:
    """How many schedule changes this process has made (any database): a change wakes ``fire_when_due``."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def bump(self) -> None:
        with self._lock:
            self.count += 1


_changes = _Changes()


class ScheduleNotFound(QueueError):
    """No schedule of that name (``Code.SCHEDULE_NOT_FOUND``)."""

    def __init__(self, name: str) -> None:
        super().__init__(Code.SCHEDULE_NOT_FOUND, name=name)


class ScheduleChanging(QueueError):
    """The schedule was edited between each read and the guarded write (``Code.SCHEDULE_CHANGING``)."""

    def __init__(self, name: str) -> None:
        super().__init__(Code.SCHEDULE_CHANGING, name=name)


@dataclass(frozen=True)
class ScheduleValues:
    """What an admin gives for a schedule: exactly one of ``cron`` and ``interval_seconds``."""

    name: str
    type: str
    payload: dict[str, Any]
    priority: int = 0
    max_retries: int = 3
    cron: str | None = None
    interval_seconds: int | None = None
    timezone: str = "UTC"
    missed: str = "fire_once"
    paused: bool = False

    @property
    def timing(self) -> Timing:
        return Timing(self.cron, self.interval_seconds, self.timezone)


def owner_of(name: str) -> str:
    return OWNER_PREFIX + name


def timing_of(schedule: Schedule) -> Timing:
    return Timing(schedule.cron, schedule.interval_seconds, schedule.timezone)


def timing_refusals(
    cron: str | None, interval: int | None, timezone: str, now: datetime | None = None
) -> list[JobValidationError]:
    """What is wrong with a schedule's timing, field by field (none when it is usable). A cron expression
    that matches dates but no time that exists in its zone after ``now`` (``30 2 * 3 SUN#2`` in
    America/New_York, always in the spring-forward gap) can never fire: ``CRON_NEVER``."""
    refusals = []
    tz = place_zone(timezone)
    if (cron is None) == (interval is None):
        refusals.append(JobValidationError(Code.TIMING_NEEDED, field="cron"))
    elif cron is not None and (refusal := cron_refusal(cron)):
        refusals.append(refusal)
    elif cron is not None and tz is not None:
        if slot_after(Timing(cron, None, timezone), now or datetime.now(UTC)) is None:
            refusals.append(JobValidationError(Code.CRON_NEVER, field="cron"))
    elif interval is not None and not 1 <= interval <= MAX_INTERVAL_SECONDS:
        refusals.append(
            JobValidationError(Code.INTERVAL_OUT_OF_RANGE, field="interval_seconds", max=MAX_INTERVAL_SECONDS)
        )
    if tz is None:
        refusals.append(JobValidationError(Code.UNKNOWN_TIMEZONE, field="timezone", timezone=timezone))
    return refusals


class Schedules:
    """Schedules over one ``Queue``: its engine, its allowlist of types and its clock."""

    def __init__(self, queue: Queue, *, recheck_seconds: float = RECHECK_SECONDS):
        self.queue = queue
        self.engine = queue.engine
        # fire_when_due's timer: the earliest next fire time read, when (monotonic) it was read, and the
        # count of this process's changes before that read (-1: never read).
        self.recheck_seconds = recheck_seconds
        self._next: datetime | None = None
        self._read_at = 0.0
        self._seen = -1

    # -- checks and previews ------------------------------------------------------------------------

    def check(self, values: ScheduleValues) -> ScheduleValues:
        """``values`` with the cron expression trimmed, or ``InvalidValues`` naming every bad field
        (the name, the timing, the missed-slot policy, then the type and payload as an enqueue checks them)."""
        refusals = []
        if not re.match(NAME_PATTERN, values.name):
            refusals.append(
                JobValidationError(Code.BAD_SCHEDULE_NAME, field="name", max_length=NAME_MAX_LENGTH)
            )
        cron = None if values.cron is None else values.cron.strip()
        refusals += timing_refusals(cron, values.interval_seconds, values.timezone, self.queue.clock())
        if values.missed not in MISSED_POLICIES:
            refusals.append(
                JobValidationError(Code.BAD_MISSED_POLICY, field="missed", allowed=list(MISSED_POLICIES))
            )
        try:
            self.queue.types.check([self._spec(values)])
        except JobValidationError as exc:
            refusals.append(exc)
        if refusals:
            raise InvalidValues(refusals)
        return ScheduleValues(**{**asdict(values), "cron": cron})

    @staticmethod
    def _spec(values: ScheduleValues | Schedule) -> JobSpec:
        payload_json = json.dumps(values.payload, separators=(",", ":"), ensure_ascii=False)
        return JobSpec(values.type, values.payload, payload_json, values.priority, values.max_retries)

    def preview(self, timing: Timing, count: int = 5) -> list[datetime]:
        """The next ``count`` fire times of ``timing`` from now (for a usable timing)."""
        return upcoming(timing, self.queue.clock(), count)

    def upcoming(self, schedule: Schedule, count: int = 5) -> list[datetime]:
        """A saved schedule's next ``count`` fire times, from its stored next fire time (none if paused)."""
        first = schedule.next_fire_at
        if schedule.paused or first is None:
            return []
        return [first, *upcoming(timing_of(schedule), first, count - 1, first)]

    # -- management ---------------------------------------------------------------------------------

    def all(self) -> list[Schedule]:
        return self.engine.all_schedules()

    def get(self, name: str) -> Schedule:
        schedule = self.engine.get_schedule(name)
        if schedule is None:
            raise ScheduleNotFound(name)
        return schedule

    def add(self, values: ScheduleValues, actor: str) -> Schedule:
        """Add a checked schedule; a taken name is ``SCHEDULE_EXISTS`` on ``name``."""
        from sqlalchemy.exc import IntegrityError

        values = self.check(values)
        now = self.queue.clock()
        row = {**asdict(values), "next_fire_at": slot_after(values.timing, now)}
        try:
            added = self.engine.add_schedule(row, actor=actor, now=now)
            _changes.bump()
            return added
        except IntegrityError:
            if self.engine.get_schedule(values.name) is None:
                raise  # not the name: another constraint refused the change
            raise JobValidationError(Code.SCHEDULE_EXISTS, field="name", name=values.name) from None

    def update(self, name: str, values: ScheduleValues, actor: str) -> Schedule:
        """Replace a schedule's settings (its name stays); the next fire time is worked out anew."""
        values = self.check(ScheduleValues(**{**asdict(values), "name": name}))
        now = self.queue.clock()
        changes = {k: v for k, v in asdict(values).items() if k != "name"}
        current = self.get(name)
        changed = sorted(k for k, v in changes.items() if getattr(current, k) != v)  # for the audit log only
        changes["next_fire_at"] = slot_after(values.timing, now)
        return self._changed(name, changes, actor, "schedule.update", now, ", ".join(changed) or None)

    def pause(self, name: str, actor: str) -> Schedule:
        return self._changed(name, {"paused": True}, actor, "schedule.pause", self.queue.clock())

    def resume(self, name: str, actor: str) -> Schedule:
        """Unpause; the next fire time is the first slot from now (slots passed while paused never fire)."""
        now = self.queue.clock()
        for _ in range(5):  # an edit between the read and the guarded write: read again
            schedule = self.get(name)
            changes = {"paused": False, "next_fire_at": slot_after(timing_of(schedule), now)}
            done = self.engine.update_schedule(
                name, changes, actor=actor, action="schedule.resume", now=now, revision=schedule.revision
            )
            if done is not None:
                _changes.bump()
                return done
        raise ScheduleChanging(name)

    def _changed(
        self,
        name: str,
        changes: dict[str, Any],
        actor: str,
        action: str,
        now: datetime,
        detail: str | None = None,
    ) -> Schedule:
        schedule = self.engine.update_schedule(
            name, changes, actor=actor, action=action, now=now, detail=detail
        )
        if schedule is None:
            raise ScheduleNotFound(name)
        _changes.bump()
        return schedule

    def delete(self, name: str, actor: str) -> None:
        """Delete a schedule; the jobs it made stay."""
        if not self.engine.delete_schedule(name, actor=actor, now=self.queue.clock()):
            raise ScheduleNotFound(name)
        _changes.bump()

    def run_now(self, name: str, actor: str) -> JobRecord:
        """Enqueue one job of the schedule now, outside its timing (its next fire time stays)."""
        schedule = self.get(name)
        self.queue.types.check([self._spec(schedule)])  # the type may have been disabled since
        now = self.queue.clock()
        firing = Firing(
            schedule.id, name, now, None, None, None, self._new_job(schedule, now), owner_of(name),
            now - FORGET_AFTER, (actor, "schedule.run"),
        )  # fmt: skip
        fired = self.engine.fire_schedule(firing, now=now)
        if fired.job is None:
            raise ScheduleNotFound(name)
        self.queue.ready([fired.job])
        return fired.job

    # -- firing -------------------------------------------------------------------------------------

    def _new_job(self, schedule: Schedule, now: datetime) -> NewJob:
        return self._spec(schedule).new_job(now)

    def plan(self, schedule: Schedule, now: datetime) -> tuple[datetime | None, datetime | None]:
        """For a due schedule: the slot to fire now (None: the missed slots are passed over without a job)
        and the next fire time, which may be due as well (docs/schedules.md, Missed slots).

        A slot less than ``GRACE`` before ``now`` is on time: it fires on its own, and the schedule moves
        to the slot after it, so that every on-time slot fires even when a tick comes later than the
        interval. Older slots are missed: ``fire_once`` makes one job for them all (keyed by the first),
        ``skip`` none; either way the schedule moves to its first on-time slot."""
        timing, slot = timing_of(schedule), schedule.next_fire_at
        assert slot is not None
        if slot > now - GRACE:
            return slot, slot_after(timing, slot, slot)
        on_time = slot_after(timing, now - GRACE, slot)  # the first slot not missed (it may be due)
        if schedule.missed == "fire_once":
            return slot, on_time
        if on_time is not None and on_time <= now:  # skip, with a slot on time: fire that one now
            return on_time, slot_after(timing, on_time, on_time)
        return None, on_time

    def fire_when_due(self) -> list[Fired]:
        """``fire_due`` for the maintenance loop's tick, without reading the schedules at every tick.

        It reads the earliest next fire time of the unpaused schedules (one read) and, until that time,
        reads nothing, unless a schedule changed in this process since that read (``add``, ``update``,
        ``pause``, ``resume``, ``delete``) or the read is ``recheck_seconds`` old: a schedule added or
        changed by another process is seen within that, and its first slot still fires within ``GRACE``.
        When the time comes it fires what is due and reads the next time. A failed read changes nothing
        known, so the next tick reads again."""
        changes, started = _changes.count, time.monotonic()  # before the read: a later change reads anew
        stale = changes != self._seen or started - self._read_at >= self.recheck_seconds
        if stale:
            self._next = self.engine.next_schedule_time()
            self._seen, self._read_at = changes, started
        if self._next is None or self._next > self.queue.clock():
            return []
        fired = self.fire_due()
        self._next = self.engine.next_schedule_time()
        self._seen, self._read_at = changes, started
        return fired

    def fire_due(self, batch: int = 100) -> list[Fired]:
        """Fire every slot due now, each on-time slot on its own, and return what each firing did.

        Due schedules are read ``batch`` at a time, soonest first, and read again after each batch (a
        schedule fired may have its next slot due too) until none is due at the time the call began, or
        a batch fired nothing (another server fires them, and goes on until none is due). The slots due
        are finite, so the call ends; a schedule edited in between is read again."""
        began = self.queue.clock()
        out: list[Fired] = []
        while True:
            batch_fired = [
                self._fire(s, self.queue.clock()) for s in self.engine.due_schedules(now=began, limit=batch)
            ]
            out += batch_fired
            if not any(f.fired for f in batch_fired):
                return out

    def _fire(self, schedule: Schedule, now: datetime) -> Fired:
        """Fire a due schedule's slot as ``plan`` says, in one guarded transaction of the engine."""
        due = schedule.next_fire_at
        if due is None:  # never due (due_schedules reads none such): a firing without it would be "run now"
            return Fired(False, None)
        slot, following = self.plan(schedule, now)
        job = None
        if slot is not None:
            try:
                self.queue.types.check([self._spec(schedule)])
                job = self._new_job(schedule, now)
            except JobValidationError as exc:
                log.warning("schedule %s: slot %s passed over: %s", schedule.name, slot, exc)
        firing = Firing(
            schedule.id, schedule.name, slot or due, due,
            schedule.revision, following,
            job, owner_of(schedule.name), (slot or now) - FORGET_AFTER,
        )  # fmt: skip
        fired = self.engine.fire_schedule(firing, now=now)
        if fired.job is not None:
            self.queue.ready([fired.job])
        return fired
