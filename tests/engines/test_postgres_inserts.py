"""Round trips on PostgreSQL, counted in libpq's own trace of the engine's connections (each message the
client sends is a line; a round trip ends with the client's ``Sync``, or is one simple ``Query``): inserts
of many jobs, plain or waiting (docs/workflows.md#cost), a whole batch in a few round trips; an idempotency
key taken by another transaction between the look-up and the insert; the safety-net probe."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest
from psycopg.pq import Trace
from sqlalchemy import event, text

from queuelog.db import Database
from queuelog.engines import engine_for
from queuelog.engines.records import NewBatch
from tests.engines.conftest import NOW, later, new


@contextmanager
def round_trips(db: Database, path):
    """Count the round trips of the block on ``db``'s connections: a list, its one item set at the end."""
    traced = []
    counted: list[int] = []
    with open(path, "w") as trace:

        def on_checkout(dbapi_connection, _record, _proxy):
            pgconn = dbapi_connection.pgconn
            pgconn.trace(trace.fileno())
            pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
            traced.append(pgconn)

        event.listen(db.engine, "checkout", on_checkout)
        try:
            yield counted
        finally:
            event.remove(db.engine, "checkout", on_checkout)
            for pgconn in traced:
                pgconn.untrace()
    with open(path) as trace:
        sent = [line.split("\t") for line in trace.read().splitlines() if line.startswith("F")]
    counted.append(sum(1 for fields in sent if fields[2] in ("Sync", "Query")))


def test_a_batch_of_a_thousand_chained_jobs_takes_a_few_round_trips_not_some_per_job(pg, tmp_path):
    engine = engine_for(pg)
    [(outside, _)] = engine.insert("alice", [new()], NOW)
    chain = [
        new(key=f"k{i}")._replace(after=(i - 1,) if i else (), depends_on=(outside.id,)) for i in range(1000)
    ]
    with round_trips(pg, tmp_path / "trace") as counted:
        batch, created = engine.create_batch(
            "alice", NewBatch("chain", chain, None, None, None, None), now=NOW
        )
    assert created and batch.total == 1000 and batch.counts["waiting"] == 1000
    # BEGIN, the batch, the keys, the ids, the dependencies, the jobs, the counts, two reads, COMMIT
    assert counted[0] <= 12, counted[0]
    with round_trips(pg, tmp_path / "again") as counted:
        [(job, made)] = engine.insert("alice", [new()._replace(depends_on=(outside.id,))], NOW)
    assert made and job.status == "waiting"
    assert counted[0] <= 5, counted[0]  # BEGIN, the id, the dependency, the job, COMMIT


def test_a_thousand_plain_jobs_take_a_few_round_trips_not_one_per_job(pg, tmp_path):
    engine = engine_for(pg)
    plain = [
        new(payload={"n": i}, priority=i % 3, key=f"p{i}" if i % 2 else None, at=later(i % 5))
        for i in range(1000)
    ]
    with round_trips(pg, tmp_path / "trace") as counted:
        out = engine.insert("alice", plain, NOW)
    assert counted[0] <= 6, counted[0]  # BEGIN, the keys, the ids, the jobs, COMMIT
    assert all(made for _, made in out) and [job.id for job, _ in out] == sorted(j.id for j, _ in out)
    for (job, _), asked in zip(out, plain, strict=True):
        assert (job.status, job.priority, job.idempotency_key) == (
            "pending",
            asked.priority,
            asked.idempotency_key,
        )
        assert job.available_at == asked.available_at and job.depends_on is None and job.dependents == 0
    assert len(engine.events(out[-1][0].id)) == 1
    again = engine.insert("alice", plain, NOW)  # the keyed half replays, the rest are new jobs
    for (first, _), (job, made), asked in zip(out, again, plain, strict=True):
        assert made == (asked.idempotency_key is None) and (job.id == first.id) == (not made)
    with round_trips(pg, tmp_path / "one") as counted:
        [(one, made)] = engine.insert("alice", [new(key="one")], NOW)
    assert made and counted[0] == 1, counted[0]  # a single job stays one autocommitted statement


@pytest.mark.parametrize("waits", [True, False], ids=["waiting", "plain"])
def test_a_key_taken_by_a_transaction_still_open_is_answered_as_a_replay_once_it_commits(pg, waits):
    engine = engine_for(pg)
    [(before, _)] = engine.insert("alice", [new()], NOW)
    keyed = new(key="raced")
    other = pg.engine.connect()
    transaction = other.begin()
    taken = other.execute(
        text(
            "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, idempotency_key,"
            " fingerprint, owner, available_at, created_at, updated_at) VALUES ('email', '{}', 0, 'pending',"
            " 0, 3, 'raced', :fingerprint, 'alice', :now, :now, :now) RETURNING id"
        ),
        {"fingerprint": keyed.fingerprint, "now": NOW},
    ).scalar_one()
    out: list = []
    if waits:
        jobs = [new()._replace(depends_on=(before.id,)), keyed._replace(after=(0,))]
    else:
        jobs = [new(), keyed]
    inserting = threading.Thread(target=lambda: out.append(engine.insert("alice", jobs, NOW)))
    inserting.start()
    inserting.join(0.5)
    assert inserting.is_alive()  # its insert waits on the key's row, not yet committed
    transaction.commit()
    other.close()
    inserting.join(10)
    [[(first, made), (replay, again)]] = out
    assert made and not again and replay.id == taken and replay.depends_on is None
    assert engine.get(before.id).dependents == waits and engine.dependents(before.id) == [first.id] * waits
    assert len(engine.list_jobs(owner="alice")) == 3 and len(engine.events(first.id)) == 1


@pytest.mark.parametrize("types", [None, ["email"]])
def test_the_safety_net_probe_is_one_round_trip(pg, tmp_path, types):
    """docs/operations.md: a waiting process probes the database once per safety-net period; one read,
    without BEGIN and COMMIT, that sees both a claimable job and a lease to settle."""
    engine = engine_for(pg)
    engine.insert("alice", [new("email")], NOW)
    engine.claimable(now=NOW, types=types)  # the pool's connection made outside the count
    with round_trips(pg, tmp_path / "probe.trace") as counted:
        assert engine.claimable(now=NOW, types=types)
    assert counted == [1]
