"""Wake-ups of waiting long polls (queuelog/queue/wakeups.py, docs/operations.md#wake-ups), on both engines.

Two ``Queue`` objects on one database stand for two processes: each has its own wake-ups (on SQLite its own
datagram socket, on PostgreSQL its own listening connection), so a job enqueued through one reaches the
other only by the signal between them. The safety net is set to a minute: a pickup within a second can only
have come from a signal."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from queuelog.db import Database
from queuelog.queue import Queue
from queuelog.queue.spec import JobSpec
from queuelog.queue.wakeups import WaitingPollsFull

QUIET = 60.0  # a safety net that never fires during a test


def spec(**kw) -> JobSpec:
    payload = kw.pop("payload", {})
    return JobSpec(type=kw.pop("type", "email"), payload=payload, payload_json=json.dumps(payload), **kw)


@pytest.fixture
def db(app) -> Database:
    return app.extensions["queuelog"]["db"]


@pytest.fixture
def queues(db):
    """Make queues on the test's database with the real clock; their wake-up threads stop at the end."""
    made: list[Queue] = []

    def make(**kw) -> Queue:
        kw.setdefault("safety_net", QUIET)
        made.append(Queue(db, **kw))
        return made[-1]

    yield make
    for q in made:
        q.wakeups.stop()


class Spy:
    """Counts the queries a queue's long polls run: claims and the safety net's probes."""

    def __init__(self, q: Queue):
        self.claims = 0
        engine_claim = q.engine.claim

        def claim(*args, **kw):
            self.claims += 1
            return engine_claim(*args, **kw)

        q.engine.claim = claim  # type: ignore[method-assign]
        self.q = q

    @property
    def probes(self) -> int:
        return self.q.wakeups.probes


def wait_listening(q: Queue, timeout: float = 10.0) -> None:
    """Start ``q``'s wake-ups (a long poll of no time does not) and wait until signals reach it."""
    with q.wakeups.waiting(["nothing"]):
        deadline = time.monotonic() + timeout
        while not q.wakeups.listening:
            assert time.monotonic() < deadline, "the wake-ups never started listening"
            time.sleep(0.01)


