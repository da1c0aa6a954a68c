"""Helpers for the worker tests: real queuelog-worker processes, polling, API sessions."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.conftest import ROOT

FAST = {"QUEUELOG_RETRY_BACKOFF_BASE": "0"}


def wait_until(predicate, timeout: float, what: str):
    """Poll ``predicate`` every 0.1 s until it returns something true; that value, or AssertionError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Workers:
    """Starts queuelog-worker processes and makes sure none outlives the test."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.procs: list[subprocess.Popen] = []

    def start(self, url: str, key: str, *args: str, log_level: str | None = "DEBUG") -> subprocess.Popen:
        """Start one worker on tests.worker.handlers; ``log_level=None`` leaves the default."""
        log_path = self.folder / f"worker-{len(self.procs)}.log"
        level = ["--log-level", log_level] if log_level else []
        with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "queuelog.worker.cli",
                    "--url",
                    url,
                    "--handlers",
                    "tests.worker.handlers",
                    *level,
                    *args,
                ],
                cwd=ROOT,
                env={**os.environ, "QUEUELOG_WORKER_KEY": key},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        proc.log_path = log_path
        self.procs.append(proc)
        return proc

    def output(self, proc) -> str:
        return Path(proc.log_path).read_text()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def session(key: str) -> requests.Session:
    """A requests session that sends ``key`` as its bearer token."""
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    return s
