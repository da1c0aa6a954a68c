"""PgBouncer in transaction mode (docs/operations.md#pgbouncer): the engine conformance suite, the
maintenance election and the tests with two servers (or two processes) on one PostgreSQL, run again through
a real PgBouncer of the test's own, with the settings that page prescribes (no prepared statements, poll
wake-ups).

The pooler listens on a free port and sends every client to the shared PostgreSQL (127.0.0.1:5432) in a
schema of this test's own, which its ``connect_query`` puts on each server connection's search path (the
``options`` startup parameter that the rest of the suite uses is not forwarded by PgBouncer). The suite runs
in a child pytest; this test passes when all of it passes.
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.conftest import PG_URL, ROOT, free_port

PGBOUNCER = shutil.which("pgbouncer") or next(
    (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(path)), None
)
# What runs through the pooler: every engine conformance test on PostgreSQL, the maintenance election,
# and the tests where two servers or processes share the database.
THROUGH_POOLER = [
    "tests/engines",
    "tests/test_retention.py",
    "tests/test_scale_out.py",
    "tests/api/test_long_poll.py::test_long_poll_sees_jobs_enqueued_through_another_server",
]


@pytest.fixture(scope="module")
def pgbouncer():
    """A PgBouncer in transaction mode in front of the test PostgreSQL; yields (its URL, the schema)."""
    if not PG_URL:
        pytest.skip("needs QUEUELOG_TEST_POSTGRES_URL (the PostgreSQL that PgBouncer stands in front of)")
    if PGBOUNCER is None:
        pytest.skip("pgbouncer is not installed (Debian: apt-get install pgbouncer; .ci/run installs it)")
    target = make_url(PG_URL)
    schema = f"queuelog_bouncer_{os.getpid()}_{secrets.token_hex(3)}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    # pgbouncer refuses to run as root: as root, it runs as nobody, which must reach this folder (pytest's
    # own folders are private) and write its log there.
    folder = Path(tempfile.mkdtemp(prefix="queuelog-pgbouncer-"))
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    port = free_port()
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"bouncer = host={target.host or '127.0.0.1'} port={target.port or 5432} dbname={target.database}"
        f" user={target.username or 'postgres'}"
        f" connect_query='SET search_path TO \"{schema}\"'\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = any\n"
        "pool_mode = transaction\n"
        "max_client_conn = 2000\n"
        "default_pool_size = 40\n"
        "ignore_startup_parameters = extra_float_digits\n"
        f"logfile = {folder / 'pgbouncer.log'}\n"
    )
    args = [PGBOUNCER, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        args[1:1] = ["-u", "nobody"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = folder / "pgbouncer.log"
                    told = log.read_text() if log.exists() else ""
                    raise RuntimeError(f"pgbouncer did not start: {told}") from None
                time.sleep(0.05)
        yield f"postgresql+psycopg://{target.username or 'postgres'}@127.0.0.1:{port}/bouncer", schema
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_the_conformance_suite_and_the_two_server_tests_pass_through_pgbouncer(pgbouncer, tmp_path):
    url, schema = pgbouncer
    env = {
        **os.environ,
        "QUEUELOG_TEST_POSTGRES_URL": url,
        "QUEUELOG_TEST_POSTGRES_SCHEMA": schema,
        "QUEUELOG_DB_PREPARED_STATEMENTS": "false",
        "QUEUELOG_WAKEUPS": "poll",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-q",
            "-k",
            "postgresql",
            "-o",
            "addopts=",
            *THROUGH_POOLER,
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 100, summary  # the suite ran, not a handful of tests
    assert "prepared statement" not in result.stdout
    Path(tmp_path / "summary.txt").write_text(summary)


def test_a_listener_behind_pgbouncer_in_transaction_mode_notices_and_polls(pgbouncer):
    """Signals left on (the setting forgotten): the listener finds that its own notification never comes
    back, says so, and the process probes every QUEUELOG_LONG_POLL_INTERVAL; a job is still picked up."""
    from queuelog.db import Database
    from queuelog.queue import JobSpec, Queue

    url, _ = pgbouncer
    db, other = Database(url, prepared_statements=False), Database(url, prepared_statements=False)
    db.upgrade()
    q = Queue(db, wakeups="signal", poll_interval=0.1, safety_net=60)
    enqueuing = Queue(other, wakeups="poll")  # another process: its enqueue reaches q by the database alone
    try:
        with q.wakeups.waiting(["email"]):
            time.sleep(4)  # the listener's check takes up to 3 s
            assert not q.wakeups.listening
        q.types.seed("email")
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(q.claim_wait, "w", wait_seconds=10, types=["email"])
            time.sleep(0.3)
            enqueuing.enqueue("alice", JobSpec(type="email", payload={}, payload_json="{}"))
            started = time.monotonic()
            assert len(future.result(timeout=15)) == 1
            assert time.monotonic() - started < 1.0  # the probe, 0.1 s apart, not the 60 s safety net
    finally:
        q.wakeups.stop()
        enqueuing.wakeups.stop()
        db.dispose()
        other.dispose()
