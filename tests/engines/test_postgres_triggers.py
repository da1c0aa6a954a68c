"""PostgreSQL's triggers on jobs (migrations 0012, 0014 and 0015): each wake-up notification a statement owes
is sent, once per type and due time, and none it does not owe, whatever the number of rows; the end of a job
that held no slot of a concurrency limit calls nothing; the counters pair old and new rows in time linear in
the rows (docs/performance.md#batches-on-postgresql)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from sqlalchemy import text

from queuelog.db import Database
from queuelog.engines import Backoff, engine_for
from queuelog.queue.wakeups import channel_name
from tests.engines.conftest import NOW, connect, count_jobs, explaining, later, new, set_type

NO_WAIT = Backoff(0, 0)


class Heard:
    """A connection of its own that LISTENs on the installation's channel; ``take()`` returns the
    notifications that arrived since the last call (each statement under test commits before)."""

    def __init__(self, db: Database):
        self.conn = connect(db)
        schema = self.conn.execute("SELECT current_schema()").fetchone()[0]
        self.conn.execute(f'LISTEN "{channel_name(schema)}"')

    def take(self) -> list[str]:
        # A notification committed before this point is delivered by the time a round trip returns.
        self.conn.execute("SELECT 1")
        return [note.payload for note in self.conn.notifies(timeout=0.2, stop_after=None)]

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def heard(pg):
    listener = Heard(pg)
    yield listener
    listener.close()


def epoch(at) -> str:
    """A due time as the notification writes it (``extract(epoch ...)::text``)."""
    return f"{at.timestamp():.6f}"


def claim(engine, limit, at=NOW, types=None):
    return engine.claim("w", now=at, lease_seconds=30, limit=limit, types=types, backoff=NO_WAIT).jobs


def test_a_batch_of_pending_jobs_notifies_once_per_type_and_due_time(pg, heard):
    engine = engine_for(pg)
    jobs = [new("email") for _ in range(300)] + [new("sms") for _ in range(200)]
    jobs += [new("email", at=later(60)) for _ in range(50)]
    engine.insert("alice", jobs, NOW)
    notes = heard.take()
    assert sorted(notes) == sorted([f"{epoch(NOW)} email", f"{epoch(NOW)} sms", f"{epoch(later(60))} email"])


def test_jobs_inserted_waiting_or_finished_notify_nobody(pg, heard):
    engine = engine_for(pg)
    [(first, _)] = engine.insert("alice", [new("email")], NOW)
    heard.take()
    waiting = new("email")._replace(depends_on=(first.id,))
    engine.insert("alice", [waiting], NOW)
    with pg.engine.begin() as conn:  # any writer: a job inserted finished
        conn.execute(
            text(
                "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner,"
                " available_at, created_at, updated_at, finished_at)"
                " VALUES ('email', '{}', 0, 'completed', 0, 3, 'alice', :at, :at, :at, :at)"
            ),
            {"at": NOW},
        )
    assert heard.take() == []


def test_claims_heartbeats_and_completions_of_unlimited_types_notify_nobody(pg, heard):
    engine = engine_for(pg)
    engine.insert("alice", [new("email") for _ in range(150)], NOW)
    heard.take()
    jobs = claim(engine, 100)
    assert len(jobs) == 100
    engine.heartbeat(jobs[0].id, "w", jobs[0].lease_token, now=later(1), lease_seconds=30)
    engine.complete_many("w", [(job.id, job.lease_token, None) for job in jobs], now=later(2))
    assert heard.take() == []


def test_a_limited_type_notifies_once_when_a_batch_of_its_jobs_stops_running(pg, heard):
    set_type(pg, "render", concurrency=200)
    engine = engine_for(pg)
    engine.insert("alice", [new("render") for _ in range(100)] + [new("email") for _ in range(100)], NOW)
    jobs = claim(engine, 200)
    assert len(jobs) == 200
    heard.take()
    outcomes = engine.complete_many("w", [(job.id, job.lease_token, None) for job in jobs], now=later(1))
    assert all(not hasattr(outcome, "reason") for outcome in outcomes)
    assert heard.take() == ["0 render"]


def test_a_failure_retried_notifies_its_due_time_and_a_final_one_nobody(pg, heard):
    engine = engine_for(pg)
    engine.insert("alice", [new("email", max_retries=1)], NOW)
    [job] = claim(engine, 1)
    heard.take()
    retry = Backoff(10, 10, lambda: 1.0)  # waits 10 s
    engine.fail(job.id, "w", job.lease_token, now=later(1), error="boom", retryable=True, backoff=retry)
    assert heard.take() == [f"{epoch(later(11))} email"]
    [job] = claim(engine, 1, at=later(12))
    heard.take()
    engine.fail(job.id, "w", job.lease_token, now=later(13), error="boom", retryable=True, backoff=retry)
    assert heard.take() == []


def test_a_new_due_time_notifies_once_per_due_time_and_type(pg, heard):
    engine_for(pg).insert("alice", [new("email") for _ in range(20)], NOW)
    heard.take()
    with pg.engine.begin() as conn:
        conn.execute(text("UPDATE jobs SET available_at = available_at + interval '1 minute' WHERE id <= 5"))
    assert heard.take() == [f"{epoch(later(60))} email"]


def counted(db) -> dict[tuple[str, str, int], int]:
    """What the counters' trigger says: jobs per status, type and priority, the shards added up."""
    with db.cursor() as cur:
        cur.execute(
            "SELECT status, type, priority, sum(n) FROM job_counts GROUP BY 1, 2, 3 HAVING sum(n) <> 0"
        )
        return {(status, job_type, priority): int(n) for status, job_type, priority, n in cur.fetchall()}


