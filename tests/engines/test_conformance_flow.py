"""Flow control in the claim itself (docs/flow-control.md), on each engine: a type's concurrency limit and
rate limit hold across concurrent claims, jobs over a limit wait (never fail), and other types go on.

Times are passed in, so the rate limit's bucket refills exactly as the tests say; the races use threads
that each claim through the engine on their own connections.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from queuelog.models import Job
from tests.engines.conftest import NOW, later, new, set_type
from tests.engines.test_conformance import claim


def running(db, job_type="email"):
    with db.session() as session:
        return session.scalar(select(func.count()).where(Job.status == "running", Job.type == job_type))


def complete(engine, job, at=NOW):
    return engine.complete(job.id, job.worker_id, job.lease_token, now=at, result_json=None)


def test_a_concurrency_limit_caps_running_jobs_and_other_types_go_on(db, engine):
    set_type(db, "email", concurrency=2)
    engine.insert("alice", [new("email", priority=30) for _ in range(5)] + [new("pdf"), new("pdf")], NOW)
    first = claim(engine, limit=10).jobs
    assert sorted(j.type for j in first) == ["email", "email", "pdf", "pdf"]
    assert claim(engine, limit=10).jobs == [] and claim(engine, types=["email"]).jobs == []
    assert not engine.claimable(now=NOW, types=["email"])
    complete(engine, next(j for j in first if j.type == "email"))
    assert engine.claimable(now=NOW, types=["email"])
    assert [j.type for j in claim(engine, limit=10).jobs] == ["email"]
    assert claim(engine, limit=10).jobs == []
    assert len(engine.list_jobs(status="pending")) == 2  # waiting, not failed


def test_a_batch_takes_a_limited_type_in_claim_order_up_to_its_room(db, engine):
    set_type(db, "email", concurrency=3)
    ids = [
        job.id
        for job, _ in engine.insert("alice", [new("email", priority=p) for p in (0, 30, 10, 20, 30)], NOW)
    ]
    jobs = claim(engine, limit=10).jobs
    assert [j.id for j in jobs] == [ids[1], ids[4], ids[3]]  # priority 30, 30, 20: the first three in order


def test_a_rate_limit_spends_tokens_and_refills_with_time(db, engine):
    set_type(db, "email", rate=2, period=60)
    engine.insert("alice", [new("email") for _ in range(6)] + [new("pdf")], NOW)
    assert sorted(j.type for j in claim(engine, limit=10, lease=3600).jobs) == ["email", "email", "pdf"]
    assert claim(engine, limit=10).jobs == []
    assert not engine.claimable(now=later(29), types=["email"])
    assert claim(engine, at=later(29), limit=10).jobs == []  # 0.97 of a token
    assert engine.claimable(now=later(30), types=["email"])
    assert len(claim(engine, at=later(30), limit=10, lease=3600).jobs) == 1  # half the period: one token
    assert len(claim(engine, at=later(1000), limit=10, lease=3600).jobs) == 2  # a full bucket holds two
    assert len(engine.list_jobs(status="pending")) == 1


def test_a_type_under_both_limits_takes_the_smaller_room(db, engine):
    set_type(db, "email", concurrency=1, rate=5, period=60)
    engine.insert("alice", [new("email") for _ in range(4)], NOW)
    [job] = claim(engine, limit=10).jobs
    assert claim(engine, limit=10).jobs == []
    complete(engine, job)
    assert len(claim(engine, limit=10).jobs) == 1  # the bucket has four tokens left, one slot


def test_removing_a_limit_frees_the_waiting_jobs(db, engine):
    set_type(db, "email", concurrency=1)
    engine.insert("alice", [new("email") for _ in range(3)], NOW)
    assert len(claim(engine, limit=10).jobs) == 1
    set_type(db, "email")
    assert len(claim(engine, limit=10).jobs) == 2


def test_a_limit_lowered_below_the_running_jobs_holds_claims_until_enough_finish(db, engine):
    engine.insert("alice", [new("email") for _ in range(6)], NOW)
    held = claim(engine, limit=4).jobs
    set_type(db, "email", concurrency=2)
    assert claim(engine, limit=10).jobs == []
    complete(engine, held[0])
    complete(engine, held[1])
    assert claim(engine, limit=10).jobs == []  # two still running: at the limit
    complete(engine, held[2])
    assert len(claim(engine, limit=10).jobs) == 1


@pytest.mark.slow  # eight workers racing
def test_eight_workers_never_run_more_than_the_concurrency_limit(db, engine):
    set_type(db, "email", concurrency=2)
    total, workers = 40, 8
    engine.insert("alice", [new("email", payload={"n": n}) for n in range(total)], NOW)
    start = threading.Barrier(workers)
    lock = threading.Lock()
    held, most, done = 0, 0, []

    def work(index):
        nonlocal held, most
        start.wait()
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 3:
            jobs = claim(engine, f"w{index}", limit=1 + index % 3).jobs
            if not jobs:
                time.sleep(0.001)
                continue
            idle_since = time.monotonic()
            with lock:
                held += len(jobs)
                most = max(most, held)
            time.sleep(0.005)  # the work: long enough for the others to try
            with lock:
                held -= len(jobs)
            for job in jobs:
                assert complete(engine, job).status == "completed"
                done.append(job.id)

    def watch(stop):
        seen = 0
        while not stop.is_set():
            seen = max(seen, running(db))
        return seen

    stop = threading.Event()
    with ThreadPoolExecutor(workers + 1) as pool:
        watcher = pool.submit(watch, stop)
        list(pool.map(work, range(workers)))
        stop.set()
        assert watcher.result() <= 2
    assert most == 2  # the limit was reached, and never passed
    assert len(done) == len(set(done)) == total


def test_eight_workers_never_claim_more_than_the_rate_limit(db, engine):
    set_type(db, "email", rate=5, period=3600)
    engine.insert("alice", [new("email") for _ in range(30)] + [new("pdf") for _ in range(10)], NOW)
    start = threading.Barrier(8)

    def work(index):
        start.wait()
        mine = []
        for _ in range(10):
            mine += claim(engine, f"w{index}", limit=1 + index % 4).jobs
        return mine

    with ThreadPoolExecutor(8) as pool:
        claimed = [job for mine in pool.map(work, range(8)) for job in mine]
    assert sorted(j.type for j in claimed).count("email") == 5
    assert sorted(j.type for j in claimed).count("pdf") == 10
    assert len({j.id for j in claimed}) == len(claimed)


def test_a_server_whose_clock_is_behind_takes_no_tokens_back_in_time(db, engine):
    """docs/flow-control.md, "Clocks": a server behind the last spend refills nothing. Nor may its spend
    wind the bucket's time back, or the next claim on time would refill the minute it never waited."""
    set_type(db, "email", rate=2, period=60)
    engine.insert("alice", [new("email", at=later(-120)) for _ in range(10)], later(-120))
    assert len(claim(engine, lease=3600).jobs) == 1  # one token of two left
    assert len(claim(engine, at=later(-60), lease=3600).jobs) == 1  # a minute behind: the last token
    assert claim(engine, at=NOW, limit=10, lease=3600).jobs == []  # the bucket is empty at NOW
    assert len(claim(engine, at=later(30), limit=10, lease=3600).jobs) == 1  # and refills from NOW


