"""A write that PostgreSQL rolls back to break a deadlock runs again, and does its work once
(``retry_aborted``): forced here with a session of the test's own that takes the locks a completion needs
in the other order (docs/operations.md#outages). Slow: PostgreSQL looks for the deadlock after its
deadlock_timeout (1 s)."""

from __future__ import annotations

import logging
import threading
import time

import psycopg
import pytest

from queuelog.engines import Backoff, JobRecord, ReportedJob, engine_for
from tests.engines.conftest import NOW, connect, later, new


def _complete(engine, job_id, token):
    return engine.complete(job_id, "w", token, now=later(1), result_json=None)


def _complete_each_and_claim(engine, job_id, token):
    outcomes, claim = engine.complete_each_and_claim(
        "w",
        [(job_id, token, None)],
        now=later(1),
        lease_seconds=60,
        limit=1,
        types=None,
        backoff=Backoff(0, 0),
    )
    assert [job.id for job in claim.jobs] == [job_id + 1]  # the claim after the completion, once
    return outcomes[0]


@pytest.mark.slow
@pytest.mark.parametrize("operation", [_complete, _complete_each_and_claim])
def test_a_completion_rolled_back_to_break_a_deadlock_runs_again_and_completes_once(pg, caplog, operation):
    engine = engine_for(pg)
    engine.insert("alice", [new("email"), new("email")], NOW)
    held = engine.claim("w", now=NOW, lease_seconds=60, limit=1, types=None, backoff=Backoff(0, 0))
    [job] = held.jobs
    other = connect(pg)
    try:
        try:
            other.execute("SET deadlock_timeout = '30s'")  # the completion's session finds the deadlock
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("SET deadlock_timeout needs a superuser: the deadlock cannot be steered")
        # Every shard of the counters the completion moves exists, so that its trigger must wait for them.
        other.execute(
            "INSERT INTO job_counts (owner, type, priority, status, shard, n) SELECT 'alice', 'email', 0, st, s, 0"
            " FROM unnest(ARRAY['running', 'completed']) AS st, generate_series(0, 7) AS s ON CONFLICT DO NOTHING"
        )
        other.execute("BEGIN")
        other.execute("SELECT 1 FROM job_counts FOR UPDATE")  # the counters first

        answers: list[object] = []
        with caplog.at_level(logging.WARNING, logger="queuelog.engines.postgres.engine"):
            worker = threading.Thread(
                target=lambda: answers.append(operation(engine, job.id, job.lease_token))
            )
            worker.start()
            deadline = time.monotonic() + 10
            waiting = "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)))"
            while not other.execute(waiting).fetchone()[0]:
                assert time.monotonic() < deadline, "the completion never waited for the counters"
                time.sleep(0.01)
            # The completion holds the job and waits for the counters: now the job, the other way round.
            other.execute("UPDATE jobs SET updated_at = updated_at WHERE id = %s", [job.id])
            other.execute("COMMIT")
            worker.join(timeout=30)
        assert not worker.is_alive()
    finally:
        other.close()
    [answer] = answers
    assert isinstance(answer, JobRecord | ReportedJob) and answer.status == "completed"
    retries = [r for r in caplog.records if "rolled it back (deadlock detected)" in r.getMessage()]
    assert len(retries) == 1
    events = [event.event for event in engine.events(job.id)]
    assert events.count("completed") == 1  # the rolled-back try left nothing behind
    with connect(pg) as conn:
        counts = dict(conn.execute("SELECT status, sum(n) FROM job_counts GROUP BY status").fetchall())
    assert counts["completed"] == 1 and counts["running"] == (
        1 if operation is _complete_each_and_claim else 0
    )