def finished_per_minute(db) -> int:
    with db.cursor() as cur:
        cur.execute("SELECT coalesce(sum(n), 0) FROM job_throughput WHERE status = 'completed'")
        return int(cur.fetchone()[0])


def test_counts_stay_exact_through_single_rows_and_batches_of_a_thousand(pg):
    engine = engine_for(pg)
    engine.insert("alice", [new("email", priority=i % 3) for i in range(1500)], NOW)
    [one] = claim(engine, 1)  # statements of one row: the status changes, then stays (a heartbeat)
    engine.heartbeat(one.id, "w", one.lease_token, now=later(1), lease_seconds=30)
    engine.complete(one.id, "w", one.lease_token, now=later(1), result_json=None)
    jobs = claim(engine, 1000)
    engine.complete_many("w", [(job.id, job.lease_token, None) for job in jobs[:600]], now=later(2))
    assert counted(pg) == count_jobs(pg)
    assert sum(n for (status, _, _), n in counted(pg).items() if status == "completed") == 601
    assert finished_per_minute(pg) == 601


def test_the_counters_pair_old_and_new_rows_in_linear_time_whatever_they_were_planned_for(pg):
    """The plans of the counters' trigger, as auto_explain reports them to this session: after a
    statement of one row and one of two, a statement of 998 rows pairs each old row with its new one
    without comparing it to all of them (the old function's nested loop did 998 x 998)."""
    engine = engine_for(pg)
    engine.insert("alice", [new("email") for _ in range(1001)], NOW)
    conn = connect(pg)
    try:
        plans = explaining(conn, "auto_explain.log_nested_statements = on")
        # One row, then two: each of the function's statements is planned at its first call, the one
        # for a single row first (the old function's join was then a nested loop), then the one for more.
        for ids in ("id = 1", "id IN (2, 3)"):
            with conn.transaction():
                conn.execute(f"UPDATE jobs SET status = 'completed', finished_at = now() WHERE {ids}")
        plans.clear()
        with conn.transaction():
            conn.execute("UPDATE jobs SET status = 'completed', finished_at = now() WHERE id > 3")
        paired = [plan for plan in plans if "old_rows" in plan and "new_rows" in plan]
        counting = [plan for plan in paired if "INSERT INTO job_counts" in plan]
        assert len(counting) == 1, plans
        assert "rows=1996" in counting[0]  # both versions of each of the 998 rows
        assert [plan for plan in paired if "Nested Loop" in plan] == []
    finally:
        conn.close()
    assert counted(pg) == count_jobs(pg) == {("completed", "email", 0): 1001}


