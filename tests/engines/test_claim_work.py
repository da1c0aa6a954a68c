"""The work of a claim does not grow with the jobs it must pass over (docs/flow-control.md, "What it
costs"): jobs of a type at its concurrency limit, out of rate tokens or paused, and jobs of types a worker
did not ask for, however many wait ahead of the claimable ones.

Work, not time: on SQLite the virtual machine's steps of the whole claim (its probe, its statement, its
history rows), counted by a progress handler on the writer's connection; on PostgreSQL the buffers the
claim statement touches, from EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back afterwards.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest

from queuelog.engines.postgres import sql as postgres_sql
from tests.engines.conftest import NOW, new, set_type
from tests.engines.test_conformance import FIXED, claim
from tests.engines.test_conformance_flow import hold

BACKLOG = 1500


def sqlite_steps(db, engine, types) -> int:
    with db.cursor(write=True) as cur:  # the writer's connection, on which the engine writes
        conn = cur.connection
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(step, 1)
    try:
        [job] = claim(engine, types=types).jobs
    finally:
        conn.set_progress_handler(None, 1)
    assert job.type == "pdf"
    return steps


def postgres_buffers(db, engine, types) -> int:
    params = {
        "now": NOW,
        "limit": 1,
        "worker": "measured",
        "token": secrets.token_hex(16),
        "expires": NOW + timedelta(seconds=30),
        "base": FIXED.base,
        "cap": FIXED.cap,
        "types": types,
    }
    conn = db.engine.raw_connection()
    try:
        cur = conn.driver_connection.cursor()
        cur.execute("ANALYZE jobs")  # as autovacuum keeps it: the claim's update finds its jobs by id then
        statement = postgres_sql.CLAIM[bool(types)]
        cur.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", params)
        [[plan]] = cur.fetchall()[0]
        claimed = cur.connection.execute(
            "SELECT type FROM jobs WHERE status = 'running' AND worker_id = 'measured'"
        )
        assert [row[0] for row in claimed.fetchall()] == ["pdf"]
    finally:
        conn.driver_connection.rollback()
        conn.close()
    top = plan["Plan"]  # buffers count inclusively: the top node's are the statement's
    return top["Shared Hit Blocks"] + top["Shared Read Blocks"]


def work(db, engine, types) -> int:
    return (sqlite_steps if db.dialect == "sqlite" else postgres_buffers)(db, engine, types)


@pytest.mark.parametrize(
    ("how", "types"),
    [
        ("concurrency", None),
        ("concurrency", ["pdf", "email"]),
        ("rate", None),
        ("rate", ["email", "pdf"]),
        ("paused", None),
        ("unlisted", ["pdf"]),  # no limits: a worker that claims only pdf jobs
    ],
)
def test_a_claim_reads_past_waiting_jobs_without_reading_them(db, engine, how, types):
    if how != "unlisted":
        hold(db, engine, how)
    engine.insert("alice", [new("pdf", priority=p) for p in range(6)], NOW)
    before = work(db, engine, types)
    for _ in range(2):
        engine.insert("alice", [new("email", priority=30) for _ in range(BACKLOG)], NOW)
    after = work(db, engine, types)
    engine.insert("alice", [new("email", priority=30) for _ in range(BACKLOG)], NOW)
    more = work(db, engine, types)
    if db.dialect == "sqlite":
        # A few hundred steps for the claim whatever waits; each job read would be about a dozen more.
        assert after <= before + 400, (before, after)
        assert abs(more - after) <= 40, (after, more)
    else:
        # A few dozen buffers; each job read would be one more at least.
        assert after <= before + 40, (before, after)
        assert abs(more - after) <= 10, (after, more)


def test_without_waiting_jobs_the_claim_goes_down_the_claim_index(db, engine):
    """The claim by type is kept for when the claim in order would have something to pass over: a type at
    its limit with no job pending costs the claim nothing more."""
    set_type(db, "email", concurrency=1)
    engine.insert("alice", [new("pdf", priority=p) for p in range(3)] + [new("email")], NOW)
    plain = work(db, engine, None)
    [held] = claim(engine, types=["email"]).jobs
    assert held.type == "email"
    at_limit = work(db, engine, None)
    assert at_limit <= plain + (60 if db.dialect == "sqlite" else 5), (plain, at_limit)
