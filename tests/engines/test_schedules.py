"""Conformance of the schedules' operations (engines/shared.py) on both engines, without Flask: the
management writes with their audit rows, and firing a slot: once, with its job, history and counts."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from sqlalchemy import text

from queuelog.db import Database
from queuelog.engines import engine_for
from queuelog.engines.records import Firing
from tests.engines.conftest import NOW, count_jobs, later, new

DAY = timedelta(days=1)


def values(name: str = "nightly", **kw) -> dict:
    row = {
        "name": name,
        "type": "email",
        "payload": {"to": "ops@example.com"},
        "priority": 10,
        "max_retries": 2,
        "cron": "0 3 * * *",
        "interval_seconds": None,
        "timezone": "UTC",
        "missed": "fire_once",
        "paused": False,
        "next_fire_at": later(3600),
    }
    return row | kw


def firing(schedule, *, job=True, slot=None, due="stored", next_fire=None, audit=None) -> Firing:
    slot = slot or schedule.next_fire_at
    due = schedule.next_fire_at if due == "stored" else due
    made = new("email", payload=schedule.payload, priority=schedule.priority, at=slot) if job else None
    return Firing(
        schedule.id, schedule.name, slot, due, None if due is None else schedule.revision,
        next_fire or slot + DAY, made, f"schedule:{schedule.name}", slot - 7 * DAY, audit,
    )  # fmt: skip


def audit_rows(db: Database) -> list[tuple[str, str, str]]:
    with db.cursor() as cur:
        return [
            tuple(r)
            for r in cur.execute("SELECT actor, action, target FROM audit_log ORDER BY id").fetchall()
        ]


def fire_rows(db: Database) -> list[tuple]:
    with db.cursor() as cur:
        return [tuple(r) for r in cur.execute("SELECT schedule_id, job_id FROM schedule_fires").fetchall()]


def test_add_get_list_and_audit(db, engine):
    added = engine.add_schedule(values(), actor="ada", now=NOW)
    engine.add_schedule(values("hourly", cron=None, interval_seconds=3600), actor="ada", now=NOW)
    assert [s.name for s in engine.all_schedules()] == ["hourly", "nightly"]
    got = engine.get_schedule("nightly")
    assert (got.id, got.revision, got.created_by, got.payload) == (
        added.id,
        0,
        "ada",
        {"to": "ops@example.com"},
    )
    assert got.next_fire_at == later(3600) and got.last_fire_at is None
    assert engine.get_schedule("nope") is None
    assert audit_rows(db) == [("ada", "schedule.create", "nightly"), ("ada", "schedule.create", "hourly")]


def test_a_taken_name_writes_nothing(db, engine):
    from sqlalchemy.exc import IntegrityError

    engine.add_schedule(values(), actor="ada", now=NOW)
    try:
        engine.add_schedule(values(type="pdf"), actor="bob", now=NOW)
        raise AssertionError("a taken name was accepted")
    except IntegrityError:
        pass
    assert engine.get_schedule("nightly").type == "email"
    assert audit_rows(db) == [("ada", "schedule.create", "nightly")]


def test_update_raises_the_revision_and_honours_its_guard(db, engine):
    engine.add_schedule(values(), actor="ada", now=NOW)
    changed = engine.update_schedule(
        "nightly", {"priority": 20}, actor="bob", action="schedule.update", now=later(5)
    )
    assert (changed.priority, changed.revision, changed.updated_at) == (20, 1, later(5))
    stale = engine.update_schedule(
        "nightly", {"paused": True}, actor="bob", action="schedule.pause", now=later(6), revision=0
    )
    assert stale is None and engine.get_schedule("nightly").paused is False
    assert engine.update_schedule("nope", {"paused": True}, actor="bob", action="x", now=NOW) is None
    assert audit_rows(db)[-1] == ("bob", "schedule.update", "nightly")
    assert len(audit_rows(db)) == 2


def test_delete_takes_its_fire_rows_and_leaves_its_jobs(db, engine):
    schedule = engine.add_schedule(values(), actor="ada", now=NOW)
    fired = engine.fire_schedule(firing(schedule), now=later(3601))
    assert engine.delete_schedule("nightly", actor="ada", now=later(3602)) is True
    assert engine.delete_schedule("nightly", actor="ada", now=later(3602)) is False
    assert engine.get_schedule("nightly") is None and fire_rows(db) == []
    assert engine.get(fired.job.id) is not None
    assert audit_rows(db)[-1] == ("ada", "schedule.delete", "nightly")


def test_due_schedules_are_the_unpaused_ones_whose_time_has_come(engine):
    engine.add_schedule(values("a", next_fire_at=later(10)), actor="ada", now=NOW)
    engine.add_schedule(values("b", next_fire_at=later(5)), actor="ada", now=NOW)
    engine.add_schedule(values("c", next_fire_at=later(1), paused=True), actor="ada", now=NOW)
    engine.add_schedule(values("d", next_fire_at=later(60)), actor="ada", now=NOW)
    assert [s.name for s in engine.due_schedules(now=later(10), limit=10)] == ["b", "a"]
    assert [s.name for s in engine.due_schedules(now=later(10), limit=1)] == ["b"]


def test_a_slot_fires_once_with_its_job_history_and_counts(db, engine):
    schedule = engine.add_schedule(values(), actor="ada", now=NOW)
    fired = engine.fire_schedule(firing(schedule), now=later(3601))
    job = fired.job
    assert fired.fired and job.owner == "schedule:nightly" and job.status == "pending"
    assert (job.type, json.loads(job.payload), job.priority, job.max_retries) == (
        "email",
        {"to": "ops@example.com"},
        10,
        3,
    )
    assert [(e.event, e.actor) for e in engine.events(job.id)] == [("enqueued", "schedule:nightly")]
    again = engine.fire_schedule(firing(schedule), now=later(3602))
    assert again == (False, None)
    after = engine.get_schedule("nightly")
    assert (after.next_fire_at, after.last_fire_at) == (later(3600) + DAY, later(3600))
    assert fire_rows(db) == [(schedule.id, job.id)]
    assert count_jobs(db) == {("pending", "email", 10): 1}
    assert {(c.status, c.type, c.priority): c.n for c in engine.counts()} == count_jobs(db)


def test_an_edit_between_the_read_and_the_firing_stops_it(db, engine):
    schedule = engine.add_schedule(values(), actor="ada", now=NOW)
    engine.update_schedule("nightly", {"priority": 0}, actor="bob", action="schedule.update", now=later(1))
    assert engine.fire_schedule(firing(schedule), now=later(3601)) == (False, None)
    engine.update_schedule("nightly", {"paused": True}, actor="bob", action="schedule.pause", now=later(2))
    fresh = engine.get_schedule("nightly")
    assert engine.fire_schedule(firing(fresh), now=later(3601)) == (False, None)
    assert count_jobs(db) == {} and fire_rows(db) == []


def test_a_slot_passed_over_moves_on_without_a_job(db, engine):
    schedule = engine.add_schedule(values(), actor="ada", now=NOW)
    fired = engine.fire_schedule(firing(schedule, job=False), now=later(7200))
    assert fired == (True, None)
    after = engine.get_schedule("nightly")
    assert (after.next_fire_at, after.last_fire_at) == (later(3600) + DAY, None)
    assert fire_rows(db) == [(schedule.id, None)] and count_jobs(db) == {}


def test_a_fired_slot_never_fires_again_even_when_it_comes_due_again(db, engine):
    schedule = engine.add_schedule(values(), actor="ada", now=NOW)
    engine.fire_schedule(firing(schedule), now=later(3601))
    # An edit that puts the same slot back (e.g. a resume at the same instant): the fire row still holds it.
    engine.update_schedule(
        "nightly", {"next_fire_at": later(3600)}, actor="bob", action="schedule.update", now=later(3602)
    )
    again = engine.get_schedule("nightly")
    assert engine.fire_schedule(firing(again), now=later(3603)) == (False, None)
    assert count_jobs(db) == {("pending", "email", 10): 1}


def test_run_now_fires_at_once_audited_and_keeps_the_next_time(db, engine):
    schedule = engine.add_schedule(values(), actor="ada", now=NOW)
    fired = engine.fire_schedule(
        firing(schedule, slot=later(30), due=None, audit=("bob", "schedule.run")), now=later(30)
    )
    assert fired.fired and fired.job.available_at == later(30)
    after = engine.get_schedule("nightly")
    assert (after.next_fire_at, after.last_fire_at) == (later(3600), later(30))
    assert audit_rows(db)[-1] == ("bob", "schedule.run", "nightly")
    engine.delete_schedule("nightly", actor="ada", now=later(31))
    assert engine.fire_schedule(firing(schedule, slot=later(40), due=None), now=later(40)) == (False, None)


def test_old_fire_rows_are_forgotten(db, engine):
    schedule = engine.add_schedule(values(next_fire_at=NOW), actor="ada", now=NOW)
    engine.fire_schedule(firing(schedule), now=NOW)
    moved = engine.get_schedule("nightly")
    engine.fire_schedule(firing(moved, slot=moved.next_fire_at + 8 * DAY), now=later(9 * 86400))
    with db.cursor() as cur:
        slots = cur.execute("SELECT count(*) FROM schedule_fires").fetchall()
    assert slots[0][0] == 1  # the first slot is more than 7 days before the one fired now


def test_servers_firing_one_slot_at_once_make_one_job(db, engine):
    """Eight "servers" (each its own Database, so its own connections) fire the same slot at once."""
    schedule = engine.add_schedule(values(), actor="ada", now=NOW)
    servers = [Database(str(db.url.render_as_string(hide_password=False))) for _ in range(8)]
    start = threading.Barrier(len(servers))
    results = []

    def fire(server: Database, i: int) -> None:
        start.wait()  # each server's clock reads a little differently
        results.append(engine_for(server).fire_schedule(firing(schedule), now=later(3601 + i / 1000)))

    threads = [threading.Thread(target=fire, args=(server, i)) for i, server in enumerate(servers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for server in servers:
        server.dispose()
    assert sorted(r.fired for r in results) == [False] * 7 + [True]
    assert count_jobs(db) == {("pending", "email", 10): 1}
    with db.cursor() as cur:
        events = cur.execute(text("SELECT count(*) FROM job_events").text).fetchall()
    assert events[0][0] == 1


def _fire_in_a_process(url: str, schedule_id: int, revision: int, start_at: float, i: int) -> bool:
    """One app process: its own Database, firing slot later(3600) of the schedule at ``start_at``."""
    import time

    from queuelog.engines.records import NewJob

    server = Database(url)
    slot = later(3600)
    job = NewJob("email", "{}", 10, 3, None, None, slot)
    firing = Firing(
        schedule_id, "nightly", slot, slot, revision, slot + DAY, job, "schedule:nightly", slot - 7 * DAY
    )
    time.sleep(max(0.0, start_at - time.time()))
    try:
        return engine_for(server).fire_schedule(firing, now=later(3601 + i / 1000)).fired
    finally:
        server.dispose()


@pytest.mark.slow  # processes racing
def test_processes_firing_one_slot_at_once_make_one_job(db, engine):
    """Four app processes fire the same slot at the same instant."""
    import multiprocessing
    import time

    schedule = engine.add_schedule(values(), actor="ada", now=NOW)
    url = db.url.render_as_string(hide_password=False)
    start_at = time.time() + 2  # after every process has started and imported
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        fired = pool.starmap(
            _fire_in_a_process, [(url, schedule.id, schedule.revision, start_at, i) for i in range(4)]
        )
    assert sorted(fired) == [False, False, False, True]
    assert count_jobs(db) == {("pending", "email", 10): 1}
