"""The ``outage`` scenario: a PostgreSQL of its own, stopped and started, then killed (``kill -9``) and
started (crash recovery), under load: producers enqueuing (each job with an idempotency key, sent again
until acknowledged) and workers claiming and completing (each claim with a request id, sent again with it
when the answer was lost; each report sent again until answered) through real HTTP against gunicorn.

It counts every answer by status (500s; 503s with and without Retry-After), measures how long after the
database accepted connections again the server served a request again (a probe every 20 ms), and at the
end reads the database: every acknowledged job must exist once and have completed once
(docs/operations.md#outages).

The server may run another checkout's code (``server_path``, e.g. the code before a change), which then
migrates and seeds the database itself; the load leaves out request ids when that server refuses them.
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PG_BIN = Path(os.environ.get("QUEUELOG_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class OwnPostgres:
    """A PostgreSQL cluster in a temporary folder on a free port, started, stopped and killed at will
    (never any other server). Run as root, it runs as the ``postgres`` user, as initdb demands."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self._user: tuple[int, int] | None = None
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            self._user = (entry.pw_uid, entry.pw_gid)
            os.chown(folder, *self._user)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        def demote() -> None:
            if self._user is not None:
                os.setgid(self._user[1])
                os.setuid(self._user[0])

        return subprocess.run(
            [str(PG_BIN / args[0]), *args[1:]],
            preexec_fn=demote,
            cwd=self.folder,
            check=check,
            capture_output=True,
            text=True,
        )

    def init(self) -> OwnPostgres:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c max_connections=200 -c shared_buffers=32MB"
        )
        (self.folder / "options").write_text(options)
        return self.start()

    def start(self) -> OwnPostgres:
        """Start, and return once it accepts connections."""
        options = (self.folder / "options").read_text()
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.folder / "log"), "-o", options, "-w", "start"
        )
        return self

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash would; its backends end when they notice."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        # Its backends outlive it for a moment; the next start waits for the old shared memory to go.
        (self.data / "postmaster.pid").unlink(missing_ok=True)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@dataclass
class Tally:
    """Every answer the load got, by status, and the acknowledgements."""

    statuses: Counter = field(default_factory=Counter)
    without_retry_after: int = 0  # 503s without Retry-After
    enqueued: set[str] = field(default_factory=set)  # acknowledged idempotency keys
    completed: list[int] = field(default_factory=list)  # job ids whose complete was acknowledged
    replayed_claims: int = 0  # claims sent again with their request id
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, status: int, headers: Any) -> None:
        with self.lock:
            self.statuses[status] += 1
            if status == 503 and not headers.get("Retry-After"):
                self.without_retry_after += 1


class Caller:
    """One keep-alive HTTP connection with one key; a lost answer is status 0."""

    def __init__(self, port: int, key: str, tally: Tally, timeout: float = 10.0):
        self.port, self.key, self.tally, self.timeout = port, key, tally, timeout
        self.conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def send(self, method: str, path: str, body: Any = None) -> tuple[int, Any, Any]:
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            self.conn.request(method, path, json.dumps(body) if body is not None else None, headers)
            answer = self.conn.getresponse()
            data = answer.read()
        except (OSError, http.client.HTTPException):
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            self.tally.note(0, {})
            return 0, None, {}
        self.tally.note(answer.status, answer.headers)
        decoded = json.loads(data) if data and answer.headers.get_content_type().endswith("json") else None
        return answer.status, decoded, answer.headers


def _pause(status: int, headers: Any, stop: threading.Event) -> None:
    """Before sending again: the server's Retry-After when it gave one (a 503), else a short pause."""
    try:
        delay = float(headers.get("Retry-After", "")) if status == 503 else 0.1
    except ValueError:
        delay = 0.1
    stop.wait(delay)


def _closing(target: Any) -> Any:
    """A thread's function that closes its caller's connection when it ends."""

    def run(caller: Caller, *args: Any) -> None:
        try:
            target(caller, *args)
        finally:
            caller.close()

    return run


@_closing
def _produce(caller: Caller, tally: Tally, stop: threading.Event, rate: float) -> None:
    while not stop.is_set():
        key = secrets.token_hex(8)
        while True:  # until acknowledged: the key makes a repeat the same job
            status, _, headers = caller.send("POST", "/jobs", {"type": "email", "idempotency_key": key})
            if status in (200, 201):
                with tally.lock:
                    tally.enqueued.add(key)
                break
            if status in (400, 401, 403, 404, 409, 422):
                raise RuntimeError(f"enqueue refused: {status}")
            _pause(status, headers, stop)
        stop.wait(1 / rate)