def test_the_period_after_a_quiet_spell_may_see_the_bucket_and_its_refill(db, engine):
    """docs/flow-control.md, "The rate limit": a full bucket of N, then its refill, so up to 2N - 1 claims in
    the first period; the average over busy periods is N a period."""
    set_type(db, "email", rate=4, period=60)
    engine.insert("alice", [new("email") for _ in range(20)], NOW)
    taken = [len(claim(engine, at=later(s), limit=10, lease=3600).jobs) for s in range(0, 60, 15)]
    assert taken == [4, 1, 1, 1]  # 7 = 2 * 4 - 1 claims between NOW and NOW + 59 s
    taken = [len(claim(engine, at=later(s), limit=10, lease=3600).jobs) for s in range(60, 180, 15)]
    assert sum(taken) == 8  # then 4 a minute


def hold(db, engine, how):
    """Hold the type ``email`` back: its concurrency limit of 1 taken, its rate limit's bucket spent, or
    paused. Answers the job holding the place (concurrency), or None."""
    if how == "paused":
        set_type(db, "email", paused=True)
        return None
    set_type(db, "email", **({"concurrency": 1} if how == "concurrency" else {"rate": 1, "period": 3600}))
    engine.insert("alice", [new("email", priority=50)], NOW)
    [job] = claim(engine, types=["email"], lease=3600).jobs
    return job


