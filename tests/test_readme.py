"""The README's "Walkthrough with curl", run as written.

Every ``sh`` block of that section (the worker client part included) is pasted into one bash with
``set -euo pipefail``, in a folder laid out like the checkout (``.venv`` and ``app.py``), against a live
server on a new SQLite instance folder there, as after the Quick start's first step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, LiveServer

README = ROOT / "README.md"
HEADING = "## Walkthrough with curl"


def walkthrough_blocks() -> list[str]:
    text = README.read_text()
    start = text.index(f"\n{HEADING}\n")
    end = text.index("\n## ", start + len(HEADING) + 2)  # the next section (### stay inside)
    return re.findall(r"^```sh\n(.*?)^```$", text[start:end], re.S | re.M)


def run_bash(
    script: str, cwd: Path, env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess:
    """Run ``script`` in a session of its own; whatever it leaves running (a worker) is killed after."""
    proc = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def checkout(tmp_path):
    """A folder like the repository root after the Quick start: ``.venv`` (this one) and ``app.py``."""
    assert shutil.which("curl"), "the walkthrough needs curl (apt-get install curl)"
    venv_bin = Path(sys.prefix) / "bin"
    assert (venv_bin / "flask").exists() and (venv_bin / "queuelog-worker").exists(), (
        f"run the tests from the virtualenv of the Quick start (no flask or queuelog-worker in {venv_bin})"
    )
    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".venv").symlink_to(sys.prefix)
    (work / "app.py").symlink_to(ROOT / "app.py")
    return work


def test_the_walkthrough_has_its_blocks():
    blocks = walkthrough_blocks()
    assert len(blocks) == 3
    assert "keys create" in blocks[0] and "/fail" in blocks[0]
    assert "queuelog-worker" in blocks[1]
    assert "kill $WORKER_PID" in blocks[2]


def test_the_walkthrough_runs_as_written(checkout, tmp_path):
    blocks = walkthrough_blocks()
    database = checkout / "instance" / "queuelog.sqlite3"
    server = LiveServer(f"sqlite:///{database}", tmp_path, workers=1, threads=8, cwd=checkout).start()
    try:
        # The shell a reader has: no QUEUELOG_* settings (the commands find ./instance as the server did).
        env = {k: v for k, v in os.environ.items() if not k.startswith("QUEUELOG_")}
        env["Q"] = server.url
        env["PATH"] = f"{checkout / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        result = run_bash("\n".join(blocks), checkout, env)
        again = run_bash(blocks[0], checkout, env)  # pasted a second time: new key names, new jobs
    finally:
        server.stop()
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert again.returncode == 0, f"second run:\n{again.stdout}\n{again.stderr}"

    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    answers = [json.loads(line) for line in lines]
    jobs = [a for a in answers if "status" in a]

    # The first job: claimed with its lease token, completed with its result.
    ada = [j for j in jobs if j["payload"] == {"to": "ada@example.com"}]
    assert [j["status"] for j in ada] == ["pending", "running", "completed"]
    assert ada[1]["lease_token"] and ada[2]["result"] == {"sent": True}
    assert ada[1]["worker_id"].startswith("worker-")

    # The second: the worker's /fail answer puts it back to pending and holds no error text.
    pdf = [j for j in jobs if j["type"] == "pdf"]
    assert [j["status"] for j in pdf] == ["pending", "pending", "pending"]
    worker_view, admin_view = pdf[1], pdf[2]
    assert worker_view["retry_count"] == 1 and "error" not in worker_view
    assert admin_view["error"] == "SMTP said no; password=[REDACTED]"
    events = next(a["events"] for a in answers if "events" in a)
    assert [e["event"] for e in events] == ["enqueued", "claimed", "retry_scheduled"]
    assert events[-1]["error"] == "SMTP said no; password=[REDACTED]"
    # Redacted text is printed where the admin reads it, and nowhere else; the secret never.
    assert [json.loads(line) for line in lines if "[REDACTED]" in line] == [admin_view, {"events": events}]
    assert "hunter2" not in result.stdout + result.stderr

    # The worker client ran the demo handlers: three emails completed, the sync job failed for good.
    listings = [a["jobs"] for a in answers if "jobs" in a]
    completed, failed = listings
    sent = {j["result"].get("sent_to") for j in completed if j["status"] == "completed"}
    assert {"user1@example.com", "user2@example.com", "user3@example.com"} <= sent
    [sync] = failed
    assert sync["type"] == "sync" and sync["retry_count"] == 1
    assert sync["error"].rstrip().endswith("RuntimeError: upstream said 503")
    assert "stopped cleanly" in result.stderr  # SIGTERM: the worker finished and exited 0
