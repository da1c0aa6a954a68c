"""Which processes start the maintenance thread (docs/concepts.md#retention): a serving process
does, a `flask` command other than `flask run` does not (it creates the app to reach the database and
leaves again). Each runs in a fresh interpreter on a SQLite file of its own."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

THREADS = "import threading; print(sorted(t.name for t in threading.enumerate()))"


def _env(tmp_path) -> dict[str, str]:
    return {
        **os.environ,
        "QUEUELOG_DATABASE_URL": f"sqlite:///{tmp_path / 'queue.sqlite3'}",
        "QUEUELOG_SECRET_KEY": "maintenance-test",
        "QUEUELOG_INSTANCE_PATH": str(tmp_path / "instance"),
        "QUEUELOG_ADMIN_PASSWORD": "admin-password-for-tests",
        "QUEUELOG_RETENTION": "7d",
    }


def _threads(tmp_path, *args: str, stdin: str | None = None) -> str:
    """The names of the threads that ``python args`` prints (THREADS) after it made the app."""
    result = subprocess.run(
        [sys.executable, *args],
        input=stdin,
        env=_env(tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "'MainThread'" in result.stdout, result.stdout
    return result.stdout


def test_a_serving_process_starts_the_maintenance_thread(tmp_path):
    code = f"from queuelog import create_app; app = create_app(); {THREADS}"
    assert "queuelog-maintenance" in _threads(tmp_path, "-c", code)


def test_a_flask_command_starts_none(tmp_path):
    # `flask shell` reads its commands from stdin when stdin is not a terminal.
    shell = _threads(tmp_path, "-m", "flask", "--app", "app", "shell", stdin=THREADS + "\n")
    assert "queuelog-maintenance" not in shell


def test_an_app_command_starts_none(tmp_path):
    """The app's own commands (`db upgrade`, `users` ...) are found on the app, so it is made before click
    has chosen the command: that too is not a serving process."""
    code = (
        "import sys; from flask.cli import main; sys.argv = ['flask', '--app', 'app', 'db', 'upgrade']\n"
        f"try:\n    main()\nexcept SystemExit:\n    pass\n{THREADS}"
    )
    upgrade = _threads(tmp_path, "-c", code)
    assert "database is at head" in upgrade and "queuelog-maintenance" not in upgrade
