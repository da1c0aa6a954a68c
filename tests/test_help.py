"""The --help of the commands queuelog installs: plain text, and a default stated for every option."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def help_text(module: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def option_entries(text: str) -> dict[str, str]:
    """Each option's entry in the "options:" section, keyed by its first flag, whitespace folded."""
    section = text.split("\noptions:\n", 1)[1].split("\n\n", 1)[0]
    entries: dict[str, str] = {}
    for chunk in re.split(r"\n(?=  -)", section):
        flag = chunk.split()[0].rstrip(",")
        entries[flag] = " ".join(chunk.split())
    return entries


@pytest.mark.parametrize("module", ["queuelog.worker.cli", "queuelog.bench"])
def test_help_has_no_markup(module):
    assert "`" not in help_text(module)


def test_worker_help_states_every_default_and_the_log_levels():
    entries = option_entries(help_text("queuelog.worker.cli"))
    assert set(entries) == {
        "-h",
        "--url",
        "--key",
        "--handlers",
        "--concurrency",
        "--types",
        "--lease-seconds",
        "--wait-seconds",
        "--grace-period",
        "--log-level",
    }
    for flag, entry in entries.items():
        if flag != "-h":
            assert "(default:" in entry or "(required" in entry, entry
    assert "(default: 4)" in entries["--concurrency"]
    assert "(default: 10)" in entries["--wait-seconds"]
    log_level = entries["--log-level"]
    assert "{DEBUG,INFO,WARNING,ERROR}" in log_level and "(default: INFO)" in log_level


def test_an_unknown_handler_module_is_one_line_not_a_traceback():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "queuelog.worker.cli",
            "--url",
            "http://127.0.0.1:9",
            "--handlers",
            "no_such_mod",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"QUEUELOG_WORKER_KEY": "ql_x", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "queuelog-worker: no module named 'no_such_mod' (is it on PYTHONPATH?)"
