"""A write that PostgreSQL rolls back to break a deadlock runs again, and does its work once; what was
committed before it is never run again (``retry_aborted``, docs/operations.md#outages). The deadlocks are
real: a session of the test's own holds the counters a transition moves, waits until the engine's
transaction holds the job and waits for the counters, then updates the job. Slow: PostgreSQL looks for
the deadlock after its deadlock_timeout (1 s)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import queuelog.engines.postgres.engine as postgres_engine
from queuelog.drivers import DatabaseUnavailable
from queuelog.engines import Backoff, JobRecord, ReportedJob, engine_for
from queuelog.engines.postgres.engine import retry_aborted
from tests.engines.conftest import NOW, connect, later, new

pytestmark = pytest.mark.slow
ENGINE_LOG = "queuelog.engines.postgres.engine"
WAITING = "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)))"


@contextmanager
def deadlock_on(pg, job_id: int) -> Iterator[None]:
    """While the block runs, a deadlock with the first transaction that holds job ``job_id`` and waits
    for the counters: PostgreSQL rolls that transaction back (its deadlock_timeout is the shorter)."""
    other = connect(pg)
    try:
        try:
            other.execute("SET deadlock_timeout = '30s'")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("SET deadlock_timeout needs a superuser: the deadlock cannot be steered")
        # Every shard of every counter exists, so that the engine's trigger must wait for them.
        other.execute(
            "INSERT INTO job_counts (owner, type, priority, status, shard, n) SELECT 'alice', 'email', 0, st, s, 0"
            " FROM unnest(ARRAY['pending', 'running', 'completed', 'failed']) AS st, generate_series(0, 7) AS s"
            " ON CONFLICT DO NOTHING"
        )
        other.execute("BEGIN")
        other.execute("SELECT 1 FROM job_counts FOR UPDATE")  # the counters first
        failures: list[BaseException] = []

        def steer() -> None:
            try:
                deadline = time.monotonic() + 10
                while not other.execute(WAITING).fetchone()[0]:
                    assert time.monotonic() < deadline, "no transaction waited for the counters"
                    time.sleep(0.01)
                # The engine holds the job and waits for the counters: now the job, the other way round.
                other.execute("UPDATE jobs SET updated_at = updated_at WHERE id = %s", [job_id])
                other.execute("COMMIT")
            except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
                failures.append(exc)
                other.execute("ROLLBACK")

        steering = threading.Thread(target=steer)
        steering.start()
        try:
            yield
        finally:
            steering.join(timeout=30)
        assert not steering.is_alive() and not failures, failures
    finally:
        other.close()


def on_claim_transaction(monkeypatch, number: int, pg, job_id: int) -> list[int]:
    """Steer the deadlock onto the engine's ``number``-th claim transaction. The wrapper only starts the
    other session at that moment; the engine's own function runs as it is. Returns the count of calls."""
    real = postgres_engine._claim_under_lock
    calls = [0]

    def timed(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] != number:
            return real(*args, **kwargs)
        with deadlock_on(pg, job_id):
            return real(*args, **kwargs)

    monkeypatch.setattr(postgres_engine, "_claim_under_lock", timed)
    return calls


def retries(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "rolled it back (deadlock detected)" in r.getMessage()]


def counts(pg) -> dict[str, int]:
    with connect(pg) as conn:
        return dict(conn.execute("SELECT status, sum(n) FROM job_counts GROUP BY status").fetchall())


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


@pytest.mark.parametrize("operation", [_complete, _complete_each_and_claim])
def test_a_completion_rolled_back_to_break_a_deadlock_runs_again_and_completes_once(pg, caplog, operation):
    engine = engine_for(pg)
    engine.insert("alice", [new("email"), new("email")], NOW)
    [job] = engine.claim("w", now=NOW, lease_seconds=60, limit=1, types=None, backoff=Backoff(0, 0)).jobs
    with caplog.at_level(logging.WARNING, logger=ENGINE_LOG), deadlock_on(pg, job.id):
        answer = operation(engine, job.id, job.lease_token)
    assert isinstance(answer, JobRecord | ReportedJob) and answer.status == "completed"
    assert len(retries(caplog)) == 1
    assert [event.event for event in engine.events(job.id)].count(
        "completed"
    ) == 1  # the aborted try left none
    assert counts(pg) == {
        "pending": 0 if operation is _complete_each_and_claim else 1,
        "running": 1 if operation is _complete_each_and_claim else 0,
        "completed": 1,
        "failed": 0,
    }


