"""The README's "Producer client" example (also in docs/client.md), run as written, the way
tests/test_readme.py runs the README's walkthrough: in a folder laid out like the checkout, against a live server on a new SQLite instance."""

from __future__ import annotations

import os
import re

from tests.conftest import ROOT, LiveServer
from tests.test_readme import checkout, run_bash  # noqa: F401 - checkout is a fixture

DOC = ROOT / "README.md"
HEADING = "## Producer client"


def example_blocks() -> list[str]:
    text = DOC.read_text()
    start = text.index(f"\n{HEADING}\n")
    end = text.index("\n## ", start + len(HEADING) + 2)
    return re.findall(r"^```sh\n(.*?)^```$", text[start:end], re.S | re.M)


def test_the_example_runs_as_written(checkout, tmp_path):  # noqa: F811 - the fixture
    [block] = example_blocks()
    assert "python - <<'EOF'" in block and "queue.wait(" in block
    database = checkout / "instance" / "queuelog.sqlite3"
    server = LiveServer(f"sqlite:///{database}", tmp_path, workers=1, threads=8, cwd=checkout).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
        env["Q"] = server.url
        env["PATH"] = f"{checkout / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        result = run_bash(block, checkout, env, timeout=120)
    finally:
        server.stop()
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    documented = [line.removeprefix("#   ") for line in block.splitlines() if line.startswith("#   ")]
    assert result.stdout.splitlines() == documented  # a new database: the ids are those shown
    assert "job 2 (sync) failed for good" in result.stderr  # the worker ran it, and logged to the shell
    assert "stopped cleanly" in result.stderr
