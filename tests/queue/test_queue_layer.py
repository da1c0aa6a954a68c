"""The queue layer itself, with an injectable clock: leases, backoff and delays without sleeping."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from queuelog.queue import JobSpec, NotLeaseHolder, backoff_seconds


def spec(**kw) -> JobSpec:
    payload = kw.pop("payload", {})
    return JobSpec(type=kw.pop("type", "email"), payload=payload, payload_json=json.dumps(payload), **kw)


def test_backoff_formula():
    assert backoff_seconds(1, 0, 100) == 0
    # d = min(cap, base * 2 ** (n - 1)); wait = d/2 + rand * d/2
    assert [backoff_seconds(n, 10, 100, lambda: 0.0) for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 40, 50]
    assert [backoff_seconds(n, 10, 100, lambda: 1.0) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 80, 100]
    assert backoff_seconds(25, 2, 3600, lambda: 1.0) == 3600


def test_failed_job_waits_for_its_backoff(q, clock):
    job, _ = q.enqueue("alice", spec())
    held = q.claim("w")[0]
    failed = q.fail(job["id"], "w", held["lease_token"], "boom")
    assert failed["status"] == "pending" and failed["retry_count"] == 1
    assert failed["available_at"] == clock.now + timedelta(seconds=7.5)  # d = 10: 5 + 0.5 * 5
    clock.advance(7)
    assert q.claim("w") == []
    clock.advance(1)
    held = q.claim("w")[0]
    failed = q.fail(job["id"], "w", held["lease_token"], "boom")
    assert failed["available_at"] == clock.now + timedelta(seconds=15)  # d = 20


def test_delay_and_run_at(q, clock):
    delayed, _ = q.enqueue("alice", spec(delay_seconds=60))
    at, _ = q.enqueue("alice", spec(run_at=clock.now + timedelta(seconds=90)))
    assert delayed["available_at"] == clock.now + timedelta(seconds=60)
    assert q.claim("w") == []
    clock.advance(60)
    assert [j["id"] for j in q.claim("w", limit=5)] == [delayed["id"]]
    clock.advance(30)
    assert [j["id"] for j in q.claim("w", limit=5)] == [at["id"]]


def test_expired_lease_returns_job_to_pending_at_next_claim(q, clock):
    job, _ = q.enqueue("alice", spec(max_retries=1))
    first = q.claim("w1")[0]
    clock.advance(31)
    # The job is re-queued by the next claim (after its backoff) and the old holder is fenced off.
    assert q.claim("w2") == []
    clock.advance(10)
    second = q.claim("w2")[0]
    assert second["id"] == job["id"] and second["retry_count"] == 1
    with pytest.raises(NotLeaseHolder):
        q.complete(job["id"], "w1", first["lease_token"])
    done = q.complete(job["id"], "w2", second["lease_token"])
    assert done["status"] == "completed"
    events = [(e["event"], e["actor"], e["attempt"]) for e in q.events(job["id"])]
    assert events == [
        ("enqueued", "alice", 0),
        ("claimed", "w1", 1),
        ("lease_expired", "system", 1),
        ("claimed", "w2", 2),
        ("completed", "w2", 2),
    ]
    assert "held by w1" in q.events(job["id"])[2]["error"]


def test_expired_lease_out_of_retries_fails_the_job(q, clock):
    job, _ = q.enqueue("alice", spec(max_retries=0))
    q.claim("w1")
    clock.advance(31)
    expired = q.expire_leases()
    assert [(j["id"], j["status"]) for j in expired] == [(job["id"], "failed")]
    assert q.get(job["id"])["error"] == "lease expired"


def test_heartbeat_extends_the_lease(q, clock):
    job, _ = q.enqueue("alice", spec())
    held = q.claim("w1")[0]
    clock.advance(25)
    beat = q.heartbeat(job["id"], "w1", held["lease_token"], lease_seconds=60)
    assert beat["lease_expires_at"] == clock.now + timedelta(seconds=60)
    clock.advance(40)
    assert q.expire_leases() == []
    with pytest.raises(NotLeaseHolder):
        q.heartbeat(job["id"], "w2", held["lease_token"])


def test_claim_order_priority_then_available_at_then_id(q, clock):
    a, _ = q.enqueue("alice", spec(priority=0, delay_seconds=5))  # older id, but available later
    clock.advance(1)
    b, _ = q.enqueue("alice", spec(priority=10))
    c, _ = q.enqueue("alice", spec(priority=10))
    d, _ = q.enqueue("alice", spec(priority=0))
    clock.advance(10)
    assert [j["id"] for j in q.claim("w", limit=10)] == [b["id"], c["id"], d["id"], a["id"]]


def test_run_at_in_the_past_cannot_jump_the_queue(q, clock):
    first, _ = q.enqueue("alice", spec())
    backdated, _ = q.enqueue("alice", spec(run_at=clock.now - timedelta(days=365)))
    assert backdated["available_at"] == clock.now
    assert [j["id"] for j in q.claim("w", limit=2)] == [first["id"], backdated["id"]]


def test_enqueue_many_is_all_or_nothing(q):
    from queuelog.queue import Code, JobValidationError

    with pytest.raises(JobValidationError) as info:
        q.enqueue_many("alice", [spec(), spec(type="nope"), spec()])
    assert info.value.code is Code.UNKNOWN_TYPE and info.value.field == "jobs[1].type"
    assert info.value.params == {"type": "nope", "allowed": ["email", "pdf", "sync"]}
    assert q.list_jobs() == []


def test_a_completed_job_keeps_earlier_errors_in_its_history_only(q, clock):
    job, _ = q.enqueue("alice", spec(max_retries=2))
    first = q.claim("w")[0]
    q.fail(job["id"], "w", first["lease_token"], "SMTP said no")
    clock.advance(60)
    for completing in (
        lambda j: q.complete(j["id"], "w", j["lease_token"]),
        lambda j: q.complete_many("w", [(j["id"], j["lease_token"], None)])[0][1],
    ):
        held = q.claim("w")[0]
        done = completing(held)
        assert done["status"] == "completed" and done["error"] is None
        assert q.get(job["id"])["error"] is None
        assert [e["error"] for e in q.events(job["id"]) if e["event"] == "retry_scheduled"] == [
            "SMTP said no"
        ]
        job, _ = q.enqueue("alice", spec(max_retries=2))
        failing = q.claim("w")[0]
        q.fail(job["id"], "w", failing["lease_token"], "SMTP said no")
        clock.advance(60)


def test_a_batch_completion_names_each_job_once(q):
    job, _ = q.enqueue("alice", spec())
    held = q.claim("w")[0]
    with pytest.raises(ValueError, match="each job may appear once"):
        q.complete_many("w", [(job["id"], "not-the-token", None), (job["id"], held["lease_token"], None)])
    assert q.get(job["id"])["status"] == "running"  # nothing was done


def test_a_compact_batch_completion_answers_none_or_the_refusal(q):
    (a, _), (b, _) = q.enqueue("alice", spec()), q.enqueue("alice", spec())
    held = {job["id"]: job for job in q.claim("w", limit=2)}
    answers = q.complete_each("w", [(a["id"], held[a["id"]]["lease_token"], None), (b["id"], "x" * 32, None)])
    assert answers[0] == (a["id"], None) and answers[1][0] == b["id"]
    assert isinstance(answers[1][1], NotLeaseHolder)
    assert q.get(a["id"])["status"] == "completed" and q.get(b["id"])["status"] == "running"
    with pytest.raises(ValueError, match="each job may appear once"):
        q.complete_each("w", [(b["id"], "x" * 32, None), (b["id"], held[b["id"]]["lease_token"], None)])
    assert q.get(b["id"])["status"] == "running"  # nothing was done