def test_a_claims_second_pass_rolled_back_runs_alone_and_every_leased_job_is_answered(
    pg, caplog, monkeypatch
):
    """A claim that settles an expired lease claims once more (its snapshot cannot see the job it put
    back): a deadlock there reruns that pass only, never the first, whose jobs are leased already."""
    engine = engine_for(pg)
    engine.insert("alice", [new("email") for _ in range(3)], NOW)
    [stale] = engine.claim("w0", now=NOW, lease_seconds=5, limit=1, types=None, backoff=Backoff(0, 0)).jobs
    calls = on_claim_transaction(monkeypatch, 2, pg, stale.id)
    with caplog.at_level(logging.WARNING, logger=ENGINE_LOG):
        claimed = engine.claim(
            "w", now=later(10), lease_seconds=60, limit=3, types=None, backoff=Backoff(0, 0)
        )
    assert calls[0] == 3  # the first pass, the second (rolled back), the second again
    assert len(retries(caplog)) == 1
    assert sorted(job.id for job in claimed.jobs) == [1, 2, 3]
    assert [job.id for job in claimed.expired] == [stale.id]
    with connect(pg) as conn:
        leased = conn.execute("SELECT id, lease_token FROM jobs WHERE worker_id = 'w' ORDER BY id").fetchall()
    assert leased == sorted((job.id, job.lease_token) for job in claimed.jobs)  # none held by nobody


def test_a_reports_claim_rolled_back_runs_alone_and_the_report_is_answered(pg, caplog, monkeypatch):
    """A failure that claims next, its job due again at once: the claim after the report's statement is
    rolled back, and runs again alone; the committed failure is neither lost to a 503 nor made twice."""
    engine = engine_for(pg)
    engine.insert("alice", [new("email")], NOW)
    [job] = engine.claim("w", now=NOW, lease_seconds=60, limit=1, types=None, backoff=Backoff(0, 0)).jobs
    calls = on_claim_transaction(monkeypatch, 2, pg, job.id)
    with caplog.at_level(logging.WARNING, logger=ENGINE_LOG):
        failed, claimed = engine.fail_and_claim(
            job.id,
            "w",
            job.lease_token,
            now=later(1),
            error="boom",
            retryable=True,
            lease_seconds=60,
            limit=1,
            types=None,
            backoff=Backoff(0, 0),
        )
    assert calls[0] == 3  # the report and its claim, the claim after it (rolled back), that claim again
    assert len(retries(caplog)) == 1
    assert isinstance(failed, JobRecord) and failed.status == "pending" and failed.retry_count == 1
    assert [(again.id, again.retry_count) for again in claimed.jobs] == [(job.id, 1)]  # claimed back, once
    events = [event.event for event in engine.events(job.id)]
    assert events == ["enqueued", "claimed", "retry_scheduled", "claimed"]


def test_a_conflict_is_tried_five_times_in_all_then_goes_up(caplog):
    """Four retries, a warning before each; the fifth conflict in a row goes up (a 503 for a request)."""
    for conflicts, succeeds in ((4, True), (5, False)):
        tries: list[int] = []

        @retry_aborted
        def write(conflicts: int = conflicts, tries: list[int] = tries) -> str:
            tries.append(1)
            if len(tries) <= conflicts:
                raise DatabaseUnavailable("deadlock detected", conflict=True)
            return "written"

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=ENGINE_LOG):
            if succeeds:
                assert write() == "written"
            else:
                with pytest.raises(DatabaseUnavailable) as raised:
                    write()
                assert raised.value.reason == "conflict"
        assert len(tries) == min(conflicts + 1, 5)
        assert len(retries(caplog)) == 4


def test_an_error_other_than_a_conflict_is_not_tried_again(caplog):
    tries: list[int] = []

    @retry_aborted
    def write() -> None:
        tries.append(1)
        raise DatabaseUnavailable("connection refused")

    with caplog.at_level(logging.WARNING, logger=ENGINE_LOG), pytest.raises(DatabaseUnavailable):
        write()
    assert len(tries) == 1 and not retries(caplog)
