"""queuelog-bench runs end to end in a small mode, so that it cannot rot unnoticed."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from sqlalchemy.engine import make_url

from queuelog.bench.core import raw_loop
from queuelog.bench.price import FLOOR, LIST_INDEXES, VARIANTS, RowHistory, Variant, prepare
from queuelog.bench.targets import Target
from tests.conftest import PG_URL, ROOT


def run_bench(*args: str) -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-m", "queuelog.bench", *args, "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # the pages scenario on PostgreSQL: ~75 s alone, minutes beside the rest of the suite
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def engines() -> list[str]:
    return ["--sqlite"] + (["--no-sqlite", "--postgres-url", PG_URL] if PG_URL else [])


@pytest.mark.parametrize("scenario", ["core", "backlog", "pages"])
def test_in_process_scenarios(scenario):
    args = [scenario, "--jobs", "300", "--backlog", "3000", "--pages-jobs", "3000", "--batch", "50"]
    rows = run_bench(*args) + (run_bench(*args, "--no-sqlite", "--postgres-url", PG_URL) if PG_URL else [])
    assert {row["engine"] for row in rows} == ({"sqlite", "postgresql"} if PG_URL else {"sqlite"})
    for row in rows:
        assert row["scenario"] == scenario
        if scenario == "core":
            assert row["queuelog_per_s"] > 0 and row["raw_per_s"] > 0 and row["ratio"] > 0
            assert row["minimal_per_s"] > 0
            assert row["ratio_minimal"] == pytest.approx(row["queuelog_per_s"] / row["minimal_per_s"])
        else:
            assert row["p50_ms"] > 0
    if scenario == "core":
        assert {row["operation"] for row in rows} == {
            "enqueue",
            "claim_complete",
            "batch_50",
            "batch_50_next",
        }
        for engine in {row["engine"] for row in rows}:  # the two batch rows share the minimal loop's floor
            floor = {row["operation"]: row["minimal_per_s"] for row in rows if row["engine"] == engine}
            assert floor["batch_50_next"] == floor["batch_50"]


def test_core_by_cpu_time():
    rows = run_bench("core", "--jobs", "200", "--batch", "50", "--clock", "cpu")
    assert [row["operation"] for row in rows] == ["enqueue", "claim_complete", "batch_50", "batch_50_next"]
    assert all(row["queuelog_per_s"] > 0 and row["minimal_per_s"] > 0 for row in rows)


def test_flow_scenario_runs_the_layer_with_and_without_limits():
    rows = run_bench("flow", "--jobs", "200", "--batch", "50", "--clock", "cpu")
    assert [row["operation"] for row in rows] == ["enqueue", "claim_complete", "batch_50"]
    for row in rows:
        assert row["unlimited_per_s"] > 0 and row["limited_per_s"] > 0
        assert row["ratio"] == pytest.approx(row["limited_per_s"] / row["unlimited_per_s"])


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_blocked_scenario_prints_the_claim_without_and_with_the_blocked_jobs(engine):
    """docs/flow-control.md, "What it costs": both figures of one run side by side, with their ratio."""
    if engine == "postgresql" and not PG_URL:
        pytest.skip("needs QUEUELOG_TEST_POSTGRES_URL")
    where = ["--no-sqlite", "--postgres-url", PG_URL] if engine == "postgresql" else []
    rows = run_bench("blocked", "--blocked", "2000", "--claims", "20", *where)
    assert [row["operation"] for row in rows] == [
        "claim, concurrency limit 1 taken",
        "other producer's enqueue, concurrency limit 1 taken",
        "claim, rate limit, no tokens",
        "other producer's enqueue, rate limit, no tokens",
    ]
    for row in rows:
        assert row["blocked"] == 2000 and row["none_p50_ms"] > 0 and row["blocked_p50_ms"] > 0
        assert row["ratio"] == pytest.approx(row["blocked_p50_ms"] / row["none_p50_ms"])
    assert all(row["none_cpu_p50_ms"] > 0 for row in rows if row["operation"].startswith("claim"))


def test_http_scenario():
    rows = run_bench("http", "--jobs", "200", "--clients", "2", "--workers", "1", "--threads", "4")
    operations = [row["operation"] for row in rows]
    assert operations[0].startswith("do-nothing")
    runs = rows[0]["ceiling_runs_per_s"]  # before each of the seven rows of queuelog, and after the last
    assert len(runs) == 8 and rows[0]["requests_per_s"] == sorted(runs)[4]  # the faster of the middle two
    assert operations[3:] == [
        "claim+complete, 1 job per claim, minimal",
        "claim, then complete-and-claim-next, 1 job at a time, minimal",
        "batch claim 100 + batch complete",
        "batch claim 100 + batch complete, minimal",
        "batch claim 100, then complete-and-claim-next, minimal",
    ]
    for row in rows:
        assert row["errors_5xx"] == 0 and row["duplicates"] == 0
        assert row["requests_per_s"] > 0
        if sys.platform == "linux":  # the machine's idle share while the row ran (/proc/stat)
            assert 0 <= row["idle_pct"] <= 100
        else:
            assert row["idle_pct"] is None
        assert row["per_ceiling_request"] == pytest.approx(
            (row["jobs_per_s"] or row["requests_per_s"]) / rows[0]["requests_per_s"]
        )
    assert rows[1]["jobs"] == 200 and rows[2]["jobs"] == 200 + 40  # the enqueue warm-up adds n/5 jobs
    assert [row["jobs"] for row in rows[3:]] == [200, 200, 200, 200, 200]
    # One job at a time with next: a request per job, and one claim per client to start.
    assert rows[4]["requests"] == 200 + 2
    # Batches with next: a claim per client to start, then one request per batch of 100 (two batches;
    # the completion of the last claims none).
    assert rows[7]["requests"] == 2 + 2
    assert 0 < rows[-1]["server_max_rss_mb"] < 400


def test_price_scenario_rows():
    rows = run_bench("price", "--jobs", "100", "--batch", "20", "--rounds", "1", "--clock", "cpu")
    assert [row["operation"] for row in rows] == [v.label for v in VARIANTS] + [FLOOR]
    for row in rows:
        assert row["enqueue_per_s"] > 0 and row["claim_complete_per_s"] > 0 and row["batch_20_per_s"] > 0
        assert row["enqueue_ratio_minimal"] == pytest.approx(row["enqueue_per_s"] / rows[-1]["enqueue_per_s"])
    assert rows[-1]["claim_complete_ratio_minimal"] == 1.0


def _priced(tmp_path, variant: Variant) -> sqlite3.Connection:
    """A fresh database with ``variant``'s parts taken away, after the raw loop ran 30 jobs through it."""
    target = Target(tmp_path)
    url = target.fresh("priced")
    prepare(target, url, variant)
    raw_loop(
        target,
        url,
        30,
        10,
        sql=RowHistory(target.sql) if variant.row_history else None,
        history=variant.history,
    )
    return sqlite3.connect(make_url(url).database)


