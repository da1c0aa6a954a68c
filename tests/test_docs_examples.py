"""Every example of the docs pages, run as written (docs/development.md, "The documentation").

Each ``sh`` block of ``docs/*.md`` runs alone in bash (``set -euo pipefail``) against a live server on a new
SQLite instance, in a folder laid out like the checkout, as a reader pastes it after the README's Quick
start; the blocks of the sections below are also held to what their comments say they print. Each
``python`` block is compiled and its imports are run, so a renamed function or module breaks the docs'
build of trust here rather than a reader's copy. Commands meant to be adapted, not pasted (production
settings, benchmarks, pybabel) are ``bash`` blocks and are not run.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

from queuelog.api.answers import WORKER_JOB_FIELDS
from tests.conftest import ROOT
from tests.test_readme import checkout  # noqa: F401 - the fixture
from tests.test_readme_sections import SH_BLOCK, run_block

DOCS = ROOT / "docs"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
# Run by a test of its own, with its output compared line by line.
ELSEWHERE = {
    ("client.md", "## Example"): "tests/client/test_example.py",
    ("batches.md", "## Example"): "tests/client/test_batch_example.py",
}


def section_of(text: str, position: int) -> str:
    """The ``##`` heading a position of a page lies under."""
    headings = [m for m in re.finditer(r"^## .*$", text, re.M) if m.start() < position]
    return headings[-1].group(0) if headings else ""


def blocks(pattern: re.Pattern) -> list[tuple[str, str, str]]:
    """(page, section, block) for every block of every page."""
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for match in pattern.finditer(text):
            found.append((page.name, section_of(text, match.start()), match.group(1)))
    return found


SH = [b for b in blocks(SH_BLOCK) if (b[0], b[1]) not in ELSEWHERE]


def check_schedules(out: str) -> None:
    assert "added schedule weekday-report-42 (next " in out
    assert '"name": "sync-42"' in out and '"interval_seconds": 600' in out and '"missed": "skip"' in out
    assert '"status": 422' in out and '"field": "cron"' in out
    lines = out.splitlines()
    assert "schedule:sync-42" in lines and "True" in lines
    assert re.search(r"^sync-42\s+paused\s+every 600s", out, re.M)
    assert lines[-1] == "204"


def check_running_jobs(out: str) -> None:
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


def check_flow_control(out: str) -> None:
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


def check_compact(out: str) -> None:
    claim, completed = (json.loads(line) for line in out.splitlines())
    [job] = claim["jobs"]
    assert list(job) == [*WORKER_JOB_FIELDS, "lease_token"]
    assert completed == {"results": [{"id": job["id"], "status": 200}]}


CHECKS = {
    ("schedules.md", "## Example with curl"): check_schedules,
    ("running-jobs.md", "## Example with curl"): check_running_jobs,
    ("flow-control.md", "## Example with curl"): check_flow_control,
    ("api.md", "## Compact answers for workers"): check_compact,
}


def test_the_pages_have_their_examples():
    """The examples checked in detail are where the checks look for them (each a block of its own)."""
    found = [(page, section) for page, section, _ in SH]
    for key in CHECKS:
        assert found.count(key) == 1, key
    for page, section in ELSEWHERE:
        assert (page, section) in [(p, s) for p, s, _ in blocks(SH_BLOCK)]


@pytest.mark.parametrize(("page", "section", "block"), SH, ids=[f"{p} {s[3:]}" for p, s, _ in SH])
def test_the_example_runs_as_written(page, section, block, checkout, tmp_path):  # noqa: F811 - the fixture
    result = run_block(block, checkout, tmp_path)
    check = CHECKS.get((page, section))
    if check:
        check(result.stdout)


PYTHON = blocks(PYTHON_BLOCK)


@pytest.mark.parametrize(("page", "section", "block"), PYTHON, ids=[f"{p} {s[3:]}" for p, s, _ in PYTHON])
def test_the_python_example_compiles_and_imports(page, section, block):
    tree = ast.parse(block, filename=f"docs/{page}")
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    assert imports, f"docs/{page} ({section}): an example without imports names nothing to check"
    exec(compile(ast.Module(body=imports, type_ignores=[]), f"docs/{page}", "exec"), {})
