"""The plans PostgreSQL runs a batch completion with, as a prepared statement settles on them: by primary
key, never by a join that compares each job with every item nor through every running job, however few
running jobs the table's statistics saw (docs/performance.md#batches-on-postgresql)."""

from __future__ import annotations

from queuelog.engines import Backoff, JobRecord, engine_for
from queuelog.engines.postgres.engine import _PLAIN_COMPLETE_MANY
from queuelog.engines.postgres.sql import bind_items
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
