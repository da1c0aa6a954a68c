"""``batch_counts`` on each engine: the batches by status that the metrics show (docs/batches.md#metrics)."""

from __future__ import annotations

from queuelog.engines import Backoff
from queuelog.engines.records import NewBatch
from tests.engines.conftest import NOW, new


def make(engine, n=1):
    [batch, _] = engine.create_batch(
        "alice", NewBatch("b", [new() for _ in range(n)], None, None, None, None), now=NOW
    )
    return batch


def test_batch_counts_follow_each_batchs_status(engine):
    assert engine.batch_counts() == {}
    first, second, third = make(engine), make(engine), make(engine, 2)
    assert engine.batch_counts() == {"running": 3}
    held = engine.claim("w", now=NOW, lease_seconds=30, limit=1, types=None, backoff=Backoff(0, 0)).jobs
    assert [j.id for j in held] == list(first.jobs)
    engine.complete(held[0].id, "w", held[0].lease_token, now=NOW, result_json=None)
    engine.cancel_batch(second.id, "alice", now=NOW)
    assert engine.batch_counts() == {"running": 1, "succeeded": 1, "finished_with_failures": 1}
    engine.retry_batch(second.id, "admin", now=NOW)
    assert engine.batch_counts() == {"running": 2, "succeeded": 1}
    assert third.status == "running"
