"""The plans PostgreSQL runs a claim and a batch completion with, as a prepared statement settles on them:
a claim down the claim index, however few pending jobs the table's statistics saw
(docs/performance.md#claims-stay-flat-at-any-backlog); a completion by primary key, never by a join that
compares each job with every item nor through every running job, however few running jobs the statistics
saw (docs/performance.md#batches-on-postgresql)."""

from __future__ import annotations

import re

from queuelog.engines import Backoff, JobRecord, engine_for
from queuelog.engines.postgres.engine import _PLAIN_COMPLETE_MANY, _claim_under_lock
from queuelog.engines.postgres.sql import CLAIM, CLAIM_IN_ORDER, SETTLE_AND_LOCK, bind_items
from tests.engines.conftest import NOW, connect, explaining, later, new


def test_a_batch_completion_reaches_its_jobs_by_primary_key_in_its_generic_plan(pg):
    engine = engine_for(pg)
    engine.insert("alice", [new("email") for _ in range(1100)], NOW)
    conn = connect(pg)
    try:
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")  # no new statistics meanwhile
        conn.execute("ANALYZE jobs")  # statistics that saw no running job at all
        held = engine.claim("other", now=NOW, lease_seconds=60, limit=1000, types=None, backoff=Backoff(0, 0))
        assert len(held.jobs) == 1000  # running, held by another worker
        mine = engine.claim("w", now=NOW, lease_seconds=60, limit=100, types=None, backoff=Backoff(0, 0))
        # The plan a prepared statement runs from its sixth run on (a generic plan), at once.
        plans = explaining(conn, "plan_cache_mode = force_generic_plan")
        items = [(job.id, job.lease_token, f'{{"n": {job.id}}}') for job in mine.jobs]
        params = {"worker": "w", "now": later(1), **bind_items(items)}
        rows = conn.execute(_PLAIN_COMPLETE_MANY, params, prepare=True).fetchall()
    finally:
        conn.execute("ALTER TABLE jobs RESET (autovacuum_enabled)")
        conn.close()
    [plan] = [plan for plan in plans if "Update on jobs" in plan]
    assert "$2" in plan  # generic: the parameters stay parameters
    assert "pk_jobs" in plan
    assert "Nested Loop" not in plan
    assert "ix_jobs_running_type" not in plan and "ix_jobs_lease" not in plan
    assert "rows=100 " in plan.split("Update on jobs")[1].splitlines()[0]
    assert len(rows) == 100
    for job in mine.jobs:  # each completed with its own item's result
        now = engine.get(job.id)
        assert isinstance(now, JobRecord) and now.status == "completed" and now.result == f'{{"n": {job.id}}}'
    assert {engine.get(job.id).status for job in held.jobs} == {"running"}  # the other worker's stay held


def test_a_claim_goes_down_the_claim_index_in_its_generic_plan_whatever_the_statistics_saw(pg):
    """A table whose statistics saw no job (a new install's, analysed while empty) and then filled: the
    planner believes few jobs are pending, and without CLAIM_PLANNING its generic plan read every pending
    job through a bitmap and sorted them all, at every claim, until the next ANALYZE."""
    engine = engine_for(pg)
    conn = connect(pg)
    try:
        plans = explaining(conn, "plan_cache_mode = force_generic_plan")
        conn.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")  # no new statistics meanwhile
        conn.execute("ANALYZE jobs")  # an empty table's size; its columns' statistics stay as they were,
        conn.execute("DELETE FROM pg_statistic WHERE starelid = 'jobs'::regclass")  # which a new one has not
        engine.insert("alice", [new("email", priority=i % 2 * 10) for i in range(8000)], NOW)
        token = "t" * 32
        params = {
            "now": NOW,
            "limit": 100,
            "worker": "w",
            "token": token,
            "expires": later(60),
            "base": 0,
            "cap": 0,
        }
        claimed = []
        for typed, statement in (
            (False, CLAIM_IN_ORDER[False]),
            (False, CLAIM[False]),
            (True, CLAIM_IN_ORDER[True]),
        ):
            asked = {**params, "types": ["email"]} if typed else params
            with conn.pipeline():
                rows, _ = _claim_under_lock(conn, conn.cursor(), SETTLE_AND_LOCK[typed], statement, asked)
            claimed.append([row[1] for row in rows])
    finally:
        conn.execute("ALTER TABLE jobs RESET (autovacuum_enabled)")
        conn.close()
    claims = [plan for plan in plans if "claimed AS" in plan]
    assert len(claims) == 3
    for plan in claims:
        assert "$2" in plan  # generic: the parameters stay parameters
        assert "Bitmap Heap Scan on jobs" not in plan  # never the whole backlog, then a sort
        assert "Index Scan using ix_jobs_claim" in plan
        assert max(int(rows) for rows in re.findall(r"actual rows=(\d+)", plan)) <= 100  # nothing read past
    # Each claim took the next 100 jobs in claim order: priority 10 (the even ids) first, oldest first.
    first = [job_id for job_id in range(1, 8001) if job_id % 2 == 0]
    assert claimed == [first[0:100], first[100:200], first[200:300]]