@_closing
def _work(caller: Caller, tally: Tally, stop: threading.Event, use_ids: list[bool]) -> None:
    while not stop.is_set():
        request_id = secrets.token_hex(8)
        attempts = 0
        while True:  # a claim whose answer was lost is sent again with its request id
            body: dict[str, Any] = {"limit": 4, "wait_seconds": 1}
            if use_ids[0]:
                body["request_id"] = request_id
            status, answer, headers = caller.send("POST", "/jobs/claim", body)
            if status == 200:
                if attempts:
                    with tally.lock:
                        tally.replayed_claims += 1
                jobs = answer["jobs"]
                break
            if status in (0, 500, 502, 503, 504):
                attempts += 1
                _pause(status, headers, stop)
                if stop.is_set():
                    return
                continue
            raise RuntimeError(f"claim refused: {status} {answer}")
        for job in jobs:
            while True:  # a report whose answer was lost is sent again with its lease token
                status, answer, headers = caller.send(
                    "POST", f"/jobs/{job['id']}/complete", {"lease_token": job["lease_token"]}
                )
                if status == 200:
                    with tally.lock:
                        tally.completed.append(job["id"])
                    break
                if status in (404, 409):  # lease lost (or a repeat the server cannot tell): left to expiry
                    break
                _pause(status, headers, stop)


@_closing
def _probe(caller: Caller, stop: threading.Event, served: list[float]) -> None:
    """A cheap real request every 20 ms; the moment of each success."""
    while not stop.is_set():
        status, _, _ = caller.send("GET", "/jobs?limit=1")
        if status == 200:
            served.append(time.monotonic())
        stop.wait(0.02)


def _seed(env: dict[str, str], cwd: Path) -> dict[str, str]:
    """Migrate and seed the database with the server's own code; a producer's key and a worker's."""
    script = (
        "import json, sys\n"
        "from queuelog import create_app\n"
        "from queuelog.db import Database\n"
        "import os\n"
        "Database(os.environ['QUEUELOG_DATABASE_URL']).upgrade()\n"
        "app = create_app()\n"
        "store = app.extensions['queuelog']['admin']\n"
        "store.create_user('bench', 'producer', 'bench-password')\n"
        "print(json.dumps({'producer': store.create_key('bench-p', 'producer', username='bench'),"
        " 'worker': store.create_key('bench-w', 'worker')}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class OutageResult:
    statuses: dict[int, int]
    without_retry_after: int
    recoveries: list[float]  # seconds from the database accepting connections to a request served
    acknowledged: int
    lost: int
    duplicated: int
    completed_twice: int
    not_completed: int
    replayed_claims: int
    request_ids: bool


def run_outage(
    *,
    server_path: Path | None = None,
    producers: int = 2,
    workers: int = 4,
    rate: float = 25.0,
    down_seconds: float = 2.0,
    settle_seconds: float = 2.0,
    drain_seconds: float = 15.0,
    log: Path | None = None,
) -> OutageResult:
    """The whole scenario (about 20 s): load; stop, start; kill -9, start; drain; count."""
    folder = Path(tempfile.mkdtemp(prefix="queuelog-outage-"))
    pg = OwnPostgres(folder).init()
    root = server_path or Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "QUEUELOG_DATABASE_URL": pg.url,
        "QUEUELOG_SECRET_KEY": "outage",
        "QUEUELOG_ADMIN_PASSWORD": "outage-admin-password",
        "QUEUELOG_PASSWORD_HASH": "pbkdf2:sha256:1",
        "QUEUELOG_SCHEDULE_TICK": "0",
        "QUEUELOG_DB_CONNECT_TIMEOUT": "2",
        "QUEUELOG_DB_STATEMENT_TIMEOUT": "5",
        "PYTHONPATH": str(root),
    }
    server = None
    try:
        keys = _seed(env, root)
        port = _free_port()
        with open(log or folder / "gunicorn.log", "ab") as server_log:  # the child keeps its own copy
            server = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-w", "2", "--threads", "8", "-k", "gthread",
                 "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--graceful-timeout", "2", "app:app"],
                cwd=root, env=env, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        _wait_healthy(port, server)
        tally, served = Tally(), []
        stop, stop_work = threading.Event(), threading.Event()  # the producers and the probe; the workers
        probe_tally = Tally()
        # A server without request ids refuses the field: then the load claims without them.
        asking = Caller(port, keys["worker"], Tally())
        status, _, _ = asking.send("POST", "/jobs/claim", {"request_id": "probe"})
        asking.close()
        use_ids = [status != 422]
        threads = [
            threading.Thread(target=_produce, args=(Caller(port, keys["producer"], tally), tally, stop, rate))
            for _ in range(producers)
        ]
        threads += [
            threading.Thread(
                target=_work, args=(Caller(port, keys["worker"], tally), tally, stop_work, use_ids)
            )
            for _ in range(workers)
        ]
        threads.append(
            threading.Thread(
                target=_probe, args=(Caller(port, keys["producer"], probe_tally, 2.0), stop, served)
            )
        )
        for thread in threads:
            thread.daemon = True
            thread.start()
        recoveries = []
        time.sleep(settle_seconds)
        for outage in (pg.stop, pg.kill):
            outage()
            time.sleep(down_seconds)
            pg.start()
            accepting = time.monotonic()
            deadline = accepting + 30
            while time.monotonic() < deadline and not any(t > accepting for t in served):
                time.sleep(0.01)
            recoveries.append(min((t for t in served if t > accepting), default=float("inf")) - accepting)
            time.sleep(settle_seconds)
        # Drain: the producers stop; the workers go on until every job is finished or drain_seconds have
        # passed (a claim whose answer was lost, without a request id, holds its jobs until the lease ends).
        stop.set()
        counts = _drain(pg, tally, drain_seconds)
        stop_work.set()
        for thread in threads:
            thread.join(timeout=15)
        statuses = Counter(tally.statuses) + Counter(probe_tally.statuses)
        return OutageResult(
            statuses=dict(sorted(statuses.items())),
            without_retry_after=tally.without_retry_after + probe_tally.without_retry_after,
            recoveries=[round(r, 3) for r in recoveries],
            acknowledged=len(tally.enqueued),
            replayed_claims=tally.replayed_claims,
            request_ids=use_ids[0],
            **counts,
        )
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        pg.destroy()


