"""Pruning finished jobs: by command and on a schedule; pending and running jobs are never touched."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from queuelog.queue import JobSpec, Queue


def _spec(key=None):
    return JobSpec(type="email", payload={}, payload_json="{}", idempotency_key=key)


def _finish(q: Queue, status: str, key=None) -> int:
    job, _ = q.enqueue("alice", _spec(key))
    if status == "cancelled":
        q.cancel(job["id"], "alice")
        return job["id"]
    held = q.claim("w")[0]
    if status == "completed":
        q.complete(held["id"], "w", held["lease_token"])
    elif status == "failed":
        q.fail(held["id"], "w", held["lease_token"], "x", retryable=False)
    return job["id"]


def test_prune_removes_only_old_finished_jobs_and_their_events(app):
    db = app.extensions["queuelog"]["db"]
    clock = {"now": datetime(2030, 1, 1, tzinfo=UTC)}
    q = Queue(db, clock=lambda: clock["now"], lease_seconds=30 * 86400)
    old = [_finish(q, s) for s in ("completed", "failed", "cancelled")]
    old_running = _finish(q, "running")
    old_pending, _ = q.enqueue(
        "alice", JobSpec(type="email", payload={}, payload_json="{}", delay_seconds=365 * 86400)
    )
    clock["now"] += timedelta(days=10)
    recent = _finish(q, "completed")
    assert q.prune(timedelta(days=7), batch=2) == 3
    assert all(q.get(i) is None for i in old)
    assert all(q.events(i) == [] for i in old)
    assert q.get(old_running)["status"] == "running"
    assert q.get(old_pending["id"])["status"] == "pending"
    assert q.get(recent)["status"] == "completed"


def test_prune_command_frees_idempotency_keys(app, runner, producer, worker):
    q = app.extensions["queuelog"]["queue"]
    first = producer.post("/jobs", json={"type": "email", "idempotency_key": "k", "payload": {"a": 1}}).json
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    assert runner.invoke(args=["jobs", "prune", "--older-than", "1d"]).output.strip() == "pruned 0 jobs"
    result = runner.invoke(args=["jobs", "prune", "--older-than", "0s"])
    assert result.exit_code == 0 and result.output.strip() == "pruned 1 jobs"
    assert q.get(first["id"]) is None
    again = producer.post("/jobs", json={"type": "email", "idempotency_key": "k", "payload": {"a": 2}})
    assert again.status_code == 201 and again.json["id"] != first["id"]
    bad = runner.invoke(args=["jobs", "prune", "--older-than", "soon"])
    assert bad.exit_code != 0 and "not a duration" in bad.output
    for far in ("1000000d", "9999999999w", "1" + "0" * 400):  # past a century: one line, never a traceback
        refused = runner.invoke(args=["jobs", "prune", "--older-than", far])
        assert refused.exit_code == 1 and refused.output.startswith("Error: too long a duration"), (
            refused.output
        )
    assert runner.invoke(args=["jobs", "prune", "--older-than", "36500d"]).exit_code == 0  # a century may be


def test_scheduled_pruning_runs_in_the_app(app, backend, tmp_path):
    from queuelog.maintenance import start_maintenance

    q = app.extensions["queuelog"]["queue"]
    job_id = _finish(q, "completed")
    stop = threading.Event()
    thread = start_maintenance(app, q, timedelta(seconds=0), interval=0.05, stop=stop)
    deadline = time.monotonic() + 10
    while q.get(job_id) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    # Joined before the test ends, so that its connections are closed before the database is dropped
    # (a thread left running would hold a PostgreSQL connection that only the garbage collector closes).
    thread.join(5)
    assert not thread.is_alive()
    assert q.get(job_id) is None
    assert json.dumps(q.list_jobs()) == "[]"


def test_one_process_of_the_cluster_is_the_maintenance_leader(app):
    from queuelog.db import Database
    from queuelog.maintenance import Leadership

    db = app.extensions["queuelog"]["db"]
    other = Database(str(db.url.render_as_string(hide_password=False)))  # as another app process would
    # PostgreSQL: a lease of 0.6 s, so that the follower looks again (every third of a lease) soon.
    first, second = Leadership(db, lease_seconds=0.6), Leadership(other, lease_seconds=0.6)
    try:
        assert first.try_acquire() is True
        assert second.try_acquire() is False
        assert first.try_acquire() is True  # a leader stays the leader
        first.release()  # the leader stops (or dies: the lock goes with its file, the lease runs out)
        time.sleep(0.25)
        assert second.try_acquire() is True
        assert first.try_acquire() is False
    finally:
        first.release()
        second.release()
        other.dispose()


def test_a_postgresql_leader_that_dies_is_replaced_when_its_lease_runs_out(app, backend):
    """The election holds no session state (it works through PgBouncer in transaction mode): a leader
    that vanishes without stepping down keeps the role only until its lease runs out."""
    if backend.name != "postgresql":
        pytest.skip("SQLite's leader holds an flock, which its process's death lets go of")
    from queuelog.db import Database
    from queuelog.maintenance import Leadership

    db = app.extensions["queuelog"]["db"]
    other = Database(str(db.url.render_as_string(hide_password=False)))
    first, second = Leadership(db, lease_seconds=1.0), Leadership(other, lease_seconds=1.0)
    try:
        assert first.try_acquire() is True
        assert second.try_acquire() is False
        first._valid_until = 0.0  # it dies: no release, its row stays behind
        started = time.monotonic()
        while not second.try_acquire():
            assert time.monotonic() - started < 5
            time.sleep(0.05)
        # Once the lease ran out, not before; a follower looks every third of a lease.
        assert 0.5 < time.monotonic() - started < 2.0
        assert first.try_acquire() is False
        with db.cursor() as cur:
            cur.execute("SELECT holder FROM leader_leases")
            assert cur.fetchall() == [(second.holder,)]
    finally:
        first.release()
        second.release()
        other.dispose()