OTHERS = [("pdf", 0), ("pdf", 10), ("sms", 10), ("pdf", 0), ("pdf", 30), ("sms", 40), ("sms", -5)]


@pytest.mark.parametrize("how", ["concurrency", "rate", "paused"])
@pytest.mark.parametrize("types", [None, ["sms", "email", "pdf", "pdf"]])
def test_other_types_are_claimed_in_order_past_a_held_types_backlog(db, engine, how, types):
    """docs/flow-control.md, "How the claim enforces them": the jobs of a type that has no room wait in their
    place, ahead of every other job in claim order, and the claim hands out the others in their order, each
    once, as if the waiting jobs were not there; when the type has room again its jobs come first."""
    holder = hold(db, engine, how)
    waiting = [
        job.id for job, _ in engine.insert("alice", [new("email", priority=20) for _ in range(300)], NOW)
    ]
    ids = [job.id for job, _ in engine.insert("alice", [new(t, priority=p) for t, p in OTHERS], NOW)]
    order = [ids[i] for i in (5, 4, 1, 2, 0, 3, 6)]  # priority 40, 30, 10, 10, 0, 0, -5; then by id

    def take(limit=1, at=NOW):
        return [j.id for j in claim(engine, at=at, limit=limit, types=types, lease=7200).jobs]

    assert take() + take() + take() == order[:3]
    assert take(3) == order[3:6]
    assert take(10) == order[6:]
    assert take(10) == []
    assert not engine.claimable(now=NOW, types=types)
    assert len(engine.list_jobs(status="pending", limit=1000)) == 300  # waiting, not failed nor taken
    engine.insert("alice", [new("pdf", priority=19)], NOW)
    at = NOW
    if how == "concurrency":
        complete(engine, holder)
    elif how == "rate":
        at = later(3600)  # a token has grown back
    else:
        set_type(db, "email")
    # Room again: the waiting jobs come first, in their order, as many as the room allows.
    assert take(2, at) == (waiting[:2] if how == "paused" else waiting[:1])


@pytest.mark.parametrize("types", [None, ["pdf", "email"], ["pdf"]])  # ["pdf"]: no lock on email's row
def test_eight_workers_past_a_held_types_backlog_take_every_other_job_once(db, engine, types):
    """The claim by type under a race: every claimable job is handed out once, none twice, none of the held
    type's (on PostgreSQL each type's share is locked SKIP LOCKED, so claims give way to each other)."""
    hold(db, engine, "concurrency")
    engine.insert("alice", [new("email", priority=20) for _ in range(200)], NOW)
    engine.insert("alice", [new("pdf", priority=n % 5, payload={"n": n}) for n in range(80)], NOW)
    start = threading.Barrier(8)

    def work(index):
        start.wait()
        mine = []
        while jobs := claim(engine, f"w{index}", limit=1 + index % 3, types=types).jobs:
            mine += jobs
        return mine

    with ThreadPoolExecutor(8) as pool:
        claimed = [job for mine in pool.map(work, range(8)) for job in mine]
    assert {j.type for j in claimed} == {"pdf"}
    assert len(claimed) == len({j.id for j in claimed}) == 80


def test_a_limit_set_between_two_claims_holds_at_the_next(db, engine):
    """The PostgreSQL engine looks only every few seconds whether any type is held back, to pick the
    cheaper statement while none is (queuelog/engines/postgres/engine.py): a look a moment old must never let a
    claim pass a limit."""
    engine.held_check_seconds = 3600
    engine.insert("alice", [new("email") for _ in range(3)], NOW)
    [first] = claim(engine).jobs
    set_type(db, "email", concurrency=1)
    assert claim(engine, limit=10).jobs == []
    set_type(db, "email", paused=True, concurrency=2)
    assert claim(engine, limit=10, types=["email"]).jobs == []
    set_type(db, "email", concurrency=2)
    assert [j.type for j in claim(engine, limit=10).jobs] == ["email"]
    assert first.status == "running"
