"""Who waits for whom on PostgreSQL: a claim that may take a limited type locks that type's row first
(docs/flow-control.md); a worker whose ``types`` list holds no limited type never waits for it, and
enqueues never wait. A session of the test's own holds a limited type's row as a claim in progress does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from queuelog.engines import Backoff, engine_for
from tests.engines.conftest import NOW, connect, new, set_type


def started(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()), daemon=True)
    thread.start()
    return thread, out


def test_unlimited_claims_and_enqueues_never_wait_for_a_claim_of_a_limited_type(pg):
    engine = engine_for(pg)
    set_type(pg, "pdf", concurrency=5)
    engine.insert("alice", [new("email"), new("pdf")], NOW)
    other = connect(pg)
    try:
        other.execute("BEGIN")
        other.execute("SELECT name FROM job_types WHERE name = 'pdf' FOR NO KEY UPDATE")  # a claim's lock

        def claim(worker: str, types: list[str] | None):
            return lambda: engine.claim(
                worker, now=NOW, lease_seconds=60, limit=5, types=types, backoff=Backoff(0, 0)
            )

        email, claimed = started(claim("w1", ["email"]))
        email.join(timeout=5)
        assert not email.is_alive(), "a claim of an unlimited type waited for the limited type's lock"
        assert [job.type for job in claimed[0].jobs] == ["email"]
        enqueue, enqueued = started(lambda: engine.insert("alice", [new("pdf")], NOW))
        enqueue.join(timeout=5)
        assert not enqueue.is_alive(), "an enqueue of the limited type waited for its lock"
        assert enqueued[0][0][0].type == "pdf"
        # The other way round: a claim that may take the limited type waits for the claim before it.
        anything, taken = started(claim("w2", None))
        anything.join(timeout=0.5)
        assert anything.is_alive()
    finally:
        other.execute("COMMIT")
        other.close()
    anything.join(timeout=5)
    assert not anything.is_alive() and sorted(job.type for job in taken[0].jobs) == ["pdf", "pdf"]
