"""Each engine keeps a history row for every transition, exact counts through batches, and deletes a
pruned job's history with it (job_events carries no foreign key since migration 0005)."""

from __future__ import annotations

import threading
import time
from datetime import UTC

from queuelog.db import Database
from queuelog.engines import Backoff, engine_for
from tests.engines.conftest import NOW, count_jobs, later, new

NO_WAIT = Backoff(0, 0)


def claim(engine, worker="w", *, at=NOW, lease=30, limit=1):
    return engine.claim(worker, now=at, lease_seconds=lease, limit=limit, types=None, backoff=NO_WAIT)


def history(engine, job_id):
    return [(e.event, e.actor, e.attempt, e.error) for e in engine.events(job_id)]


def counted(engine):
    return {(row.status, row.type, row.priority): row.n for row in engine.counts() if row.n}


def history_rows(db) -> list[tuple[int, int]]:
    """Every history row's (job_id, number of rows) in the table, orphans included."""
    with db.cursor() as cur:
        cur.execute("SELECT job_id, count(*) FROM job_events GROUP BY job_id ORDER BY job_id")
        return [(int(job_id), int(n)) for job_id, n in cur.fetchall()]


def test_batches_write_a_history_row_for_every_transition_and_keep_counts_exact(db, engine):
    jobs = [job for job, _ in engine.insert("alice", [new(priority=p) for p in (0, 0, 10, 10, 20)], NOW)]
    held = claim(engine, limit=5).jobs
    assert len(held) == 5 and counted(engine) == count_jobs(db)
    by_id = {job.id: job for job in held}
    done, failed, retried, lost, cancelled = jobs
    outcomes = engine.complete_many("w", [(done.id, by_id[done.id].lease_token, '{"ok": 1}')], now=later(1))
    assert outcomes[0].status == "completed"
    engine.fail(
        failed.id,
        "w",
        by_id[failed.id].lease_token,
        now=later(2),
        error="no",
        retryable=False,
        backoff=NO_WAIT,
    )
    engine.fail(
        retried.id,
        "w",
        by_id[retried.id].lease_token,
        now=later(2),
        error="again",
        retryable=True,
        backoff=NO_WAIT,
    )
    engine.complete_many("w", [(cancelled.id, by_id[cancelled.id].lease_token, None)], now=later(3))
    assert counted(engine) == count_jobs(db)
    # `lost` stays held past its lease; the next claim settles it and, with no backoff, hands it out again
    # together with `retried`.
    again = claim(engine, "v", at=later(60), limit=5)
    assert [job.id for job in again.expired] == [lost.id]
    assert sorted(job.id for job in again.jobs) == sorted([lost.id, retried.id])
    assert counted(engine) == count_jobs(db)
    assert history(engine, done.id) == [
        ("enqueued", "alice", 0, None),
        ("claimed", "w", 1, None),
        ("completed", "w", 1, None),
    ]
    assert history(engine, failed.id)[-1] == ("failed", "w", 1, "no")
    assert history(engine, retried.id)[1:] == [
        ("claimed", "w", 1, None),
        ("retry_scheduled", "w", 1, "again"),
        ("claimed", "v", 2, None),
    ]
    assert history(engine, lost.id)[1:] == [
        ("claimed", "w", 1, None),
        ("lease_expired", "system", 1, "lease expired (held by w)"),
        ("claimed", "v", 2, None),
    ]
    assert [event.id for event in engine.events(lost.id)] == sorted(e.id for e in engine.events(lost.id))


def test_prune_deletes_the_history_of_the_jobs_it_deletes_and_no_other(db, engine):
    jobs = [job for job, _ in engine.insert("alice", [new() for _ in range(7)], NOW)]
    for job in claim(engine, limit=5).jobs:
        engine.complete(job.id, "w", job.lease_token, now=NOW, result_json=None)
    kept = history(engine, jobs[5].id) + history(engine, jobs[6].id)
    assert engine.prune(finished_before=later(1), batch=2, throughput_before=NOW) == 5
    assert history_rows(db) == [(jobs[5].id, 1), (jobs[6].id, 1)]  # no history left without its job
    assert history(engine, jobs[5].id) + history(engine, jobs[6].id) == kept
    assert counted(engine) == count_jobs(db)


