"""A PostgreSQL of the test's own (initdb into a temporary folder, a free port; never the shared server),
stopped and started, then killed with SIGKILL and started (crash recovery), under load through real HTTP
against gunicorn: producers enqueuing, workers claiming and completing (queuelog-bench's outage scenario,
queuelog/bench/outage.py). What the clients see and what the database holds afterwards
(docs/operations.md#outages)."""

from __future__ import annotations

import pytest

from queuelog.bench.outage import PG_BIN, run_outage


@pytest.mark.slow
def test_postgresql_restarted_and_killed_under_load_costs_no_500_and_no_job(tmp_path):
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"no PostgreSQL binaries in {PG_BIN} (QUEUELOG_PG_BIN)")
    result = run_outage(log=tmp_path / "gunicorn.log")
    statuses = result.statuses
    # Only answers that succeeded, and 503s with Retry-After while the database was out: never a 500, and
    # never a request left without an answer (0).
    assert set(statuses) <= {200, 201, 204, 503}, statuses
    assert statuses.get(503, 0) > 0, "the outages were not seen"
    assert result.without_retry_after == 0
    # Serving again within a second of the database accepting connections, after a stop and after a kill.
    assert len(result.recoveries) == 2 and all(r < 1.0 for r in result.recoveries), result.recoveries
    # Every acknowledged job exists once and completed once; nothing else was completed twice.
    assert result.acknowledged > 50 and result.request_ids
    assert (result.lost, result.duplicated, result.completed_twice, result.not_completed) == (0, 0, 0, 0)