def _wait_healthy(port: int, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("gunicorn exited")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.1)
    raise RuntimeError("gunicorn did not start")


def _drain(pg: OwnPostgres, tally: Tally, timeout: float) -> dict[str, int]:
    """Wait until every acknowledged job is finished (or ``timeout``), then count from the database."""
    import psycopg

    url = pg.url.replace("postgresql+psycopg://", "postgresql://")
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            left = conn.execute(
                "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')"
            ).fetchone()[0]
            if left == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        rows = conn.execute(
            "SELECT j.idempotency_key, j.status,"
            " (SELECT count(*) FROM job_events e WHERE e.job_id = j.id AND e.event = 'completed')"
            " FROM jobs j"
        ).fetchall()
    by_key = Counter(key for key, _, _ in rows)
    acknowledged = tally.enqueued
    lost = sum(1 for key in acknowledged if by_key[key] == 0)
    duplicated = sum(1 for key in acknowledged if by_key[key] > 1)
    completed_twice = sum(1 for _, _, n in rows if n > 1)
    not_completed = sum(1 for key, status, _ in rows if key in acknowledged and status != "completed")
    return {
        "lost": lost,
        "duplicated": duplicated,
        "completed_twice": completed_twice,
        "not_completed": not_completed,
    }


def print_outage(result: OutageResult, label: str) -> None:
    fives = result.statuses.get(500, 0)
    print(f"outage {label}")
    print(f"  answers by status: {result.statuses}  (0 = no answer)")
    print(
        f"  500s: {fives}   503s: {result.statuses.get(503, 0)} ({result.without_retry_after} without Retry-After)"
    )
    print(f"  serving again after the database accepted connections: {result.recoveries} s (stop, kill -9)")
    print(
        f"  acknowledged jobs: {result.acknowledged}; lost {result.lost}, duplicated {result.duplicated},"
        f" completed twice {result.completed_twice}, not completed {result.not_completed}"
    )
    print(
        f"  claims sent again: {result.replayed_claims}; request ids {'on' if result.request_ids else 'refused'}"
    )


if __name__ == "__main__":  # python -m queuelog.bench.outage [server checkout]
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    print_outage(run_outage(server_path=path), str(path or "this checkout"))
