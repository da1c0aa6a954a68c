"""The ``pickup`` scenario: how soon a waiting worker gets a job, and what waiting workers cost.

Pickup: a worker's long poll (``wait_seconds`` 20) waits on one gunicorn process; a producer enqueues
through the same process or another (a second gunicorn on the same SQLite file, or a second server on the
same PostgreSQL); the figure is the time from the enqueue's answer to the claim's answer.

Idle: 500 workers long-poll one server (gunicorn with queuelog's own settings, ``WEB_CONCURRENCY=2``) on a
PostgreSQL database of the bench's own, with nothing to do. Over a window inside their waits: the database's
transactions per second (``pg_stat_database.xact_commit``), the server's CPU, then a producer's
``GET /jobs`` latency; then, over the next window, when their waits end and each polls again, the
transactions each new long poll costs beyond the idle rate (its API key check, unless the server remembers
it), and the transactions a second over that window, re-polls and all.

``--code PATH`` runs the servers (and the database set-up) from another checkout, e.g. ``main``'s, for a
before/after comparison in one run; the client side is this file alone.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from queuelog.bench.targets import progress

ROOT = Path(__file__).resolve().parents[2]
_SETUP = """
import json, sys
from queuelog.db import Database
from queuelog.queue import Queue
from queuelog.queue.admin import AdminStore
db = Database(sys.argv[1])
db.upgrade()
Queue(db).types.seed("bench")
store = AdminStore(db)
store.create_user("bench", "admin", "bench-password")
keys = {"producer": store.create_key("bench-producer", "producer", username="bench")}
keys["workers"] = [store.create_key(f"bench-worker-{i}", "worker") for i in range(int(sys.argv[2]))]
db.dispose()
print(json.dumps(keys))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _setup(code: Path, url: str, workers: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run(
        [sys.executable, "-c", _SETUP, url, str(workers)], cwd=code, env=env, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"set-up failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class Server:
    """gunicorn with queuelog's own settings (``-c python:queuelog.gunicorn_conf``) from ``code``."""

    def __init__(self, code: Path, url: str, log: Path, *, workers: int, env: dict[str, str] | None = None):
        self.port = _free_port()
        full = {
            **os.environ,
            "PYTHONPATH": str(code),
            "QUEUELOG_DATABASE_URL": url,
            "QUEUELOG_SECRET_KEY": "bench",
            "QUEUELOG_BIND": f"127.0.0.1:{self.port}",
            "WEB_CONCURRENCY": str(workers),
            **(env or {}),
        }
        self.log_file = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:queuelog.gunicorn_conf",
                "--log-level",
                "warning",
                "queuelog:create_app()",
            ],  # fmt: skip
            cwd=code,
            env=full,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)

    def cpu_seconds(self) -> float:
        try:
            text_ = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return 0.0
        total = 0
        for pid in text_.split():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()


GET_TIMEOUT = 20.0  # idle: how long a producer's GET /jobs may take before it counts as unanswered


def _request(conn: http.client.HTTPConnection, method: str, path: str, key: str, body: Any = None):
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    response = conn.getresponse()
    data = response.read()
    return response.status, response.headers, data


def _pickups(
    claim_port: int, enqueue_port: int, keys: dict[str, Any], samples: int
) -> tuple[list[float], list[float]]:
    """Seconds from each enqueue's answer (and from its request) to the waiting claim's answer."""
    worker = http.client.HTTPConnection("127.0.0.1", claim_port, timeout=60)
    producer = http.client.HTTPConnection("127.0.0.1", enqueue_port, timeout=60)
    key = keys["workers"][0]
    _request(worker, "POST", "/jobs/claim", key, {"wait_seconds": 0.2})  # the process starts its wake-ups
    _request(producer, "GET", "/healthz", keys["producer"])
    after_answer: list[float] = []
    after_request: list[float] = []
    for i in range(samples + 3):
        answered: list[float] = []

        def claim(answered: list[float] = answered) -> None:
            status, _, _ = _request(
                worker, "POST", "/jobs/claim", key, {"wait_seconds": 20, "types": ["bench"]}
            )
            answered.append(time.perf_counter())
            assert status == 200, status

        thread = threading.Thread(target=claim)
        thread.start()
        time.sleep(random.uniform(0.03, 0.08))  # the long poll is waiting by now
        sent = time.perf_counter()
        status, _, _ = _request(producer, "POST", "/jobs", keys["producer"], {"type": "bench"})
        enqueued = time.perf_counter()
        assert status == 201, status
        thread.join(30)
        if i >= 3:  # the first few warm the connections and caches
            # The claim may answer before the enqueue's own answer is read: 0 then.
            after_answer.append(max(0.0, answered[0] - enqueued))
            after_request.append(answered[0] - sent)
        progress("pickup", i + 1, samples + 3)
    worker.close()
    producer.close()
    return after_answer, after_request


