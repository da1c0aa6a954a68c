"""Helpers that run the examples of the README and of the docs pages as written, against a live server on a
new SQLite instance, in a folder laid out like the checkout (the way tests/test_readme.py runs the
walkthrough); and the check that every ``sh`` block of the README is run by a test."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.conftest import ROOT, LiveServer
from tests.test_readme import HEADING, checkout, run_bash, walkthrough_blocks  # noqa: F401 - checkout is a fixture

README = ROOT / "README.md"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.S | re.M)


def example_block(heading: str, path: Path = README) -> str:
    """The one ``sh`` block of the section under ``heading`` (up to the next heading of its level or above;
    a ``#`` comment inside a code block is no heading)."""
    lines = path.read_text().split("\n")
    start = lines.index(heading)
    level = len(heading.split(" ", 1)[0])
    end, fenced = len(lines), False
    for number in range(start + 1, len(lines)):
        line = lines[number]
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{level}}} ", line):
            end = number
            break
    [block] = SH_BLOCK.findall("\n".join(lines[start:end]) + "\n")
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


def test_every_sh_block_of_the_readme_is_run():
    """The README's shell blocks are the Quick start's (CI runs both commands: .ci/run) and the walkthrough's
    (tests/test_readme.py); an example added anywhere else would run nowhere, so it belongs in docs/."""
    blocks = SH_BLOCK.findall(README.read_text())
    quick_start = example_block("## Quick start")
    assert "flask --app app run" in quick_start and ".venv/bin/pytest" in quick_start
    assert blocks == [quick_start, *walkthrough_blocks()]
    assert HEADING in README.read_text()


def test_ci_runs_the_readmes_test_command():
    """Step 2's test command is the one .ci/run runs (with its figures of the slowest tests appended), and
    it runs every tier: nothing that CI runs is missing from what the README tells a newcomer to run."""
    quick_start = example_block("## Quick start")
    command = re.search(r"&& (\.venv/bin/pytest[^\n]*)", quick_start).group(1).strip()
    assert '-m ""' in command
    ci = (README.parent / ".ci" / "run").read_text()
    runs = [line.strip() for line in ci.splitlines() if line.strip().startswith(".venv/bin/pytest")]
    assert runs == [f"{command} --durations=15"]
