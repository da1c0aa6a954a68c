"""Every ``Engine`` operation, run against each engine directly (no app): both must behave alike.

Times are passed in (``NOW`` and ``later(s)``), so leases, backoffs and delays are exact and no test sleeps.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from queuelog.engines import Backoff, JobRecord, KeyConflict, ReportedJob, Unchanged
from queuelog.engines.postgres import PostgresEngine
from queuelog.engines.sqlite import SQLiteEngine
from tests.engines.conftest import NOW, later, new, set_type

NO_WAIT = Backoff(0, 0)
FIXED = Backoff(10, 100, lambda: 0.5)  # retry n waits d * 0.75 with d = min(100, 10 * 2^(n-1))


def claim(engine, worker="w", *, at=NOW, lease=30, limit=1, types=None, backoff=FIXED):
    return engine.claim(worker, now=at, lease_seconds=lease, limit=limit, types=types, backoff=backoff)


def history(engine, job_id):
    return [(e.event, e.actor, e.attempt) for e in engine.events(job_id)]


def test_engine_for_picks_the_databases_engine(db, engine):
    assert engine.name == db.dialect
    assert isinstance(engine, SQLiteEngine if db.dialect == "sqlite" else PostgresEngine)


def test_insert_returns_the_stored_job_and_its_history(engine):
    [(job, created)] = engine.insert("alice", [new(payload={"to": "ada"}, priority=20)], NOW)
    assert created and isinstance(job, JobRecord)
    assert (job.type, json.loads(job.payload), job.priority, job.status, job.owner) == (
        "email",
        {"to": "ada"},
        20,
        "pending",
        "alice",
    )
    assert (job.retry_count, job.max_retries, job.worker_id, job.lease_token, job.result) == (
        0,
        3,
        None,
        None,
        None,
    )
    assert job.created_at == job.available_at == NOW and job.created_at.tzinfo is not None
    assert engine.get(job.id) == job and job["status"] == "pending"
    assert history(engine, job.id) == [("enqueued", "alice", 0)]
    assert engine.get(job.id + 1) is None


def test_insert_is_idempotent_per_owner_and_all_or_nothing(engine):
    [(first, _)] = engine.insert("alice", [new(key="k1", payload={"n": 1})], NOW)
    [(again, created)] = engine.insert("alice", [new(key="k1", payload={"n": 1})], later(5))
    assert not created and again == first
    [(bobs, created)] = engine.insert("bob", [new(key="k1", payload={"n": 1})], NOW)
    assert created and bobs.id != first.id
    with pytest.raises(KeyConflict) as info:
        engine.insert("alice", [new(key="k2"), new(), new(key="k1", payload={"n": 2})], NOW)
    assert (info.value.index, info.value.job.id) == (2, first.id)
    assert [j.id for j in engine.list_jobs()] == [bobs.id, first.id]  # the batch left nothing


def test_concurrent_inserts_with_one_key_make_one_job(engine):
    threads = 8
    start = threading.Barrier(threads)

    def insert(_):
        start.wait()
        return engine.insert("alice", [new(key="once", payload={"n": 1})], NOW)[0]

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(insert, range(threads)))
    assert sum(created for _, created in results) == 1
    assert {job.id for job, _ in results} == {engine.list_jobs()[0].id}
    assert len(engine.list_jobs()) == 1 and history(engine, results[0][0].id) == [("enqueued", "alice", 0)]


def test_claim_order_is_priority_then_available_at_then_id(db, engine):
    ids = {}
    for name, priority, at in [
        ("late", 0, later(5)),
        ("b", 10, later(1)),
        ("c", 10, later(1)),
        ("a", 10, NOW),
    ]:
        ids[name] = engine.insert("alice", [new(priority=priority, at=at)], NOW)[0][0].id
    ids["future"] = engine.insert("alice", [new(priority=30, at=later(60))], NOW)[0][0].id
    claimed = claim(engine, at=later(10), limit=10).jobs
    assert [j.id for j in claimed] == [ids["a"], ids["b"], ids["c"], ids["late"]]


def test_claim_leases_under_a_fresh_token_and_logs(engine):
    engine.insert("alice", [new(), new()], NOW)
    first = claim(engine, "w1", lease=45).jobs[0]
    second = claim(engine, "w2", at=later(1)).jobs[0]
    assert (first.status, first.worker_id, first.claimed_at) == ("running", "w1", NOW)
    assert first.lease_expires_at == later(45) and len(first.lease_token) == 32
    assert first.lease_token != second.lease_token
    assert history(engine, first.id) == [("enqueued", "alice", 0), ("claimed", "w1", 1)]
    assert claim(engine, at=later(2)).jobs == []


def test_claim_filters_types_and_skips_paused_ones(db, engine):
    set_type(db, "pdf", paused=True)
    set_type(db, "sync")
    engine.insert("alice", [new("pdf", priority=30), new("sync"), new("email")], NOW)
    assert [j.type for j in claim(engine, types=["pdf", "sync"], limit=5).jobs] == ["sync"]
    assert claim(engine, types=["pdf"]).jobs == []
    assert [j.type for j in claim(engine, limit=5).jobs] == ["email"]
    set_type(db, "pdf", paused=False)
    assert [j.type for j in claim(engine, limit=5).jobs] == ["pdf"]


def test_concurrent_batch_claims_hand_out_every_job_exactly_once(engine):
    total, threads = 300, 8
    for first in range(0, total, 100):
        engine.insert("alice", [new(payload={"n": n}) for n in range(first, first + 100)], NOW)
    start = threading.Barrier(threads)

    def work(index):
        start.wait()
        mine = []
        while jobs := claim(engine, f"w{index}", limit=7).jobs:
            assert len(jobs) <= 7 and all(j.worker_id == f"w{index}" for j in jobs)
            mine += [j.id for j in jobs]
        return mine

    with ThreadPoolExecutor(threads) as pool:
        claimed = [job_id for mine in pool.map(work, range(threads)) for job_id in mine]
    assert len(claimed) == len(set(claimed)) == total
    assert {j.id for j in engine.list_jobs(limit=total)} == set(claimed)
    assert engine.list_jobs(status="pending") == []


def test_reports_are_fenced_by_worker_and_lease_token(engine):
    [(job, _)] = engine.insert("alice", [new()], NOW)
    held = claim(engine, "w1").jobs[0]
    for outcome in (
        engine.complete(job.id, "w1", "f" * 32, now=NOW, result_json=None),
        engine.complete(job.id, "w2", held.lease_token, now=NOW, result_json=None),
        engine.heartbeat(job.id, "w2", held.lease_token, now=NOW, lease_seconds=60),
        engine.fail(job.id, "w1", "0" * 32, now=NOW, error="x", retryable=True, backoff=FIXED),
    ):
        assert outcome == Unchanged(held)
    assert engine.complete(job.id + 99, "w1", held.lease_token, now=NOW, result_json=None) == Unchanged(None)
    beat = engine.heartbeat(job.id, "w1", held.lease_token, now=later(20), lease_seconds=60)
    assert beat.lease_expires_at == later(80) and beat.updated_at == later(20)
    done = engine.complete(job.id, "w1", held.lease_token, now=later(21), result_json='{"ok": true}')
    assert (done.status, json.loads(done.result), done.finished_at, done.lease_token) == (
        "completed",
        {"ok": True},
        later(21),
        None,
    )
    # The same report again answers as the first did, and changes nothing (docs/operations.md#outages).
    assert engine.complete(job.id, "w1", held.lease_token, now=later(22), result_json=None) == done
    assert engine.complete(job.id, "w2", held.lease_token, now=later(22), result_json=None) == Unchanged(done)
    assert history(engine, job.id)[-1] == ("completed", "w1", 1)
    assert [e for e, _, _ in history(engine, job.id)].count("completed") == 1


def test_an_expired_lease_is_settled_by_the_next_claim_and_the_old_holder_fenced(engine):
    [(job, _)] = engine.insert("alice", [new(max_retries=1)], NOW)
    first = claim(engine, "w1", lease=30).jobs[0]
    settled = claim(engine, "w2", at=later(31))
    assert settled.jobs == []  # the backoff (7.5 s here) keeps it back
    [expired] = settled.expired
    assert (expired.id, expired.status, expired.retry_count, expired.error) == (
        job.id,
        "pending",
        1,
        "lease expired",
    )
    assert expired.lease_token is None and later(36) <= expired.available_at <= later(41)
    assert claim(engine, "w2", at=later(35)).jobs == []
    second = claim(engine, "w2", at=later(42)).jobs[0]
    assert (second.id, second.retry_count) == (job.id, 1)
    assert engine.complete(job.id, "w1", first.lease_token, now=later(43), result_json=None) == Unchanged(
        second
    )
    assert history(engine, job.id) == [
        ("enqueued", "alice", 0),
        ("claimed", "w1", 1),
        ("lease_expired", "system", 1),
        ("claimed", "w2", 2),
    ]
    assert "held by w1" in engine.events(job.id)[2].error


def test_with_no_backoff_the_settling_claim_hands_the_job_out_at_once(engine):
    [(job, _)] = engine.insert("alice", [new()], NOW)
    claim(engine, "w1", lease=30, backoff=NO_WAIT)
    settled = claim(engine, "w2", at=later(31), backoff=NO_WAIT)
    assert [j.id for j in settled.expired] == [job.id]
    [again] = settled.jobs
    assert (again.id, again.worker_id, again.retry_count, again.status) == (job.id, "w2", 1, "running")


def test_expiry_out_of_retries_fails_the_job(engine):
    [(job, _)] = engine.insert("alice", [new(max_retries=0)], NOW)
    claim(engine, "w1", lease=30)
    assert engine.expire(now=later(30), backoff=FIXED) == []  # not before the lease ends
    [failed] = engine.expire(now=later(31), backoff=FIXED)
    assert (failed.status, failed.retry_count, failed.finished_at) == ("failed", 0, later(31))
    assert history(engine, job.id)[-1] == ("lease_expired", "system", 1)
    assert engine.expire(now=later(60), backoff=FIXED) == []


def test_fail_backs_off_by_the_policy_then_fails_for_good(engine):
    [(job, _)] = engine.insert("alice", [new(max_retries=2)], NOW)
    held = claim(engine).jobs[0]
    retrying = engine.fail(
        job.id, "w", held.lease_token, now=NOW, error="boom", retryable=True, backoff=FIXED
    )
    assert (retrying.status, retrying.retry_count, retrying.error) == ("pending", 1, "boom")
    assert retrying.available_at == later(7.5)  # d = 10: 5 + 0.5 * 5
    held = claim(engine, at=later(8)).jobs[0]
    retrying = engine.fail(
        job.id, "w", held.lease_token, now=later(8), error="boom", retryable=True, backoff=FIXED
    )
    assert retrying.available_at == later(8 + 15)  # d = 20
    held = claim(engine, at=later(30)).jobs[0]
    failed = engine.fail(
        job.id, "w", held.lease_token, now=later(30), error="last", retryable=True, backoff=FIXED
    )
    assert (failed.status, failed.retry_count, failed.finished_at) == ("failed", 2, later(30))
    assert [(e.event, e.attempt, e.error) for e in engine.events(job.id) if e.error] == [
        ("retry_scheduled", 1, "boom"),
        ("retry_scheduled", 2, "boom"),
        ("failed", 3, "last"),
    ]
    [(other, _)] = engine.insert("alice", [new()], NOW)
    held = claim(engine, at=later(31)).jobs[0]
    final = engine.fail(
        other.id, "w", held.lease_token, now=later(31), error="no", retryable=False, backoff=FIXED
    )
    assert (final.status, final.retry_count) == ("failed", 0)


def test_complete_each_answers_as_complete_many_does_without_the_jobs(engine):
    """The compact batch completion: the same transitions, history and refusals, and for each job
    completed (a repeated report too) its id, where complete_many answers the job."""
    engine.insert("alice", [new(), new(), new()], NOW)
    a, b, c = claim(engine, "w", limit=3).jobs
    items = [(c.id, c.lease_token, '{"n": 3}'), (999, a.lease_token, None), (b.id, "x" * 32, None)]
    answers = engine.complete_each("w", [*items, (a.id, a.lease_token, None)], now=later(1))
    done_c, done_a = ReportedJob(c.id, "completed", False), ReportedJob(a.id, "completed", False)
    assert answers == [done_c, Unchanged(None), Unchanged(b), done_a]
    done = engine.get(c.id)
    assert (done.status, json.loads(done.result), done.finished_at) == ("completed", {"n": 3}, later(1))
    assert history(engine, a.id)[-1] == ("completed", "w", 1) and history(engine, b.id)[-1] == (
        "claimed",
        "w",
        1,
    )
    again = engine.complete_each(
        "w", [(a.id, a.lease_token, None), (b.id, b.lease_token, None)], now=later(2)
    )
    assert again == [done_a, ReportedJob(b.id, "completed", False)]  # a: the repeat of its report
    assert [event for event, _, _ in history(engine, a.id)].count("completed") == 1
    assert engine.get(b.id).status == "completed"


def test_complete_each_answers_a_repeated_failure_report_with_the_status_it_left(engine):
    """A completion sent with the token of the failure that ended the attempt repeats that report: it
    answers the job as the failure left it (pending again here), as complete_many does, not completed."""
    [(job, _)] = engine.insert("alice", [new()], NOW)
    [held] = claim(engine).jobs
    engine.fail(job.id, "w", held.lease_token, now=later(1), error="no", retryable=True, backoff=FIXED)
    [answer] = engine.complete_each("w", [(job.id, held.lease_token, None)], now=later(2))
    [whole] = engine.complete_many("w", [(job.id, held.lease_token, None)], now=later(2))
    assert answer == ReportedJob(job.id, "pending", False) and whole.status == "pending"
    assert engine.get(job.id).status == "pending"


def test_complete_many_judges_each_item_alone_in_order(engine):
    engine.insert("alice", [new(), new(), new()], NOW)
    a, b, c = claim(engine, "w", limit=3).jobs
    answers = engine.complete_many(
        "w",
        [
            (c.id, c.lease_token, '{"n": 3}'),
            (999, a.lease_token, None),
            (b.id, "x" * 32, None),
            (a.id, a.lease_token, None),
        ],
        now=later(1),
    )
    assert [type(answer).__name__ for answer in answers] == [
        "JobRecord",
        "Unchanged",
        "Unchanged",
        "JobRecord",
    ]
    assert (answers[0].id, json.loads(answers[0].result), answers[0].status) == (c.id, {"n": 3}, "completed")
    assert answers[1] == Unchanged(None) and answers[2] == Unchanged(b)
    assert history(engine, a.id)[-1] == ("completed", "w", 1) and history(engine, b.id)[-1] == (
        "claimed",
        "w",
        1,
    )
