"""The SQLite claim's query plans (docs/performance.md#claims-stay-flat-at-any-backlog): the claim in order walks ix_jobs_claim, the claim
by type seeks each type's run in ix_jobs_claim_by_type, a limited type's running jobs are counted through
ix_jobs_running_type (its own entries only), and the probe that comes first seeks the lease index and
each held type's jobs instead of scanning jobs."""

from __future__ import annotations

import sqlite3

import pytest

from queuelog.db import Database
from queuelog.engines.sqlite import sql as sqlite_sql

PARAMS = {"now": "x", "limit": 1, "worker": "w", "token": "t", "expires": "e", "types": "[]"}


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    path = tmp_path_factory.mktemp("plans") / "plans.sqlite3"
    db = Database(f"sqlite:///{path}")
    db.upgrade()
    db.dispose()
    with sqlite3.connect(path) as connection:
        yield connection


def _plan(conn, statement: str) -> list[str]:
    return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}", PARAMS)]


@pytest.mark.parametrize("limited", [False, True])
def test_the_claim_in_order_walks_the_claim_index(conn, limited):
    plan = _plan(conn, sqlite_sql.CLAIM_IN_ORDER[limited])
    assert "SCAN jobs USING INDEX ix_jobs_claim" in plan
    assert not any(step.startswith("SCAN jobs") and "ix_jobs_claim" not in step for step in plan)


@pytest.mark.parametrize("typed", [False, True])
def test_the_claim_by_type_seeks_each_types_run(conn, typed):
    """docs/flow-control.md: each type's jobs are sought in ix_jobs_claim_by_type, merged in a sorter; the
    types come from the worker's list or from skipping through that index (a scan of one row at a time,
    LIMIT 1: tests/engines/test_claim_work.py counts the work)."""
    for statement in (sqlite_sql.CLAIM_BY_TYPE[typed], sqlite_sql.CLAIMABLE[typed]):
        plan = _plan(conn, statement)
        assert "SEARCH j USING INDEX ix_jobs_claim_by_type (type=?)" in plan
        assert ("SEARCH jobs USING INDEX ix_jobs_claim_by_type (type>?)" in plan) is not typed
        scans = [step for step in plan if step.startswith("SCAN jobs") or step.startswith("SCAN j ")]
        assert scans == ([] if typed else ["SCAN jobs USING INDEX ix_jobs_claim_by_type"])


@pytest.mark.parametrize(
    "statement",
    [sqlite_sql.CLAIM_IN_ORDER[True], *sqlite_sql.CLAIM_BY_TYPE.values(), *sqlite_sql.CLAIMABLE.values()],
)
def test_a_limited_types_running_jobs_are_sought_by_type(conn, statement):
    plan = _plan(conn, statement)
    assert "SEARCH r USING INDEX ix_jobs_running_type (type=?)" in plan
    assert not any(step.split()[:2] == ["SCAN", "r"] for step in plan)


@pytest.mark.parametrize("typed", [False, True])
def test_the_safety_net_probe_seeks_the_lease_index(conn, typed):
    assert "SEARCH jobs USING INDEX ix_jobs_lease (lease_expires_at<?)" in _plan(
        conn, sqlite_sql.CLAIMABLE[typed]
    )


def test_the_probe_seeks_the_lease_index_and_each_held_types_jobs(conn):
    plan = _plan(conn, sqlite_sql.CLAIM_PROBE)
    assert "SEARCH jobs USING INDEX ix_jobs_lease (lease_expires_at<?)" in plan
    assert "SEARCH jobs USING INDEX ix_jobs_claim_by_type (type=?)" in plan
    assert "SEARCH r USING INDEX ix_jobs_running_type (type=?)" in plan
    assert not any(step.startswith("SCAN jobs") or step.split()[:2] == ["SCAN", "r"] for step in plan)