def test_times_come_back_in_utc_whatever_the_sessions_zone(db):
    fresh = Database(db.url.render_as_string(hide_password=False))  # its engine is made before any connection
    try:
        engine = engine_for(fresh)
        [(job, _)] = engine.insert("alice", [new()], NOW)
        [held] = claim(engine).jobs
        _check_utc(engine, job.id, held)
        if engine.name == "postgresql":
            with fresh.cursor() as cur:
                assert cur.execute("SHOW TimeZone").fetchone()[0] == "UTC"  # set by the engine
                # A connection in another zone (one opened before the engine was made) decodes alike.
                cur.execute("SET TIME ZONE 'Asia/Tokyo'")
            with fresh.cursor() as cur:
                assert cur.execute("SHOW TimeZone").fetchone()[0] == "Asia/Tokyo"
        _check_utc(engine, job.id, held)
    finally:
        fresh.dispose()


def _check_utc(engine, job_id, held):
    got = engine.get(job_id)
    assert got == held and got.claimed_at == NOW
    times = [getattr(got, name) for name in got._fields if name.endswith("_at")]
    assert all(value.tzinfo is UTC for value in times if value is not None)
    assert [(event.at, event.at.tzinfo) for event in engine.events(job_id)] == [(NOW, UTC), (NOW, UTC)]


def test_prune_spares_a_job_retried_while_it_waited(db, engine):
    """A job an admin puts back to pending while a prune waits for it is pending, and is not pruned."""
    [(job, _)] = engine.insert("alice", [new()], NOW)
    assert engine.cancel(job.id, "alice", now=NOW).status == "cancelled"
    other = db.engine.raw_connection()
    conn = other.driver_connection
    cur = conn.cursor()
    # The retry, begun and not yet committed: it holds the job's row (PostgreSQL) or the write lock (SQLite).
    if engine.name == "sqlite":
        cur.execute("BEGIN IMMEDIATE")
    cur.execute(
        db.sql("UPDATE jobs SET status = 'pending', finished_at = NULL WHERE id = :id"), {"id": job.id}
    )
    pruned: list[int] = []
    pruning = threading.Thread(
        target=lambda: pruned.append(engine.prune(finished_before=later(60), batch=10, throughput_before=NOW))
    )
    pruning.start()
    _wait_until_blocked(db, engine)
    conn.commit()
    pruning.join(timeout=30)
    other.close()
    assert pruned == [0]
    assert engine.get(job.id).status == "pending" and history(engine, job.id)[:2] == [
        ("enqueued", "alice", 0, None),
        ("cancelled", "alice", 0, None),
    ]


def _wait_until_blocked(db, engine) -> None:
    """Until the prune waits for the lock (PostgreSQL shows it; on SQLite, give it time to get there)."""
    if engine.name == "sqlite":
        time.sleep(0.3)
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with db.cursor() as cur:
            waiting = cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND datname = current_database() AND query LIKE 'WITH gone AS%%'"
            ).fetchone()[0]
        if waiting:
            return
        time.sleep(0.01)
    raise AssertionError("the prune never waited for the row")


def test_a_batch_claim_and_completion_write_each_jobs_own_attempt(engine):
    """A batch's history rows are alike but for each job's id and attempt: jobs on their second attempt
    beside jobs on their first, claimed in one batch, completed in two (whole and compact answers)."""
    twice = [job for job, _ in engine.insert("alice", [new(priority=10), new(priority=10)], NOW)]
    for first in claim(engine, limit=2).jobs:
        engine.fail(
            first.id, "w", first.lease_token, now=later(1), error="no", retryable=True, backoff=NO_WAIT
        )
    others = [job for job, _ in engine.insert("alice", [new(), new()], later(1))]
    held = claim(engine, "w2", at=later(2), limit=4).jobs
    assert [job.id for job in held] == [job.id for job in (*twice, *others)]
    items = [(job.id, job.lease_token, None) for job in (held[0], held[2], held[1], held[3])]
    for outcomes in (
        engine.complete_many("w2", items[:2], now=later(3)),
        engine.complete_each("w2", items[2:], now=later(3)),
    ):
        assert [outcome.status for outcome in outcomes] == ["completed", "completed"]
    for job in twice:
        assert history(engine, job.id)[-2:] == [("claimed", "w2", 2, None), ("completed", "w2", 2, None)]
    for job in others:
        assert history(engine, job.id) == [
            ("enqueued", "alice", 0, None),
            ("claimed", "w2", 1, None),
            ("completed", "w2", 1, None),
        ]
