"""Schedules' policy (queuelog/queue/schedules.py) on both engines, with an injectable clock: checks,
firing on time (every on-time slot once, however late the tick), missed slots after downtime, pause and
resume, "run now", and two app servers (threads, then processes) firing the same schedules at once."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from queuelog import create_app
from queuelog.db import Database
from queuelog.models import Schedule, ScheduleFire
from queuelog.queue import Code, JobValidationError, Queue
from queuelog.queue.errors import each_refusal
from queuelog.queue.schedules import (
    GRACE,
    RECHECK_SECONDS,
    ScheduleNotFound,
    Schedules,
    ScheduleValues,
    recheck_for,
)
from tests.conftest import TEST_SETTINGS
from tests.queue.conftest import Clock

START = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def clock():
    return Clock()


def schedules_on(db: Database, clock: Clock) -> Schedules:
    return Schedules(Queue(db, clock=clock))


@pytest.fixture
def db(app):
    return app.extensions["queuelog"]["db"]


@pytest.fixture
def sched(db, clock) -> Schedules:
    return schedules_on(db, clock)


def daily(name: str = "nightly", **kw) -> ScheduleValues:
    return ScheduleValues(
        **({"name": name, "type": "email", "payload": {"to": "a@b.c"}, "cron": "0 3 * * *"} | kw)
    )


def jobs_of(sched: Schedules, name: str = "nightly", limit: int = 100):
    return sched.queue.list_jobs(owner=f"schedule:{name}", limit=limit)


def every_second(name: str = "tick", **kw) -> ScheduleValues:
    return daily(name, **({"cron": None, "interval_seconds": 1} | kw))


def seconds(*numbers: int) -> list[datetime]:
    return [START + timedelta(seconds=n) for n in numbers]


def fires(db: Database, name: str) -> list[tuple[datetime, int | None]]:
    """The slots a schedule fired (or passed over), each with its job, in order."""
    statement = (
        select(ScheduleFire.slot_at, ScheduleFire.job_id)
        .join(Schedule, Schedule.id == ScheduleFire.schedule_id)
        .where(Schedule.name == name)
        .order_by(ScheduleFire.slot_at)
    )
    with db.session() as session:
        return [(slot, job) for slot, job in session.execute(statement)]


def assert_each_slot_once(sched: Schedules, name: str, slots: list[datetime]) -> None:
    """Each of ``slots`` fired once with a job of its own, and the schedule made no other job: every
    on-time slot fired, and none twice."""
    fired = fires(sched.queue.db, name)
    assert [slot for slot, _ in fired] == slots
    jobs = sorted(job.id for job in jobs_of(sched, name, limit=1000))
    assert sorted(job for _, job in fired) == jobs and len(jobs) == len(slots)


def refused(sched: Schedules, values: ScheduleValues) -> dict[str, Code]:
    """The refused fields and their codes, each refusal at once."""
    with pytest.raises(JobValidationError) as caught:
        sched.add(values, "ada")
    return {r.field: r.code for r in each_refusal(caught.value)}


def test_bad_input_names_the_field(sched):
    sched.queue.types.add(
        "report", "", {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}
    )
    sched.queue.types.add("old", "")
    sched.queue.types.update("old", enabled=False)
    assert refused(sched, daily(cron="61 * * * *")) == {"cron": Code.CRON_INVALID}
    assert refused(sched, daily(cron="* * *")) == {"cron": Code.CRON_FIELDS}
    assert refused(sched, daily(cron=None)) == {"cron": Code.TIMING_NEEDED}  # neither cron nor interval
    assert refused(sched, daily(interval_seconds=60)) == {"cron": Code.TIMING_NEEDED}  # both
    assert refused(sched, daily(cron=None, interval_seconds=0)) == {
        "interval_seconds": Code.INTERVAL_OUT_OF_RANGE
    }
    assert refused(sched, daily(cron=None, interval_seconds=-5)) == {
        "interval_seconds": Code.INTERVAL_OUT_OF_RANGE
    }
    assert refused(sched, daily(timezone="Mars/Olympus_Mons")) == {"timezone": Code.UNKNOWN_TIMEZONE}
    assert refused(sched, daily(type="nope")) == {"type": Code.UNKNOWN_TYPE}
    assert refused(sched, daily(type="old")) == {"type": Code.UNKNOWN_TYPE}
    with pytest.raises(JobValidationError) as caught:
        sched.add(daily(type="report", payload={}), "ada")
    assert (caught.value.code, caught.value.field) == (Code.SCHEMA_MISMATCH, "payload")
    assert caught.value.params == {"reason": '"day" is a required property'}
    assert refused(sched, daily(type="report", payload={"day": 3})) == {"payload.day": Code.SCHEMA_MISMATCH}
    assert refused(sched, daily(name="bad name")) == {"name": Code.BAD_SCHEDULE_NAME}
    assert refused(sched, daily(missed="sometimes")) == {"missed": Code.BAD_MISSED_POLICY}
    sched.add(daily(), "ada")
    assert refused(sched, daily()) == {"name": Code.SCHEDULE_EXISTS}
    assert [s.name for s in sched.all()] == ["nightly"]


def test_every_bad_field_is_refused_at_once(sched):
    bad = daily(name="-x", cron=None, timezone="Nowhere", missed="never", type="nope")
    assert refused(sched, bad) == {
        "name": Code.BAD_SCHEDULE_NAME,
        "cron": Code.TIMING_NEEDED,
        "timezone": Code.UNKNOWN_TIMEZONE,
        "missed": Code.BAD_MISSED_POLICY,
        "type": Code.UNKNOWN_TYPE,
    }
    assert sched.all() == []


# Zone names the database has that are no place: the server's own zone, its defaults file, "no zone",
# the leap-second copy, old names without an area, fixed offsets, the POSIX copy.
NO_PLACE = ["localtime", "Factory", "posixrules", "right/UTC", "EST", "GMT", "Etc/UTC", "Etc/GMT+5",
            "posix/Europe/Berlin"]  # fmt: skip


def test_zones_that_are_no_place_are_refused_and_places_accepted(sched):
    for name in NO_PLACE:
        assert refused(sched, daily(timezone=name)) == {"timezone": Code.UNKNOWN_TIMEZONE}, name
    assert sched.all() == []
    for name, utc_hour in [("Europe/Berlin", 2), ("America/New_York", 8), ("UTC", 3)]:  # 03:00 there
        added = sched.add(daily(name.replace("/", "-"), timezone=name), "ada")
        assert added.next_fire_at == START.replace(hour=utc_hour) + timedelta(days=1), name


def test_a_cron_that_can_never_fire_in_its_zone_is_refused(sched):
    """The second Sunday of March at 02:30 is always in New York's spring-forward gap; not in Berlin's."""
    never = daily(cron="30 2 * 3 SUN#2", timezone="America/New_York")
    assert refused(sched, never) == {"cron": Code.CRON_NEVER}
    assert refused(sched, daily(cron="30 2 * 3 SUN#2", timezone="localtime")) == {
        "timezone": Code.UNKNOWN_TIMEZONE
    }
    berlin = sched.add(daily(cron="30 2 * 3 SUN#2", timezone="Europe/Berlin"), "ada")
    assert berlin.next_fire_at == datetime(2030, 3, 10, 1, 30, tzinfo=UTC)  # 02:30 CET
    with pytest.raises(JobValidationError) as caught:
        sched.update("nightly", never, "ada")
    assert (caught.value.code, caught.value.field) == (Code.CRON_NEVER, "cron")
    assert sched.get("nightly").timezone == "Europe/Berlin"


def test_aliases_and_intervals(sched, clock):
    assert sched.add(daily("a", cron="@hourly"), "ada").next_fire_at == START + timedelta(hours=1)
    assert sched.add(daily("b", cron="@daily"), "ada").next_fire_at == START + timedelta(hours=12)
    every = sched.add(daily("c", cron=None, interval_seconds=90), "ada")
    assert every.next_fire_at == START + timedelta(seconds=90)


def test_a_slot_fires_on_time_once_and_the_schedule_moves_on(sched, clock):
    sched.add(daily(), "ada")
    clock.now = START.replace(hour=3) + timedelta(days=1, seconds=2)
    assert [f.fired for f in sched.fire_due()] == [True]
    assert sched.fire_due() == []  # nothing due any more
    (job,) = jobs_of(sched)
    assert job.owner == "schedule:nightly" and json.loads(job.payload) == {"to": "a@b.c"}
    schedule = sched.get("nightly")
    assert schedule.last_fire_at == START.replace(hour=3) + timedelta(days=1)
    assert schedule.next_fire_at == START.replace(hour=3) + timedelta(days=2)


@pytest.mark.parametrize(("missed", "jobs"), [("fire_once", 1), ("skip", 0)])
def test_missed_slots_after_downtime(sched, clock, missed, jobs):
    sched.add(daily(missed=missed), "ada")
    clock.now = START + timedelta(days=3, hours=1)  # three 03:00 slots passed while nothing ran
    sched.fire_due()
    assert len(jobs_of(sched)) == jobs
    assert sched.get("nightly").next_fire_at == START.replace(hour=3) + timedelta(days=4)
    clock.now = START.replace(hour=3) + timedelta(days=4, seconds=1)  # back to normal: on time
    sched.fire_due()
    assert len(jobs_of(sched)) == jobs + 1


def test_skip_still_fires_a_slot_within_the_grace(sched, clock):
    sched.add(daily("often", cron="* * * * *", missed="skip"), "ada")
    clock.now = START + timedelta(minutes=10, seconds=20)  # ten slots; the last one 20 s ago
    (fired,) = sched.fire_due()
    assert fired.job is not None and fired.job.created_at == clock.now
    assert sched.get("often").last_fire_at == START + timedelta(minutes=10)
    assert sched.get("often").next_fire_at == START + timedelta(minutes=11)


def test_every_on_time_slot_fires_when_ticks_are_slower_than_the_interval(sched, clock):
    """A 1 s interval and a tick every 2 s (QUEUELOG_SCHEDULE_TICK=2): each tick fires both slots due."""
    sched.add(every_second(), "ada")
    for tick in range(1, 11):
        clock.now = START + timedelta(seconds=2 * tick)
        assert [f.fired for f in sched.fire_due()] == [True, True]
    assert sched.fire_due() == []  # none twice
    assert_each_slot_once(sched, "tick", seconds(*range(1, 21)))
    assert sched.get("tick").next_fire_at == START + timedelta(seconds=21)


@pytest.mark.parametrize("missed", ["fire_once", "skip"])
def test_a_late_tick_fires_each_slot_still_on_time(sched, clock, missed):
    """A tick 45 s late (a busy server): the slots of the last 60 s fire each, whatever the policy."""
    sched.add(daily("poll", cron=None, interval_seconds=15, missed=missed), "ada")
    clock.now = START + timedelta(seconds=15)
    sched.fire_due()
    clock.now = START + timedelta(seconds=75)  # 30 s is 45 s ago: on time, as are 45, 60 and 75 s
    assert len(sched.fire_due()) == 4
    assert_each_slot_once(sched, "poll", seconds(15, 30, 45, 60, 75))


@pytest.mark.parametrize(("missed", "merged"), [("fire_once", 1), ("skip", 0)])
def test_downtime_longer_than_the_window_applies_the_policy_to_the_missed_slots_only(
    sched, clock, missed, merged
):
    """Slots 10, 20, ... 300 s; down until 300 s: those up to 240 s are missed, 250 to 300 on time."""
    sched.add(daily("poll", cron=None, interval_seconds=10, missed=missed), "ada")
    clock.now = START + timedelta(seconds=300)
    sched.fire_due()
    on_time = seconds(250, 260, 270, 280, 290, 300)
    fired = fires(sched.queue.db, "poll")
    assert [slot for slot, _ in fired] == seconds(10)[:merged] + on_time  # the merged job keyed by 10 s
    assert all(job is not None for _, job in fired) and len(jobs_of(sched, "poll")) == merged + 6
    assert sched.get("poll").next_fire_at == START + timedelta(seconds=310)
    clock.now = START + timedelta(seconds=311)
    sched.fire_due()
    assert len(jobs_of(sched, "poll")) == merged + 7


def test_many_due_schedules_are_all_fired_in_one_tick_none_merged(sched, clock):
    """150 schedules with two slots due each: the batches of 100 are read until none is due."""
    for i in range(150):
        sched.add(every_second(f"s{i:03d}"), "ada")
    clock.now = START + timedelta(seconds=2)
    fired = sched.fire_due()
    assert len(fired) == 300 and all(f.fired and f.job is not None for f in fired)
    assert sched.fire_due() == []
    for i in (0, 99, 100, 149):
        assert_each_slot_once(sched, f"s{i:03d}", seconds(1, 2))
    assert len(sched.queue.list_jobs(limit=1000)) == 300


def test_a_disabled_type_passes_the_slot_over(sched, clock):
    sched.add(daily(), "ada")
    sched.queue.types.update("email", enabled=False)
    clock.now = START.replace(hour=3) + timedelta(days=1)
    assert [(f.fired, f.job) for f in sched.fire_due()] == [(True, None)]
    assert jobs_of(sched) == [] and sched.get("nightly").next_fire_at > clock.now


def test_pause_resume_and_run_now(sched, clock):
    sched.add(daily(), "ada")
    sched.pause("nightly", "ada")
    clock.now = START + timedelta(days=2)
    assert sched.fire_due() == []
    resumed = sched.resume("nightly", "bob")
    assert not resumed.paused and resumed.next_fire_at == START.replace(hour=3) + timedelta(days=3)
    assert sched.fire_due() == []  # slots passed while paused never fire
    job = sched.run_now("nightly", "bob")
    assert job.owner == "schedule:nightly" and job.available_at == clock.now
    assert sched.get("nightly").next_fire_at == START.replace(hour=3) + timedelta(days=3)
    with pytest.raises(ScheduleNotFound):
        sched.run_now("nope", "bob")
    sched.delete("nightly", "ada")
    with pytest.raises(ScheduleNotFound):
        sched.delete("nightly", "ada")
    assert len(jobs_of(sched)) == 1  # its jobs stay


def test_update_replaces_the_settings_and_the_next_time(sched, clock):
    sched.add(daily(), "ada")
    changed = sched.update("nightly", daily(cron=None, interval_seconds=600, priority=20), "bob")
    assert (changed.cron, changed.interval_seconds, changed.priority) == (None, 600, 20)
    assert changed.next_fire_at == START + timedelta(seconds=600) and changed.revision == 1
    with sched.queue.db.cursor() as cur:
        audit = cur.execute("SELECT actor, action, detail FROM audit_log ORDER BY id DESC LIMIT 1").fetchall()
    assert tuple(audit[0]) == ("bob", "schedule.update", "cron, interval_seconds, priority")
    with pytest.raises(ScheduleNotFound):
        sched.update("nope", daily(), "bob")


@pytest.mark.parametrize(
    ("values", "step", "tick"),
    [
        (daily("often", cron="* * * * *"), timedelta(minutes=1), timedelta(minutes=1)),
        (every_second("often"), timedelta(seconds=1), timedelta(seconds=2)),  # a tick slower than the step
    ],
    ids=["cron-every-minute", "interval-1s-tick-2s"],
)
def test_two_app_servers_firing_at_once_fire_every_slot_once(db, clock, values, step, tick):
    """Two servers, each with its own connections, fire at the same instants."""
    url = db.url.render_as_string(hide_password=False)
    servers = [Database(url), Database(url)]
    apps = [schedules_on(server, clock) for server in servers]
    apps[0].add(values, "ada")
    for n in range(1, 6):
        clock.now = START + n * tick + timedelta(milliseconds=1)
        start = threading.Barrier(len(apps))

        def fire(app: Schedules, start: threading.Barrier) -> None:
            start.wait()
            app.fire_due()

        threads = [threading.Thread(target=fire, args=(app, start)) for app in apps]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for server in servers:
        server.dispose()
    assert_each_slot_once(
        schedules_on(db, clock), "often", [START + n * step for n in range(1, 5 * tick // step + 1)]
    )


def _server_process(url: str, start_at: float, ticks: int, lag: float) -> int:
    """One app server's process: its own Database and Schedules, firing at wall-clock instants shared
    with the other process; its clock says tick k is START + 2k s (plus ``lag``): a tick every 2 s."""
    import time

    from tests.queue.conftest import Clock

    clock = Clock()
    server = Database(url)
    app = schedules_on(server, clock)
    made = 0
    try:
        for tick in range(1, ticks + 1):
            time.sleep(max(0.0, start_at + tick * 0.25 - time.time()))
            clock.now = START + timedelta(seconds=2 * tick + lag)
            made += sum(1 for fired in app.fire_due() if fired.job is not None)
    finally:
        server.dispose()
    return made


@pytest.mark.slow  # processes racing
def test_two_server_processes_fire_every_slot_once(db, clock):
    """Two processes on one database (SQLite file or PostgreSQL) fire a 1 s interval at a 2 s tick."""
    import multiprocessing
    import time

    sched = schedules_on(db, clock)
    sched.add(every_second(), "ada")
    url = db.url.render_as_string(hide_password=False)
    start_at = time.time() + 2  # after both processes have started and imported
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        made = pool.starmap(_server_process, [(url, start_at, 6, 0.0), (url, start_at, 6, 0.001)])
    assert sum(made) == 12
    assert_each_slot_once(sched, "tick", seconds(*range(1, 13)))


def test_the_maintenance_loop_fires_schedules_and_prunes(app):
    """The elected loop, on the real clock: an every-second schedule makes jobs, pruning still runs."""
    from queuelog.maintenance import start_maintenance

    real = app.extensions["queuelog"]["schedules"]
    real.add(daily("tick", cron=None, interval_seconds=1), "ada")
    stop = threading.Event()
    thread = start_maintenance(
        app, real.queue, timedelta(days=1), interval=0.05, stop=stop, schedules=real, tick=0.05
    )
    deadline = datetime.now(UTC) + timedelta(seconds=10)
    while len(jobs_of(real, "tick")) < 2 and datetime.now(UTC) < deadline:
        threading.Event().wait(0.05)
    stop.set()
    thread.join(5)
    jobs = jobs_of(real, "tick")
    assert len(jobs) >= 2 and all(job.owner == "schedule:tick" for job in jobs)
    assert real.get("tick").last_fire_at is not None


# -- the maintenance tick's timer (fire_when_due) -----------------------------------------------------


class ScheduleReads:
    """Every statement that names the schedules table, on the real engines of ``db``."""

    def __init__(self, db: Database):
        from sqlalchemy import event

        self.statements: list[str] = []
        self._engines = {id(e): e for e in (db.engine, db.write_engine)}.values()
        for engine in self._engines:
            event.listen(engine, "before_cursor_execute", self._seen)
        self._event = event

    def _seen(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if "schedules" in statement:
            self.statements.append(statement)

    def close(self) -> None:
        for engine in self._engines:
            self._event.remove(engine, "before_cursor_execute", self._seen)


@pytest.fixture
def reads(db):
    counter = ScheduleReads(db)
    yield counter
    counter.close()


def test_the_tick_reads_no_schedule_until_one_is_due(sched, clock, reads):
    clock.now = START
    sched.add(daily(), "ada")  # next: 03:00 tomorrow
    sched.add(daily("paused-soon", cron=None, interval_seconds=5, paused=True), "ada")
    assert sched.fire_when_due() == []
    reads.statements.clear()
    for _ in range(100):  # 100 ticks, 10 minutes: nothing is due
        clock.advance(6)
        assert sched.fire_when_due() == []
    assert reads.statements == []
    clock.now = START.replace(hour=3) + timedelta(days=1, seconds=1)
    assert [f.job is not None for f in sched.fire_when_due()] == [True]
    assert len(jobs_of(sched)) == 1 and reads.statements
    reads.statements.clear()
    clock.advance(1)
    assert sched.fire_when_due() == [] and reads.statements == []  # the next slot is tomorrow's


def test_the_tick_reads_again_after_recheck_seconds(db, clock, reads):
    sched = Schedules(Queue(db, clock=clock), recheck_seconds=0.2)
    clock.now = START
    sched.add(daily(), "ada")
    sched.fire_when_due()
    reads.statements.clear()
    sched.fire_when_due()
    assert reads.statements == []
    threading.Event().wait(0.25)
    sched.fire_when_due()
    assert len(reads.statements) == 1


@pytest.mark.parametrize("change", ["add", "update", "resume"])
def test_a_change_in_this_process_is_seen_at_the_next_tick(db, clock, change):
    """Another ``Schedules`` of this process (the API's, the console's) changes a schedule: the loop's
    next tick reads again, without waiting for its recheck, and the first slot fires on time."""
    loop = Schedules(Queue(db, clock=clock), recheck_seconds=1e9)
    api = schedules_on(db, clock)
    clock.now = START
    if change != "add":
        api.add(daily("soon", paused=change == "resume"), "ada")
    assert loop.fire_when_due() == []
    if change == "add":
        api.add(every_second("soon", interval_seconds=10), "ada")
    elif change == "update":
        api.update("soon", every_second("soon", interval_seconds=10), "ada")
    else:
        api.update("soon", every_second("soon", interval_seconds=10, paused=True), "ada")
        assert loop.fire_when_due() == []
        api.resume("soon", "ada")
    clock.now = START + timedelta(seconds=10, milliseconds=5)
    (fired,) = loop.fire_when_due()
    assert fired.job is not None and loop.get("soon").last_fire_at == START + timedelta(seconds=10)


def test_a_deleted_schedule_is_forgotten_at_the_next_tick(sched, clock, reads):
    clock.now = START
    sched.add(every_second("soon", interval_seconds=10), "ada")
    sched.fire_when_due()
    sched.delete("soon", "ada")
    clock.advance(11)
    assert sched.fire_when_due() == []
    reads.statements.clear()
    clock.advance(11)
    assert sched.fire_when_due() == [] and reads.statements == []  # no schedule left: nothing to read


def _add_elsewhere(url: str, values: ScheduleValues, now: datetime) -> None:
    """Another process (the CLI, another server) adds a schedule at ``now`` on its clock."""
    from tests.queue.conftest import Clock

    clock = Clock()
    clock.now = now
    server = Database(url)
    try:
        schedules_on(server, clock).add(values, "ada")
    finally:
        server.dispose()


@pytest.mark.slow  # a process of its own
@pytest.mark.parametrize("missed", ["skip", "fire_once"])
def test_a_schedule_added_by_another_process_fires_its_first_slot_on_time(db, clock, missed):
    """No signal reaches this process: the recheck finds the schedule, still inside the on-time window
    (with ``skip``, a slot found late would make no job)."""
    import multiprocessing

    loop = Schedules(Queue(db, clock=clock), recheck_seconds=0.5)
    clock.now = START
    assert loop.fire_when_due() == []
    values = every_second("elsewhere", interval_seconds=10, missed=missed)
    url = db.url.render_as_string(hide_password=False)
    proc = multiprocessing.get_context("spawn").Process(target=_add_elsewhere, args=(url, values, START))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    threading.Event().wait(0.55)
    # The loop's clock as late as the recheck allows at most (RECHECK_SECONDS plus a tick) after the
    # first slot (START + 10 s): that slot and each one since fire on their own.
    clock.now = START + timedelta(seconds=10 + RECHECK_SECONDS + 1)
    assert all(f.job is not None for f in loop.fire_when_due())
    assert_each_slot_once(loop, "elsewhere", seconds(*range(10, 11 + int(RECHECK_SECONDS) + 1, 10)))


@pytest.mark.parametrize("tick", [0.05, 1, 5, 29, 30, 45, 120])
def test_the_recheck_and_a_tick_stay_inside_the_on_time_window(tick):
    """A change made elsewhere is read at most a recheck and a tick after it: within half the window for
    every tick below half of it, and never later than a tick (as when every tick read)."""
    late = recheck_for(tick) + tick
    assert late <= max(GRACE.total_seconds() / 2, tick)


@pytest.mark.parametrize(("tick", "recheck"), [(1, 29.0), (25, 5.0), (45, 0.0)])
def test_the_app_rechecks_as_its_tick_allows(database_url, tick, recheck):
    settings = {**TEST_SETTINGS, "DATABASE_URL": database_url, "SCHEDULE_TICK": tick}
    app = create_app({"TESTING": True, "QUEUELOG": settings})
    try:
        assert app.extensions["queuelog"]["schedules"].recheck_seconds == recheck
    finally:
        app.extensions["queuelog"]["db"].dispose()


def test_the_maintenance_loop_fires_a_schedule_added_through_another_database_while_it_runs(app, db):
    """The loop on the real clock, already past its first read; a ``Schedules`` on a Database of its own
    (in a thread of this process, so its change is counted here too) adds an every-second schedule: every
    slot since its first fires. A change made in another process, seen by the recheck alone, is
    ``test_a_schedule_added_by_another_process_fires_its_first_slot_on_time``'s."""
    from queuelog.maintenance import start_maintenance

    real = app.extensions["queuelog"]["schedules"]
    real.recheck_seconds = 0.3
    stop = threading.Event()
    thread = start_maintenance(app, real.queue, None, interval=0.05, stop=stop, schedules=real, tick=0.05)
    threading.Event().wait(0.3)
    other = Database(db.url.render_as_string(hide_password=False))
    try:
        threading.Thread(target=lambda: Schedules(Queue(other)).add(every_second(), "ada")).start()
        deadline = datetime.now(UTC) + timedelta(seconds=10)
        while len(jobs_of(real, "tick")) < 3 and datetime.now(UTC) < deadline:
            threading.Event().wait(0.05)
    finally:
        stop.set()
        thread.join(5)
        other.dispose()
    first = Schedules(Queue(db)).get("tick")
    slots = [slot for slot, _ in fires(db, "tick")]
    assert len(slots) >= 3 and slots == sorted(set(slots))
    assert all(b - a == timedelta(seconds=1) for a, b in zip(slots, slots[1:], strict=False))
    assert first.last_fire_at == slots[-1]
    assert timedelta(0) < slots[0] - first.created_at <= timedelta(seconds=1)  # its first slot fired
