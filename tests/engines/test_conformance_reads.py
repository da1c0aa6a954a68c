"""The rest of the conformance suite, run against each engine directly (no app): people's actions (cancel,
retry), prune, lists, counts, throughput, failures, probes, the allowlist and API keys."""

from __future__ import annotations

import json
import random
from datetime import timedelta, timezone

import pytest
from sqlalchemy.exc import IntegrityError

from queuelog.access.auth import hash_key
from queuelog.engines import Backoff, Unchanged
from queuelog.queue.admin import AdminStore
from tests.engines.conftest import NOW, count_jobs, later, new, set_type

FIXED = Backoff(10, 100, lambda: 0.5)


def history(engine, job_id):
    return [(e.event, e.actor, e.attempt) for e in engine.events(job_id)]


def claim(engine, worker="w", *, at=NOW, lease=30, limit=1, types=None, backoff=FIXED):
    return engine.claim(worker, now=at, lease_seconds=lease, limit=limit, types=types, backoff=backoff)


def test_cancel_and_retry_are_guarded_by_state_and_owner(engine):
    [(job, _)] = engine.insert("alice", [new()], NOW)
    assert engine.cancel(job.id, "mallory", now=NOW, owner="mallory") == Unchanged(job)
    cancelled = engine.cancel(job.id, "alice", now=later(1), owner="alice")
    assert (cancelled.status, cancelled.finished_at) == ("cancelled", later(1))
    assert engine.cancel(job.id, "admin", now=later(2)) == Unchanged(cancelled)
    retried = engine.retry(job.id, "admin", now=later(3))
    assert (retried.status, retried.retry_count, retried.available_at, retried.finished_at) == (
        "pending",
        0,
        later(3),
        None,
    )
    assert engine.retry(job.id, "admin", now=later(4)) == Unchanged(retried)
    running = claim(engine, at=later(5)).jobs[0]
    assert engine.cancel(job.id, "admin", now=later(6)) == Unchanged(running)
    assert engine.retry(job.id, "admin", now=later(6)) == Unchanged(running)
    assert engine.cancel(job.id + 1, "admin", now=NOW) == Unchanged(None)
    assert engine.retry(job.id + 1, "admin", now=NOW) == Unchanged(None)
    assert history(engine, job.id) == [
        ("enqueued", "alice", 0),
        ("cancelled", "alice", 0),
        ("retried", "admin", 0),
        ("claimed", "w", 1),
    ]


def test_prune_deletes_old_finished_jobs_only_and_frees_their_keys(db, engine):
    old = [job for job, _ in engine.insert("alice", [new(key=f"k{i}") for i in range(5)], NOW)]
    for job in claim(engine, limit=3).jobs:
        engine.complete(job.id, "w", job.lease_token, now=NOW, result_json=None)
    engine.cancel(old[3].id, "alice", now=NOW)
    running = claim(engine).jobs[0]  # old[4]
    [(recent, _)] = engine.insert("alice", [new()], NOW)
    held = claim(engine, at=later(3600)).jobs[0]
    engine.complete(recent.id, "w", held.lease_token, now=later(3600), result_json=None)
    assert engine.prune(finished_before=later(60), batch=2, throughput_before=later(60)) == 4
    assert {j.id for j in engine.list_jobs()} == {running.id, recent.id}
    assert engine.events(old[0].id) == []
    [(again, created)] = engine.insert("alice", [new(key="k0")], later(3601))
    assert created and again.id > recent.id  # the key is free, and ids are never reused
    assert engine.prune(finished_before=later(60), batch=2, throughput_before=later(60)) == 0
    assert [(row.minute, row.n) for row in engine.throughput(since=NOW - timedelta(days=1))] == [
        (later(3600), 1)
    ]  # the minute of NOW, which held 3 completions, was pruned


