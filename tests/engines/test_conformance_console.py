"""The console's reads (``Engine``: queuelog/engines/engine.py), run against each engine directly (no app):
held jobs and their counts, the newest finished jobs, a type's newest jobs, and recently used worker keys."""

from __future__ import annotations

from datetime import timedelta

from queuelog.engines import Backoff
from queuelog.queue.admin import AdminStore
from tests.engines.conftest import NOW, later, new

FIXED = Backoff(10, 100, lambda: 0.5)


def claim(engine, worker, *, at=NOW, lease=30, limit=1, types=None):
    return engine.claim(worker, now=at, lease_seconds=lease, limit=limit, types=types, backoff=FIXED).jobs


def test_held_jobs_are_the_running_ones_soonest_expiry_first_with_counts_per_worker(engine):
    engine.insert("alice", [new("email") for _ in range(5)] + [new("pdf")], NOW)
    a = claim(engine, "w-a", lease=60, limit=2)
    b = claim(engine, "w-b", at=later(1), lease=10, limit=1)
    done = claim(engine, "w-b", at=later(2), lease=10)[0]
    engine.complete(done.id, "w-b", done.lease_token, now=later(3), result_json=None)
    held = engine.held_jobs(limit=10)
    assert [(h.id, h.worker_id, h.lease_expires_at) for h in held[:1]] == [(b[0].id, "w-b", later(11))]
    assert {(h.id, h.worker_id, h.lease_expires_at) for h in held[1:]} == {
        (a[0].id, "w-a", later(60)),
        (a[1].id, "w-a", later(60)),
    }
    assert held[0].claimed_at == later(1) and held[0].type == "email"
    assert len(engine.held_jobs(limit=1)) == 1
    assert engine.held_counts() == {"w-a": 2, "w-b": 1}
    for job in a:
        engine.fail(job.id, "w-a", job.lease_token, now=later(4), error="boom", retryable=True, backoff=FIXED)
    assert engine.held_counts() == {"w-b": 1}
    assert [h.id for h in engine.held_jobs(limit=10)] == [b[0].id]


def test_recent_finished_is_newest_first_within_the_window_and_bounded(engine):
    jobs = [job for job, _ in engine.insert("alice", [new("email", max_retries=0) for _ in range(6)], NOW)]
    for i, job in enumerate(jobs):
        held = claim(engine, f"w-{i % 2}", at=later(10 * i))[0]
        assert held.id == job.id
        if i == 4:
            engine.fail(
                held.id,
                held.worker_id,
                held.lease_token,
                now=later(10 * i + 3),
                error="x",
                retryable=True,
                backoff=FIXED,
            )
        elif i < 5:
            engine.complete(
                held.id, held.worker_id, held.lease_token, now=later(10 * i + 2), result_json=None
            )
    completed = engine.recent_finished("completed", since=later(10), limit=10)
    assert [(j.id, j.worker_id, j.finished_at) for j in completed] == [
        (jobs[3].id, "w-1", later(32)),
        (jobs[2].id, "w-0", later(22)),
        (jobs[1].id, "w-1", later(12)),
    ]
    first = completed[-1]
    assert (first.type, first.status, first.available_at, first.claimed_at) == (
        "email",
        "completed",
        NOW,
        later(10),
    )
    assert [j.id for j in engine.recent_finished("completed", since=NOW, limit=2)] == [jobs[3].id, jobs[2].id]
    [failed] = engine.recent_finished("failed", since=NOW, limit=10)
    assert (failed.id, failed.status, failed.finished_at) == (jobs[4].id, "failed", later(43))
    assert engine.recent_finished("completed", since=later(100), limit=10) == []


def test_recent_of_type_is_the_types_newest_jobs_in_any_status(engine):
    engine.insert("alice", [new("pdf"), new("email"), new("pdf"), new("pdf")], NOW)
    held = claim(engine, "w", at=later(5), types=["pdf"])[0]
    engine.complete(held.id, "w", held.lease_token, now=later(7), result_json=None)
    rows = engine.recent_of_type("pdf", limit=10)
    assert [j.id for j in rows] == [4, 3, 1]
    done = rows[-1]
    assert (done.status, done.worker_id, done.claimed_at, done.finished_at) == (
        "completed",
        "w",
        later(5),
        later(7),
    )
    assert (rows[0].status, rows[0].claimed_at, rows[0].finished_at) == ("pending", None, None)
    assert [j.id for j in engine.recent_of_type("pdf", limit=2)] == [4, 3]
    assert engine.recent_of_type("sync", limit=10) == []


def set_last_used(db, engine, name, at):
    """Set a key's last use at a chosen time (authenticating would record the wall clock's)."""
    statement = {
        "sqlite": "UPDATE api_keys SET last_used_at = :at WHERE name = :name",
        "postgresql": "UPDATE api_keys SET last_used_at = %(at)s WHERE name = %(name)s",
    }[engine.name]
    with db.cursor(write=True) as cur:
        cur.execute(statement, {"at": engine.dialect.bind_time(at), "name": name})


def test_worker_keys_are_those_used_recently_revoked_or_not(db, engine):
    for name in ("w-old", "w-new", "w-gone", "w-never"):
        AdminStore(db).create_key(name, "worker")
    AdminStore(db).create_user("carol", "producer", "password-carol")
    AdminStore(db).create_key("laptop", "producer", username="carol")  # a producer key: never listed
    set_last_used(db, engine, "laptop", NOW)
    set_last_used(db, engine, "w-old", NOW - timedelta(days=2))
    set_last_used(db, engine, "w-new", NOW)
    set_last_used(db, engine, "w-gone", NOW - timedelta(hours=1))
    AdminStore(db).revoke_key("w-gone", actor="admin")
    rows = engine.worker_keys(since=NOW - timedelta(days=1), limit=10)
    assert [(r.name, r.last_used_at, r.revoked_at is not None) for r in rows] == [
        ("w-new", NOW, False),
        ("w-gone", NOW - timedelta(hours=1), True),
    ]
    assert rows[0].created_at is not None
    assert [r.name for r in engine.worker_keys(since=NOW - timedelta(days=3), limit=2)] == ["w-new", "w-gone"]


def test_held_jobs_show_the_running_attempts_progress_only(engine):
    engine.insert("alice", [new("pdf"), new("pdf")], NOW)
    first, second = claim(engine, "w-a", limit=2, lease=60)
    engine.report_progress(
        first.id, "w-a", first.lease_token, now=later(1), lease_seconds=60, percent=40, message="page 4 of 10"
    )
    held = {h.id: h for h in engine.held_jobs(limit=10)}
    assert (held[first.id].progress, held[first.id].progress_message) == (40, "page 4 of 10")
    assert (held[second.id].progress, held[second.id].progress_message) == (None, None)
    # Retried and claimed again: the earlier attempt's report is not this attempt's progress.
    engine.fail(
        first.id,
        "w-a",
        first.lease_token,
        now=later(2),
        error="boom",
        retryable=True,
        backoff=Backoff(0, 0, lambda: 0.5),
    )
    [again] = claim(engine, "w-b", at=later(3), types=None)
    assert again.id == first.id
    held = {h.id: h for h in engine.held_jobs(limit=10)}
    assert (held[first.id].worker_id, held[first.id].progress, held[first.id].progress_message) == (
        "w-b",
        None,
        None,
    )