def test_price_takes_away_what_each_variant_names(tmp_path):
    whole = _priced(tmp_path / "whole", VARIANTS[0])
    assert (
        whole.execute("SELECT count(*) FROM job_events").fetchone()[0] == 60 * 3
    )  # twice 30 jobs, 3 events each
    assert whole.execute("SELECT sum(n) FROM job_counts WHERE status = 'completed'").fetchone()[0] == 60

    bare = _priced(tmp_path / "bare", Variant("bare", history=False, counters=False, lists=False))
    assert bare.execute("SELECT count(*) FROM job_events").fetchone()[0] == 0
    assert bare.execute("SELECT count(*) FROM job_counts").fetchone()[0] == 0
    indexes = {row[0] for row in bare.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "ix_jobs_claim" in indexes and not indexes & set(LIST_INDEXES)
    assert bare.execute("SELECT count(*) FROM jobs WHERE status = 'completed'").fetchone()[0] == 60


def test_price_row_history_keeps_every_transition_in_the_row(tmp_path):
    db = _priced(tmp_path, VARIANTS[-1])
    assert VARIANTS[-1].row_history
    assert db.execute("SELECT count(*) FROM job_events").fetchone()[0] == 0
    histories = [json.loads(h) for (h,) in db.execute("SELECT history FROM jobs ORDER BY id")]
    assert len(histories) == 60
    for history in histories:
        assert [entry[1:] for entry in history] == [
            ["enqueued", "bench", 0],
            ["claimed", "bench-worker", 1],
            ["completed", "bench-worker", 1],
        ]


def test_workflows_scenario_prints_its_rows():
    """A chained batch next to plain jobs, and a job with waiting dependents completed, on each engine."""
    args = ["workflows", "--workflow-jobs", "60", "--rounds", "1"]
    rows = run_bench(*args) + (run_bench(*args, "--no-sqlite", "--postgres-url", PG_URL) if PG_URL else [])
    assert {row["engine"] for row in rows} == ({"sqlite", "postgresql"} if PG_URL else {"sqlite"})
    for row in rows:
        assert row["scenario"] == "workflows"
        assert row["workflow_ms"] > 0 and row["plain_ms"] > 0
        assert row["ratio"] == pytest.approx(row["workflow_ms"] / row["plain_ms"])
    assert [row["operation"] for row in rows[:2]] == [
        "enqueue 60 chained (POST /batches) vs plain (/jobs/batch)",
        "complete a job with 60 waiting dependents vs none",
    ]
    table = subprocess.run(
        [sys.executable, "-m", "queuelog.bench", "workflows", "--workflow-jobs", "20", "--rounds", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert table.returncode == 0 and table.stdout.count("workflows sqlite") == 2


def test_pickup_scenario():
    rows = run_bench(
        "pickup", "--samples", "3", "--waiting", "20", *(["--postgres-url", PG_URL] if PG_URL else [])
    )
    pickups = [row for row in rows if row["scenario"] == "pickup"]
    expected = ["one process", "two gunicorn processes"] + (["one process", "two servers"] if PG_URL else [])
    assert [row["operation"] for row in pickups] == expected
    for row in pickups:
        assert 0 <= row["p50_ms"] <= row["p90_ms"] <= row["max_ms"] < 5000
    if PG_URL:
        idle = rows[-1]
        assert idle["scenario"] == "idle" and idle["errors"] == 0
        assert idle["get_jobs_max_ms"] < 5000 and idle["transactions_per_s"] >= 0
        assert idle["repolls_per_s"] > 0 and idle["transactions_per_repoll"] > 0  # each checks its key