def test_lists_filter_and_page_by_keyset_newest_first(engine):
    rng = random.Random(3)
    for i in range(80):
        job = new(rng.choice(["email", "pdf"]), priority=rng.choice([0, 10]), payload={"i": i})
        engine.insert(rng.choice(["alice", "bob"]), [job], NOW)
    for job in claim(engine, limit=30).jobs:
        engine.complete(job.id, "w", job.lease_token, now=NOW, result_json=None)
    everything = engine.list_jobs(limit=100)
    assert [j.id for j in everything] == list(range(80, 0, -1))
    for filters in (
        {"owner": "alice", "type": "pdf"},
        {"status": "completed", "priority": 10},
        {"owner": "bob", "type": "email", "status": "pending", "priority": 0},
    ):
        expected = [j.id for j in everything if all(getattr(j, k) == v for k, v in filters.items())]
        assert len(expected) > 3  # more than one page
        pages, before = [], None
        while page := engine.list_jobs(**filters, before_id=before, limit=3):
            pages.append([j.id for j in page])
            before = page[-1].id
        assert [job_id for page in pages for job_id in page] == expected
        assert [len(page) for page in pages[:-1]] == [3] * (len(pages) - 1)
    assert engine.list_jobs(before_id=1) == []


def test_counts_stay_exact_through_many_transitions(db, engine):
    rng = random.Random(11)
    now = NOW
    finished = {"completed": 0, "failed": 0}
    for step in range(250):
        now += timedelta(seconds=rng.choice([0, 1, 20]))
        action = rng.random()
        if action < 0.35:
            jobs = [
                new(
                    rng.choice(["email", "pdf"]),
                    priority=rng.choice([0, 20]),
                    max_retries=rng.choice([0, 1]),
                    at=now,
                )
            ]
            engine.insert(rng.choice(["alice", "bob"]), jobs * rng.randint(1, 3), now)
        elif action < 0.65:
            outcome = claim(engine, at=now, lease=rng.choice([5, 60]), limit=rng.randint(1, 4))
            finished["failed"] += sum(1 for job in outcome.expired if job.status == "failed")
            for job in outcome.jobs:
                if rng.random() < 0.5:
                    engine.complete(job.id, "w", job.lease_token, now=now, result_json=None)
                    finished["completed"] += 1
                else:
                    failed = engine.fail(
                        job.id,
                        "w",
                        job.lease_token,
                        now=now,
                        error=f"boom {step}",
                        retryable=rng.random() < 0.6,
                        backoff=FIXED,
                    )
                    finished["failed"] += failed.status == "failed"
        elif action < 0.75:
            for job in engine.list_jobs(status="pending", limit=2):
                engine.cancel(job.id, "admin", now=now)
        elif action < 0.85:
            for job in engine.list_jobs(status="failed", limit=2) + engine.list_jobs(
                status="cancelled", limit=1
            ):
                engine.retry(job.id, "admin", now=now)
        elif action < 0.9:
            finished["failed"] += sum(
                1 for job in engine.expire(now=now, backoff=FIXED) if job.status == "failed"
            )
        else:
            engine.prune(finished_before=now - timedelta(seconds=30), batch=3, throughput_before=NOW)
    engine.insert("alice", [new(at=now)], now)
    last = claim(engine, at=now, lease=3600)  # at least one job is running
    finished["failed"] += sum(1 for job in last.expired if job.status == "failed")
    truth = count_jobs(db)
    assert len({status for status, _, _ in truth}) >= 4  # the walk left jobs in most states
    counted = {}
    for row in engine.counts():
        counted[(row.status, row.type, row.priority)] = (
            counted.get((row.status, row.type, row.priority), 0) + row.n
        )
    assert {key: n for key, n in counted.items() if n} == truth
    alice = sum(row.n for row in engine.counts(owner="alice"))
    assert alice == len(engine.list_jobs(owner="alice", limit=1000))
    throughput = {}
    for row in engine.throughput(since=NOW):
        throughput[row.status] = throughput.get(row.status, 0) + row.n
    assert throughput == {status: n for status, n in finished.items() if n}
    pending = engine.list_jobs(status="pending", limit=1000)
    assert engine.oldest_pending() == (min(pending, key=lambda j: j.id).created_at if pending else None)


def test_failures_come_newest_first_with_their_jobs_type_and_status(engine):
    engine.insert("alice", [new("pdf"), new("email")], NOW)
    pdf, email = claim(engine, limit=2).jobs
    engine.fail(pdf.id, "w", pdf.lease_token, now=later(1), error="first", retryable=False, backoff=FIXED)
    engine.fail(email.id, "w", email.lease_token, now=later(2), error="second", retryable=True, backoff=FIXED)
    rows = engine.failures(limit=10)
    assert [(r.job_id, r.error, r.type, r.status, r.at) for r in rows] == [
        (email.id, "second", "email", "pending", later(2)),
        (pdf.id, "first", "pdf", "failed", later(1)),
    ]
    assert len(engine.failures(limit=1)) == 1


