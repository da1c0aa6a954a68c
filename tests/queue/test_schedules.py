"""Schedules' policy (queuelog/queue/schedules.py) on both engines, with an injectable clock: checks,
firing on time, missed slots after downtime, pause and resume, "run now", and two app servers firing
the same schedule at once."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest

from queuelog.db import Database
from queuelog.queue import Code, JobValidationError, Queue
from queuelog.queue.errors import each_refusal
from queuelog.queue.schedules import ScheduleNotFound, Schedules, ScheduleValues
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


def jobs_of(sched: Schedules, name: str = "nightly"):
    return sched.queue.list_jobs(owner=f"schedule:{name}", limit=100)


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


def test_two_app_servers_firing_at_once_make_one_job_per_slot(db, clock):
    """Two servers, each with its own connections, fire every tick of a per-minute schedule at once."""
    url = db.url.render_as_string(hide_password=False)
    servers = [Database(url), Database(url)]
    apps = [schedules_on(server, clock) for server in servers]
    apps[0].add(daily("minutely", cron="* * * * *"), "ada")
    for minute in range(1, 6):
        clock.now = START + timedelta(minutes=minute, seconds=1)
        start = threading.Barrier(len(apps))

        def tick(app: Schedules, start: threading.Barrier) -> None:
            start.wait()
            app.fire_due()

        threads = [threading.Thread(target=tick, args=(app, start)) for app in apps]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    jobs = jobs_of(apps[0], "minutely")
    for server in servers:
        server.dispose()
    assert sorted(job.created_at for job in jobs) == [
        START + timedelta(minutes=m, seconds=1) for m in range(1, 6)
    ]


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