def _figures(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p90_ms": ordered[int(len(ordered) * 0.9) - 1] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def _pg_database(postgres_url: str) -> tuple[str, str]:
    """A database of the bench's own (its transaction counts are ours alone): (its URL, its name)."""
    name = f"queuelog_bench_{os.getpid()}_{secrets.token_hex(3)}"
    with create_engine(postgres_url, isolation_level="AUTOCOMMIT").connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    return make_url(postgres_url).set(database=name).render_as_string(hide_password=False), name


def _drop_database(postgres_url: str, name: str) -> None:
    with create_engine(postgres_url, isolation_level="AUTOCOMMIT").connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _commits(postgres_url: str, name: str) -> int:
    with create_engine(postgres_url).connect() as conn:
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        return int(
            conn.execute(
                text("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = :n"),
                {"n": name},
            ).scalar_one()
        )


def scenario_pickup(
    folder: Path, code: Path, postgres_url: str | None, *, samples: int, sqlite: bool = True
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    setups: list[tuple[str, str, bool]] = []
    if sqlite:
        setups += [("sqlite", "one process", False), ("sqlite", "two gunicorn processes", True)]
    if postgres_url:
        setups += [("postgresql", "one process", False), ("postgresql", "two servers", True)]
    for engine, label, two in setups:
        dropped: str | None = None
        if engine == "sqlite":
            url = f"sqlite:///{folder / f'pickup-{len(rows)}.sqlite3'}"
        else:
            assert postgres_url is not None
            url, dropped = _pg_database(postgres_url)
        servers: list[Server] = []
        try:
            keys = _setup(code, url, 1)
            servers.append(Server(code, url, folder / f"pickup-{len(rows)}-a.log", workers=1))
            if two:
                servers.append(Server(code, url, folder / f"pickup-{len(rows)}-b.log", workers=1))
            seconds, from_request = _pickups(servers[0].port, servers[-1].port, keys, samples)
            sent = {f"from_request_{name}": value for name, value in _figures(from_request).items()}
            rows.append(
                {"scenario": "pickup", "engine": engine, "operation": label, **_figures(seconds), **sent}
            )
        finally:
            for server in servers:
                server.stop()
            if dropped and postgres_url:
                _drop_database(postgres_url, dropped)
    return rows


def scenario_idle(
    folder: Path, code: Path, postgres_url: str, *, waiting: int = 500, window: float = 6.0
) -> dict[str, Any]:
    """``waiting`` workers long-poll one server with nothing to do."""
    url, name = _pg_database(postgres_url)
    server: Server | None = None
    stop = threading.Event()
    try:
        keys = _setup(code, url, 1)
        server = Server(code, url, folder / "idle.log", workers=2)
        port = server.port
        answers = {"retry_after": 0, "errors": 0, "requests": 0}
        counting = threading.Lock()

        def work(key: str) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=90)
            while not stop.is_set():
                with counting:
                    answers["requests"] += 1
                try:
                    status, headers, _ = _request(
                        conn, "POST", "/jobs/claim", key, {"wait_seconds": 20, "types": ["bench"]}
                    )
                except OSError:
                    answers["errors"] += 1
                    conn.close()
                    stop.wait(1)
                    continue
                if status >= 500:
                    answers["errors"] += 1
                if headers.get("Retry-After"):
                    answers["retry_after"] += 1
                    stop.wait(float(headers["Retry-After"]))
            conn.close()

        time.sleep(2)
        # The same window with nobody waiting: what the server and the database do anyway (the maintenance
        # thread's schedule tick, autovacuum of the new database).
        base_commits, base_cpu, at = _commits(postgres_url, name), server.cpu_seconds(), time.monotonic()
        time.sleep(window)
        base_elapsed = time.monotonic() - at
        base_commits = _commits(postgres_url, name) - base_commits
        base_cpu = server.cpu_seconds() - base_cpu
        threads = [
            threading.Thread(target=work, args=(keys["workers"][0],), daemon=True) for _ in range(waiting)
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        # Their first claims (each with its key check) take a few seconds to get through; then the producer's
        # GET /jobs beside them, and then, until just before their 20 s are up, what waiting costs.
        time.sleep(max(0.0, started + 6 - time.monotonic()))
        latencies = []
        for _ in range(10):
            producer = http.client.HTTPConnection("127.0.0.1", port, timeout=GET_TIMEOUT)
            begun = time.perf_counter()
            try:
                status, _, _ = _request(producer, "GET", "/jobs?limit=20", keys["producer"])
            except OSError:
                status = 0
            finally:
                producer.close()
            latencies.append(time.perf_counter() - begun if status == 200 else float("inf"))
            if status != 200:
                break  # no answer within GET_TIMEOUT: the figure is "more than that"
            time.sleep(0.2)
        time.sleep(max(0.0, started + 19 - window - time.monotonic()))
        commits, cpu, at = _commits(postgres_url, name), server.cpu_seconds(), time.monotonic()
        polled = answers["requests"]
        time.sleep(window)  # (after a GET that went unanswered, this runs past their 20 s: they poll again)
        elapsed = time.monotonic() - at
        commits = _commits(postgres_url, name) - commits
        polled = answers["requests"] - polled  # claims sent inside the window (late first ones): 0 ideally
        cpu = server.cpu_seconds() - cpu
        # Then their waits end and each polls again: what a new long poll costs (its key check).
        sent, again, at = answers["requests"], _commits(postgres_url, name), time.monotonic()
        time.sleep(max(0.0, started + 32 - time.monotonic()))
        again_elapsed = time.monotonic() - at
        again = _commits(postgres_url, name) - again
        sent = answers["requests"] - sent
        ordered = sorted(latencies)
        return {
            "scenario": "idle",
            "engine": "postgresql",
            "operation": f"{waiting} waiting workers",
            "transactions_per_s": commits / elapsed,
            "server_cpu_percent": cpu / elapsed * 100,
            "nobody_waiting_transactions_per_s": base_commits / base_elapsed,
            "nobody_waiting_cpu_percent": base_cpu / base_elapsed * 100,
            "get_jobs_p50_ms": statistics.median(ordered) * 1000,
            "get_jobs_max_ms": ordered[-1] * 1000,
            "claims_in_window": polled,
            "repolls_per_s": sent / again_elapsed,
            "transactions_per_repoll": (again - commits / elapsed * again_elapsed) / max(sent, 1),
            "repoll_window_transactions_per_s": again / again_elapsed,
            "retry_after_answers": answers["retry_after"],
            "errors": answers["errors"],
        }
    finally:
        stop.set()
        if server is not None:
            server.stop()
        _drop_database(postgres_url, name)
