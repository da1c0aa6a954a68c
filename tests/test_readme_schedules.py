"""The README's "Schedules (periodic jobs)" example, run as written against a live server on a new SQLite
instance, in a folder laid out like the checkout (the way tests/test_readme.py runs the walkthrough)."""

from __future__ import annotations

import os
import re

from tests.conftest import ROOT, LiveServer
from tests.test_readme import checkout, run_bash  # noqa: F401 - checkout is a fixture

HEADING = "## Schedules (periodic jobs)"


def example_block() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"\n{HEADING}\n")
    end = text.index("\n## ", start + len(HEADING) + 2)
    [block] = re.findall(r"^```sh\n(.*?)^```$", text[start:end], re.S | re.M)
    return block


def test_the_schedules_example_runs_as_written(checkout, tmp_path):  # noqa: F811 - the fixture
    block = example_block()
    database = checkout / "instance" / "queuelog.sqlite3"
    server = LiveServer(f"sqlite:///{database}", tmp_path, workers=1, threads=4, cwd=checkout).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
        env["Q"] = server.url
        env["RUN"] = "42"
        env["PATH"] = f"{checkout / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        result = run_bash(block, checkout, env, timeout=120)
    finally:
        server.stop()
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    out = result.stdout
    assert "added schedule weekday-report-42 (next " in out
    assert '"name": "sync-42"' in out and '"interval_seconds": 600' in out and '"missed": "skip"' in out
    assert '"status": 422' in out and '"field": "cron"' in out
    lines = out.splitlines()
    assert "schedule:sync-42" in lines and "True" in lines
    assert re.search(r"^sync-42\s+paused\s+every 600s", out, re.M)
    assert lines[-1] == "204"