def test_a_job_made_pending_by_a_lease_settled_in_a_claim_notifies(pg, heard):
    engine = engine_for(pg)
    engine.insert("alice", [new("email")], NOW)
    [job] = claim(engine, 1)
    heard.take()
    settled_at = NOW + timedelta(seconds=31)
    claim(engine, 1, at=settled_at, types=["other"])  # settles the expired lease, claims nothing
    assert heard.take() == [f"{epoch(settled_at)} email"]


def _function_calls_when_jobs_end(db: Database, ids: list[int]) -> int:
    """How often the wake-up function ran while these running jobs were completed by one statement of
    any writer (a plain UPDATE): this transaction's own count of the function's calls."""
    conn = connect(db)
    try:
        try:
            conn.execute("SET track_functions = 'pl'")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("SET track_functions needs a superuser: the calls cannot be counted")
        with conn.transaction():
            conn.execute(
                "UPDATE jobs SET status = 'completed', finished_at = now(), lease_token = NULL"
                " WHERE id = ANY(%s) AND status = 'running'",
                (ids,),
            )
            calls = conn.execute(
                "SELECT pg_stat_get_xact_function_calls('queuelog_jobs_ready'::regproc)"
            ).fetchone()[0]
        return int(calls or 0)
    finally:
        conn.close()


def _holding(db: Database) -> dict[str, set[bool]]:
    with db.cursor() as cur:
        cur.execute("SELECT type, holds_slot FROM jobs WHERE status = 'running'")
        marks: dict[str, set[bool]] = {}
        for job_type, held in cur.fetchall():
            marks.setdefault(job_type, set()).add(held)
        return marks


def test_the_end_of_a_job_without_a_concurrency_limit_calls_no_function(pg, heard):
    """A claim marks the jobs of concurrency-limited types as holding a slot (migration 0015); the end of
    every other job passes the update trigger's condition without a call, and only the marked ones call
    it, once each, and notify."""
    set_type(pg, "render", concurrency=100)
    set_type(pg, "resize", rate=1000, period=1)  # a rate limit frees nothing when a job ends
    engine = engine_for(pg)
    engine.insert("alice", [new(kind) for kind in ("email", "render", "resize") for _ in range(50)], NOW)
    jobs = claim(engine, 150)
    assert _holding(pg) == {"email": {False}, "render": {True}, "resize": {False}}
    heard.take()
    unlimited = [job.id for job in jobs if job.type != "render"]
    assert _function_calls_when_jobs_end(pg, unlimited) == 0
    assert heard.take() == []
    limited = [job.id for job in jobs if job.type == "render"]
    assert _function_calls_when_jobs_end(pg, limited) == 50
    assert heard.take() == ["0 render"]


def test_jobs_running_when_their_type_is_given_a_limit_wake_claims_when_they_end(pg, heard):
    """The claim marked them as holding no slot; giving their type a concurrency limit marks them (a
    trigger on job_types, whoever sets the limit), so that their end notifies as a limited job's does."""
    set_type(pg, "render")  # a type without limits; "resize" has no row yet
    engine = engine_for(pg)
    engine.insert("alice", [new(kind) for kind in ("render", "resize", "email") for _ in range(3)], NOW)
    jobs = claim(engine, 9)
    assert _holding(pg) == {"render": {False}, "resize": {False}, "email": {False}}
    set_type(pg, "render", concurrency=2)  # an update of its row
    set_type(pg, "resize", concurrency=2)  # a new row
    assert _holding(pg) == {"render": {True}, "resize": {True}, "email": {False}}
    heard.take()
    for kind in ("render", "resize", "email"):
        job = next(job for job in jobs if job.type == kind)
        engine.complete(job.id, "w", job.lease_token, now=later(1), result_json=None)
    assert heard.take() == ["0 render", "0 resize"]