def test_claimable_sees_available_jobs_and_due_leases_only(engine):
    assert not engine.claimable(now=NOW)
    engine.insert("alice", [new("pdf", at=later(60))], NOW)
    assert not engine.claimable(now=NOW) and engine.claimable(now=later(60))
    assert not engine.claimable(now=later(60), types=["email"])
    assert engine.claimable(now=later(60), types=["email", "pdf"])
    job = claim(engine, at=later(60), lease=10).jobs[0]
    assert not engine.claimable(now=later(65))
    assert engine.claimable(now=later(71), types=["email"])  # a lease to settle
    assert engine.get(job.id).status == "running"  # a probe changes nothing


def test_events_are_typed_and_oldest_first(engine):
    [(job, _)] = engine.insert("alice", [new()], NOW)
    held = claim(engine, at=later(1)).jobs[0]
    engine.fail(job.id, "w", held.lease_token, now=later(2), error="e", retryable=True, backoff=FIXED)
    events = engine.events(job.id)
    assert [(e.event, e.at) for e in events] == [
        ("enqueued", NOW),
        ("claimed", later(1)),
        ("retry_scheduled", later(2)),
    ]
    assert events[0].id < events[1].id < events[2].id and events[2]["error"] == "e"
    assert all(e.at.utcoffset() == timedelta(0) for e in events)


def test_job_types_rows_carry_flags_and_the_schema_as_json_text(db, engine):
    set_type(db, "pdf", paused=True, schema={"type": "object", "required": ["b", "a"]})
    set_type(db, "email")
    rows = {row.name: row for row in engine.job_types()}
    assert (rows["pdf"].enabled, rows["pdf"].paused, rows["email"].paused) == (True, True, False)
    assert json.loads(rows["pdf"].payload_schema) == {"type": "object", "required": ["b", "a"]}
    assert rows["email"].payload_schema is None


def test_job_types_are_managed_through_either_engine(engine):
    assert engine.seed_job_types(["email", "pdf"]) is True
    assert engine.seed_job_types(["other"]) is False  # only an empty allowlist is seeded
    engine.add_job_type("sync", "syncs", {"type": "object"})
    with pytest.raises(IntegrityError):
        engine.add_job_type("sync", "", None)
    paused = engine.update_job_type("pdf", {"paused": True, "description": "PDFs"})
    assert (paused.name, paused.paused, paused.description) == ("pdf", True, "PDFs")
    assert engine.update_job_type("nope", {"paused": True}) is None
    assert [(t.name, t.enabled, t.paused) for t in engine.all_job_types()] == [
        ("email", True, False),
        ("pdf", True, True),
        ("sync", True, False),
    ]
    assert [(row.name, row.paused, row.payload_schema is not None) for row in engine.job_types()] == [
        ("email", False, False),
        ("pdf", True, False),
        ("sync", False, True),
    ]


def test_api_key_lookup_finds_unrevoked_keys_with_their_user(db, engine):
    AdminStore(db).create_user("ada", "producer", "password-ada")
    raw = AdminStore(db).create_key("ada-laptop", "producer", username="ada")
    worker = AdminStore(db).create_key("worker-9", "worker")
    row = engine.api_key(hash_key(raw))
    assert (row.kind, row.name, row.username, row.role, row.active, row.last_used_at) == (
        "producer",
        "ada-laptop",
        "ada",
        "producer",
        True,
        None,
    )
    assert engine.api_key(hash_key(worker)).username is None
    AdminStore(db).revoke_key("ada-laptop")
    assert engine.api_key(hash_key(raw)) is None
    assert engine.api_key("0" * 64) is None


def test_times_come_back_as_utc_whatever_zone_they_were_given_in(engine):
    tokyo = NOW.astimezone(timezone(timedelta(hours=9)))
    [(job, _)] = engine.insert("alice", [new(at=tokyo)], tokyo)
    assert job.created_at == NOW and job.created_at.utcoffset() == timedelta(0)
    assert engine.get(job.id).available_at.utcoffset() == timedelta(0)
