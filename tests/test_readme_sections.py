"""The README's examples outside the walkthrough ("Schedules (periodic jobs)", "Running jobs: cancel,
progress, snooze", "Flow control (concurrency and rate limits)"), each run as written against a live server on a new SQLite instance, in a folder laid
out like the checkout (the way tests/test_readme.py runs the walkthrough)."""

from __future__ import annotations

import json
import os
import re

from tests.conftest import ROOT, LiveServer
from tests.test_readme import checkout, run_bash  # noqa: F401 - checkout is a fixture


def example_block(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n{heading}\n")
    end = text.index("\n## ", start + len(heading) + 2)
    [block] = re.findall(r"^```sh\n(.*?)^```$", text[start:end], re.S | re.M)
    return block


def run_block(block: str, checkout, tmp_path, *, threads: int = 4, run: str | None = "42"):  # noqa: F811
    """Run ``block`` against a live server on a new SQLite instance; it must exit 0."""
    database = checkout / "instance" / "queuelog.sqlite3"
    server = LiveServer(f"sqlite:///{database}", tmp_path, workers=1, threads=threads, cwd=checkout).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
        env["Q"] = server.url
        if run is not None:
            env["RUN"] = run
        env["PATH"] = f"{checkout / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        result = run_bash(block, checkout, env, timeout=120)
    finally:
        server.stop()
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def run_example(heading: str, checkout, tmp_path):  # noqa: F811 - the fixture
    return run_block(example_block(heading), checkout, tmp_path).stdout


def test_the_schedules_example_runs_as_written(checkout, tmp_path):  # noqa: F811 - the fixture
    out = run_example("## Schedules (periodic jobs)", checkout, tmp_path)
    assert "added schedule weekday-report-42 (next " in out
    assert '"name": "sync-42"' in out and '"interval_seconds": 600' in out and '"missed": "skip"' in out
    assert '"status": 422' in out and '"field": "cron"' in out
    lines = out.splitlines()
    assert "schedule:sync-42" in lines and "True" in lines
    assert re.search(r"^sync-42\s+paused\s+every 600s", out, re.M)
    assert lines[-1] == "204"


def test_the_running_jobs_example_runs_as_written(checkout, tmp_path):  # noqa: F811 - the fixture
    out = run_example("## Running jobs: cancel, progress, snooze", checkout, tmp_path)
    lines = out.splitlines()
    progressed = json.loads(lines[0])
    assert (progressed["status"], progressed["progress"], progressed["progress_message"]) == (
        "running",
        40,
        "page 4 of 10",
    )
    assert progressed["cancel_requested"] is False
    asked = json.loads(lines[1])
    assert asked["status"] == "running" and asked["cancel_requested"] is True and lines[2] == "202"
    assert lines[3:5] == ["True", "cancelled"]
    events = [e["event"] for e in json.loads(lines[5])["events"]]
    assert events == ["enqueued", "claimed", "cancel_requested", "cancelled"]
    snoozed = json.loads(lines[6])
    assert (snoozed["status"], snoozed["retry_count"], snoozed["snooze_count"]) == ("pending", 0, 1)


def test_the_flow_control_example_runs_as_written(checkout, tmp_path):  # noqa: F811 - the fixture
    out = run_example("## Flow control (concurrency and rate limits)", checkout, tmp_path)
    lines = out.splitlines()
    assert lines[:2] == [
        "limited type pdf: concurrency 4, rate -",
        "limited type email: concurrency -, rate 100/m",
    ]
    changed = json.loads(lines[2])
    assert {k: changed[k] for k in ("name", "concurrency_limit", "rate_limit", "rate_period", "running")} == {
        "name": "sync", "concurrency_limit": 2, "rate_limit": 10, "rate_period": 30, "running": 0,
    }  # fmt: skip
    refused = json.loads(lines[3])
    assert refused["status"] == 422 and refused["type"] == "/problems/validation-failed"
    assert refused["errors"] == [
        {"field": "concurrency_limit", "message": "must be an integer from 1 to 10000"}
    ]
    assert lines[4] == "2"  # the 422 saved nothing
    assert lines[5:8] == [
        "email\tenabled\t-\t\t-\t100/m",
        "pdf\tenabled\t-\t\t4\t-",
        "sync\tenabled\t-\t\t2\t10/30s",
    ]
    assert lines[8:] == [
        "limited type pdf: concurrency -, rate -",
        "limited type email: concurrency -, rate -",
        "None",
    ]