def pickup(waiting: Queue, enqueuing: Queue, *, wait: float = 10.0, **job) -> tuple[float, list]:
    """Seconds from the enqueue's return to the claim's return, with the long poll already waiting."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(waiting.claim_wait, "w", wait_seconds=wait, types=["email"])
        deadline = time.monotonic() + 5
        while waiting.wakeups.waiting_count == 0 or not any(
            w.sleeping for w in list(waiting.wakeups._waiters.values())
        ):
            assert time.monotonic() < deadline
            time.sleep(0.002)
        enqueuing.enqueue("alice", spec(**job))
        enqueued = time.monotonic()
        jobs = future.result(timeout=wait + 5)
        return time.monotonic() - enqueued, jobs


def test_a_job_enqueued_through_another_queue_wakes_a_waiting_long_poll_at_once(queues):
    waiting, enqueuing = queues(), queues()
    wait_listening(waiting)
    latencies = []
    for _ in range(5):
        seconds, jobs = pickup(waiting, enqueuing)
        assert len(jobs) == 1
        latencies.append(seconds)
    assert max(latencies) < 1.0, latencies  # a signal, not the minute-long safety net


def test_no_wake_up_is_lost_between_a_claim_and_its_wait(queues):
    """The enqueue races the long poll's first claim, round after round: whenever it lands (before the
    claim, during it, or between the claim and the sleep), the long poll takes the job at once."""
    q = queues()
    for i in range(60):
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(q.claim_wait, "w", wait_seconds=10, types=["email"])
            time.sleep((i % 6) * 0.0005)
            q.enqueue("alice", spec(payload={"i": i}))
            started = time.monotonic()
            jobs = future.result(timeout=15)
        assert [json.loads(job.payload) for job in jobs] == [{"i": i}]
        assert time.monotonic() - started < 1.0


def test_a_waiting_long_poll_runs_no_query_until_woken(queues):
    q = queues()
    wait_listening(q)
    spy = Spy(q)
    started = time.monotonic()
    assert q.claim_wait("w", wait_seconds=1.0, types=["email"]) == []
    assert time.monotonic() - started >= 0.95
    assert (spy.claims, spy.probes) == (1, 0)  # one claim as it came in; nothing while it waited
    # A second long poll for the same types: nothing happened since the first found nothing, so it waits
    # without even a first claim; and a job woken for still gets claimed.
    assert q.claim_wait("w", wait_seconds=0.5, types=["email"]) == []
    assert (spy.claims, spy.probes) == (1, 0)
    seconds, jobs = pickup(q, q)
    assert len(jobs) == 1 and seconds < 1.0
    assert spy.claims == 2  # woken once, claimed once


def test_waiting_long_polls_share_one_safety_net_probe(queues):
    """Twenty waiting long polls of one process: one probe each safety-net interval, not one per poll."""
    q = queues(safety_net=0.25)
    wait_listening(q)
    spy = Spy(q)
    with ThreadPoolExecutor(20) as pool:
        polls = [pool.submit(q.claim_wait, f"w{i}", wait_seconds=1.3, types=["email"]) for i in range(20)]
        assert [p.result(timeout=10) for p in polls] == [[]] * 20
    assert 2 <= spy.probes <= 7  # about 1.3 / 0.25, whatever the number of polls
    assert spy.claims <= 20  # at most each one's first claim: the probes found nothing to wake for


def test_the_safety_net_finds_what_no_signal_announced(queues, db):
    """A job that appears without a signal (as after a lost notification) is found by the probe."""
    q = queues(safety_net=0.3)
    silent = queues(wakeups="poll")  # sends no signals
    silent.wakeups.ready = lambda *a, **kw: None  # type: ignore[method-assign]
    wait_listening(q)
    if db.dialect == "postgresql":  # the trigger would still notify: this job comes in without it
        with db.cursor(write=True) as cur:
            cur.execute("ALTER TABLE jobs DISABLE TRIGGER jobs_ready_insert")
    try:
        seconds, jobs = pickup(q, silent)
    finally:
        if db.dialect == "postgresql":
            with db.cursor(write=True) as cur:
                cur.execute("ALTER TABLE jobs ENABLE TRIGGER jobs_ready_insert")
    assert len(jobs) == 1
    assert 0.05 < seconds < 1.5


def test_a_delayed_job_wakes_a_waiting_long_poll_when_it_comes_due(queues):
    waiting, enqueuing = queues(), queues()
    wait_listening(waiting)
    seconds, jobs = pickup(waiting, enqueuing, delay_seconds=0.6)
    assert len(jobs) == 1
    assert 0.55 < seconds < 1.5  # at its due time (a timer), long before the safety net


def test_a_retry_after_a_failure_wakes_a_waiting_long_poll_when_its_backoff_ends(queues):
    waiting, failing = queues(), queues(backoff_base=0.4, backoff_max=0.4, rand=lambda: 1.0)
    wait_listening(waiting)
    failing.enqueue("alice", spec())
    job = failing.claim("w0", types=["email"])[0]
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(waiting.claim_wait, "w", wait_seconds=10, types=["email"])
        time.sleep(0.1)
        failing.fail(job.id, "w0", job.lease_token, "boom")
        failed = time.monotonic()
        jobs = future.result(timeout=15)
    assert [j.id for j in jobs] == [job.id]
    assert 0.3 < time.monotonic() - failed < 1.5  # at the end of its 0.4 s backoff


def test_a_long_poll_wakes_only_for_its_types(queues):
    q = queues()
    wait_listening(q)
    spy = Spy(q)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(q.claim_wait, "w", wait_seconds=1.0, types=["pdf"])
        time.sleep(0.2)
        q.enqueue("alice", spec(type="email"))
        assert future.result(timeout=5) == []
    assert spy.claims == 1  # the email job did not wake the pdf long poll


def test_a_burst_is_shared_among_waiting_long_polls(queues):
    """Eight waiting long polls, eight jobs in one enqueue: each poll gets one, none waits out its time."""
    waiting, enqueuing = queues(), queues()
    wait_listening(waiting)
    with ThreadPoolExecutor(8) as pool:
        polls = [pool.submit(waiting.claim_wait, f"w{i}", wait_seconds=10, types=["email"]) for i in range(8)]
        deadline = time.monotonic() + 5
        while waiting.wakeups.waiting_count < 8:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.1)
        enqueuing.enqueue_many("alice", [spec(payload={"i": i}) for i in range(8)])
        started = time.monotonic()
        got = [p.result(timeout=15) for p in polls]
    assert sorted(json.loads(job.payload)["i"] for jobs in got for job in jobs) == list(range(8))
    assert time.monotonic() - started < 2.0


def test_poll_mode_sends_no_signals_and_finds_jobs_by_probing(queues):
    q, other = queues(wakeups="poll", poll_interval=0.1), queues(wakeups="poll", poll_interval=0.1)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(q.claim_wait, "w", wait_seconds=1.0, types=["email"])
        time.sleep(0.3)
        assert not q.wakeups.listening
        assert 1 <= q.wakeups.probes <= 6
        assert future.result(timeout=5) == []
    seconds, jobs = pickup(q, other)
    assert len(jobs) == 1 and seconds < 1.0


def test_beyond_its_waiting_polls_a_process_answers_at_once(queues):
    q = queues(max_waiting=2)
    with ThreadPoolExecutor(2) as pool:
        polls = [pool.submit(q.claim_wait, f"w{i}", wait_seconds=1.5, types=["pdf"]) for i in range(2)]
        deadline = time.monotonic() + 5
        while q.wakeups.waiting_count < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = time.monotonic()
        with pytest.raises(WaitingPollsFull):
            q.claim_wait("w3", wait_seconds=5, types=["email"])
        assert time.monotonic() - started < 0.5
        # A job that is there is still taken: the bound only stops a long poll from waiting.
        q.enqueue("alice", spec())
        assert len(q.claim_wait("w3", wait_seconds=5, types=["email"])) == 1
        assert [p.result(timeout=5) for p in polls] == [[], []]
    assert q.wakeups.waiting_count == 0
    with ThreadPoolExecutor(1) as pool:  # room again
        poll = pool.submit(q.claim_wait, "w4", wait_seconds=0.3, types=["email"])
        assert poll.result(timeout=5) == []


def test_threads_of_a_queue_let_go_of_it(queues, db):
    import gc
    import weakref

    q = Queue(db, safety_net=QUIET)
    wait_listening(q)
    ref = weakref.ref(q)
    del q
    deadline = time.monotonic() + 10
    while ref() is not None:
        gc.collect()
        assert time.monotonic() < deadline, "a wake-up thread keeps its queue alive"
        time.sleep(0.1)


def test_a_dependent_released_through_another_queue_wakes_a_waiting_long_poll_at_once(queues):
    """A job that waits for another becomes claimable in the transaction that completes its dependency
    (docs/workflows.md); a long poll waiting in another process for its type wakes by a signal."""
    waiting, finishing = queues(), queues()
    wait_listening(waiting)
    first = finishing.enqueue("alice", spec(type="pdf"))[0]
    dependent = finishing.enqueue("alice", spec(depends_on=(first.id,)))[0]
    assert dependent.status == "waiting"
    [held] = finishing.claim("w2", types=["pdf"])
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(waiting.claim_wait, "w", wait_seconds=10, types=["email"])
        deadline = time.monotonic() + 5
        while not any(w.sleeping for w in list(waiting.wakeups._waiters.values())):
            assert time.monotonic() < deadline
            time.sleep(0.002)
        finishing.complete(held.id, "w2", held.lease_token)
        completed = time.monotonic()
        jobs = future.result(timeout=15)
    assert [job.id for job in jobs] == [dependent.id]
    assert time.monotonic() - completed < 1.0  # a signal, not the minute-long safety net
