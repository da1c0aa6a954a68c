"""Claims and reports sent again (docs/operations.md#outages): a claim repeated with its request id answers
the jobs and leases the first one got; a complete or fail repeated with its lease token answers as the first
did. Both engines."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from queuelog.engines import Backoff, Unchanged
from tests.engines.conftest import NOW, later, new

FIXED = Backoff(10, 100, lambda: 0.5)


def claim(engine, worker="w", *, at=NOW, lease=30, limit=1, request_id=None):
    return engine.claim(
        worker, now=at, lease_seconds=lease, limit=limit, types=None, backoff=FIXED, request_id=request_id
    )


def events(engine, job_id):
    return [e.event for e in engine.events(job_id)]


def test_a_claim_repeated_with_its_request_id_answers_the_same_jobs_and_leases(engine):
    engine.insert("alice", [new(payload={"n": n}) for n in range(5)], NOW)
    first = claim(engine, "w1", limit=2, request_id="r-1").jobs
    assert len(first) == 2
    again = claim(engine, "w1", at=later(5), limit=2, request_id="r-1").jobs
    assert again == first  # the same jobs, tokens and lease ends: nothing new leased
    assert all(events(engine, job.id).count("claimed") == 1 for job in first)
    # Another id, or no id: new jobs. The same id from another worker key: its own claim.
    other = claim(engine, "w1", at=later(6), limit=2, request_id="r-2").jobs
    assert {j.id for j in other}.isdisjoint(j.id for j in first) and len(other) == 2
    theirs = claim(engine, "w2", at=later(7), limit=2, request_id="r-1").jobs
    assert [j.worker_id for j in theirs] == ["w2"]
    assert len({j.id for j in first + other + theirs}) == 5


def test_a_request_id_answers_only_the_jobs_still_held_under_it_and_only_while_the_lease_lasts(engine):
    engine.insert("alice", [new(), new(), new()], NOW)
    first = claim(engine, "w1", limit=2, lease=30, request_id="r").jobs
    done = engine.complete(first[0].id, "w1", first[0].lease_token, now=later(1), result_json=None)
    assert done.status == "completed"
    assert claim(engine, "w1", at=later(2), limit=2, request_id="r").jobs == [first[1]]
    # After the lease: the id names nothing any more, and the claim is a new one.
    fresh = claim(engine, "w1", at=later(31), limit=2, request_id="r").jobs
    assert fresh and all(j.lease_token != first[1].lease_token for j in fresh)


def test_a_claim_that_leased_nothing_keeps_no_request(engine):
    assert claim(engine, "w1", request_id="r").jobs == []
    [(job, _)] = engine.insert("alice", [new()], later(1))
    assert [j.id for j in claim(engine, "w1", at=later(2), request_id="r").jobs] == [job.id]


def test_concurrent_claims_with_one_request_id_lease_one_set_of_jobs(engine):
    engine.insert("alice", [new(payload={"n": n}) for n in range(40)], NOW)
    threads = 8
    start = threading.Barrier(threads)

    def work(_):
        start.wait()
        return [(j.id, j.lease_token) for j in claim(engine, "w1", limit=3, request_id="same").jobs]

    with ThreadPoolExecutor(threads) as pool:
        answers = list(pool.map(work, range(threads)))
    assert answers[0] and len(answers[0]) == 3
    assert all(answer == answers[0] for answer in answers)  # every attempt: the one set
    assert len(engine.list_jobs(status="running", limit=100)) == 3


def test_a_report_repeated_with_its_lease_token_answers_as_the_first_did(engine):
    engine.insert("alice", [new(), new(max_retries=0)], NOW)
    a, b = claim(engine, "w1", limit=2).jobs
    done = engine.complete(a.id, "w1", a.lease_token, now=later(1), result_json='{"ok": 1}')
    assert engine.complete(a.id, "w1", a.lease_token, now=later(2), result_json='{"ok": 2}') == done
    # A fail repeated after the complete committed is not that report: refused, the job unchanged.
    refused = engine.fail(a.id, "w1", a.lease_token, now=later(2), error="x", retryable=True, backoff=FIXED)
    assert refused == done  # the token ended the attempt: its reports answer the job as it is
    assert events(engine, a.id).count("completed") == 1
    failed = engine.fail(b.id, "w1", b.lease_token, now=later(3), error="boom", retryable=True, backoff=FIXED)
    assert failed.status == "failed"
    assert (
        engine.fail(b.id, "w1", b.lease_token, now=later(4), error="boom", retryable=True, backoff=FIXED)
        == failed
    )
    assert events(engine, b.id).count("failed") == 1
    # Never for another worker, another token, or a job that is running again.
    assert engine.complete(a.id, "w2", a.lease_token, now=later(5), result_json=None) == Unchanged(done)
    assert engine.complete(a.id, "w1", "f" * 32, now=later(5), result_json=None) == Unchanged(done)


def test_a_repeat_after_the_job_was_leased_again_is_refused(engine):
    [(job, _)] = engine.insert("alice", [new()], NOW)
    held = claim(engine, "w1").jobs[0]
    pending = engine.fail(
        job.id, "w1", held.lease_token, now=NOW, error="x", retryable=True, backoff=Backoff(0, 0)
    )
    assert pending.status == "pending"
    assert (
        engine.fail(job.id, "w1", held.lease_token, now=NOW, error="x", retryable=True, backoff=FIXED)
        == pending
    )
    again = claim(engine, "w2", at=later(1)).jobs[0]
    outcome = engine.complete(job.id, "w1", held.lease_token, now=later(2), result_json=None)
    assert outcome == Unchanged(again)


def test_complete_many_answers_repeated_items_as_the_first_time(engine):
    engine.insert("alice", [new(), new()], NOW)
    a, b = claim(engine, "w1", limit=2).jobs
    first = engine.complete_many("w1", [(a.id, a.lease_token, None)], now=later(1))
    both = engine.complete_many(
        "w1", [(a.id, a.lease_token, None), (b.id, b.lease_token, None)], now=later(2)
    )
    assert both[0] == first[0] and both[1].status == "completed"
    assert events(engine, a.id).count("completed") == 1
