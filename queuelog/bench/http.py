"""The ``http`` scenario: queuelog under gunicorn, driven by client processes over keep-alive connections.

Worker traffic runs twice: with the default answers (whole jobs), and with ``Prefer: return=minimal``, the
compact answers queuelog-worker asks for (the rows marked "minimal"). One job at a time and batches run
once more as queuelog-worker runs them: each completion claims the next job(s) in its own request.
Beside it, the same gunicorn settings serving a do-nothing Flask endpoint: the ceiling of the web stack
on this machine, so that queuelog's figures can be read as a fraction of it. The ceiling is measured
before each of queuelog's rows and after the last, and its median run is the one each row is divided by.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from queuelog.bench.targets import Target, progress
from queuelog.db import Database
from queuelog.gunicorn_worker import WORKER_CLASS  # for both apps: the ceiling is the same stack idle
from queuelog.queue.admin import AdminStore


def connections_by_process(port: int, pids: list[int]) -> dict[int, int]:
    """How many established TCP connections to ``port`` (on this machine) each of ``pids`` holds, read
    from Linux's /proc; empty elsewhere."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            return {}
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # 01: ESTABLISHED
                inodes.add(f"socket:[{fields[9]}]")
    counts = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        held = 0
        for fd in fds:
            try:
                held += os.readlink(f"/proc/{pid}/fd/{fd}") in inodes
            except OSError:
                pass  # closed meanwhile
        counts[pid] = held
    return counts


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """gunicorn in a subprocess; samples the resident memory of its worker processes while it runs."""

    def __init__(
        self,
        app: str,
        env: dict[str, str],
        workers: int,
        threads: int,
        log: Path,
        worker_class: str = WORKER_CLASS,
    ):
        self.port = _free_port()
        self.log = log
        args = [
            sys.executable,
            "-m",
            "gunicorn",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--worker-class",
            worker_class,
            "--bind",
            f"127.0.0.1:{self.port}",
            "--keep-alive",
            "30",
            "--log-level",
            "warning",
            app,
        ]
        self.log_file = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            args, env={**os.environ, **env}, stdout=self.log_file, stderr=subprocess.STDOUT
        )
        self.max_rss_mb = 0.0
        self._sampling = True
        self._wait_ready()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {self.log.read_text()[-2000:]}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                conn.request("GET", "/healthz")
                if conn.getresponse().status in (200, 404):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("gunicorn did not start")

    def children(self) -> list[int]:
        try:
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split()]

    def _sample(self) -> None:
        while self._sampling:
            for pid in self.children():
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            self.max_rss_mb = max(self.max_rss_mb, int(line.split()[1]) / 1024)
                except OSError:
                    pass
            time.sleep(0.2)

    def cpu_seconds(self) -> float:
        """CPU time (user and system) its worker processes have used so far: on a shared machine this
        moves far less than requests per second when other work competes for the cores."""
        total = 0
        for pid in self.children():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime and stime, in clock ticks
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self._sampling = False
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()


# -- client processes ---------------------------------------------------------------------------------


MINIMAL = "+minimal"  # a phase name ending so sends "Prefer: return=minimal", as queuelog-worker does


def _client(task: tuple[int, str, str, int, int]) -> tuple[int, list[float], int, list[int]]:
    """Runs in a client process: one keep-alive connection; returns (jobs handled, latencies, errors,
    the ids of the jobs it completed)."""
    port, key, phase, count, batch = task
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    if phase.endswith(MINIMAL):
        phase = phase.removesuffix(MINIMAL)
        headers["Prefer"] = "return=minimal"
    latencies: list[float] = []
    errors = 0

    def post(path: str, body: Any = None) -> tuple[int, Any]:
        nonlocal errors
        start = time.perf_counter()
        conn.request("POST", path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = conn.getresponse()
        data = response.read()
        latencies.append(time.perf_counter() - start)
        if response.status >= 500:
            errors += 1
        return response.status, (json.loads(data) if data else None)

    handled = 0
    done: list[int] = []
    if phase == "noop":
        for _ in range(count):
            post("/noop", {"type": "bench"})
            handled += 1
    elif phase == "enqueue":
        for i in range(count):
            status, _ = post("/jobs", {"type": "bench", "payload": {"n": i}})
            handled += status == 201
    elif phase == "claim_complete":
        while True:
            status, job = post("/jobs/claim")
            if status != 200:
                break
            status, _ = post(f"/jobs/{job['id']}/complete", {"lease_token": job["lease_token"]})
            handled += status == 200
            done += [job["id"]] if status == 200 else []
    elif phase == "complete_next":  # one job at a time: a claim, then each completion claims the next
        status, body = post("/jobs/claim", {"limit": 1})
        jobs = body["jobs"] if status == 200 else []
        while jobs:
            job = jobs[0]
            report = {"lease_token": job["lease_token"], "next": {"limit": 1}}
            status, body = post(f"/jobs/{job['id']}/complete", report)
            handled += status == 200
            done += [job["id"]] if status == 200 else []
            jobs = body["next"]["jobs"] if status == 200 else []
    elif phase == "batch":
        while True:
            status, body = post("/jobs/claim", {"limit": batch})
            if status != 200 or not body["jobs"]:
                break
            items = [{"id": j["id"], "lease_token": j["lease_token"]} for j in body["jobs"]]
            status, body = post("/jobs/complete", {"jobs": items})
            handled += sum(r["status"] == 200 for r in body["results"])
            done += [r["id"] for r in body["results"] if r["status"] == 200]
    elif phase == "batch_next":  # a batch claim, then each batch completion claims the next batch
        status, body = post("/jobs/claim", {"limit": batch})
        jobs = body["jobs"] if status == 200 else []
        while jobs:
            items = [{"id": j["id"], "lease_token": j["lease_token"]} for j in jobs]
            status, body = post("/jobs/complete", {"jobs": items, "next": {"limit": batch}})
            handled += sum(r["status"] == 200 for r in body["results"])
            done += [r["id"] for r in body["results"] if r["status"] == 200]
            jobs = body["next"]["jobs"]
    conn.close()
    return handled, latencies, errors, done


def _run_phase(
    pool, server: Server, keys: list[str], phase: str, total: int, batch: int = 100
) -> dict[str, Any]:
    per_client = total // len(keys)
    tasks = [(server.port, key, phase, per_client, batch) for key in keys]
    cpu = server.cpu_seconds()
    ticks = _cpu_ticks()
    start = time.perf_counter()
    pending = pool.map_async(_client, tasks)
    # How the clients' connections sit on the server's processes: a process runs one thread at a time,
    # so one that holds more of them than the others may leave a core idle (docs/performance.md).
    split: list[int] = []
    while not pending.ready() and sum(split) < len(keys):
        split = sorted(connections_by_process(server.port, server.children()).values(), reverse=True)
        time.sleep(0.005)
    results = pending.get()
    elapsed = time.perf_counter() - start
    cpu = server.cpu_seconds() - cpu
    idle = _idle_share(ticks, _cpu_ticks())
    handled = sum(r[0] for r in results)
    latencies = sorted(x for r in results for x in r[1])
    done = [job_id for r in results for job_id in r[3]]
    return {
        "jobs": handled,
        "duplicates": len(done) - len(set(done)),  # jobs completed more than once: must stay 0
        "requests": len(latencies),
        "requests_per_s": len(latencies) / elapsed,
        "jobs_per_s": handled / elapsed,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else 0.0,
        "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000 if latencies else 0.0,
        "errors_5xx": sum(r[2] for r in results),
        "server_cpu_us_per_request": cpu / max(len(latencies), 1) * 1e6,
        # How much of the machine nobody used meanwhile: near 0 while the cores are the limit; a row well
        # above the do-nothing row's waits on something else, on SQLite the one writer at a time.
        "idle_pct": idle,
        "connections_by_process": "/".join(map(str, split)) if sum(split) == len(keys) else None,
    }


def _cpu_ticks() -> list[int] | None:
    """The machine's CPU time by kind (Linux's /proc/stat, in ticks); None elsewhere."""
    try:
        with open("/proc/stat") as stat:
            return [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def _idle_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the machine's CPU time between two readings that was idle (or waiting on a disk)."""
    if before is None or after is None:
        return None
    spent = [b - a for a, b in zip(before, after, strict=True)][:8]  # guest time is counted in user time
    return 100.0 * (spent[3] + spent[4]) / max(sum(spent), 1)


def scenario_http(
    target: Target,
    n: int,
    *,
    clients: int = 4,
    workers: int = 2,
    threads: int = 4,
    batch: int = 100,
    worker_class: str = WORKER_CLASS,
) -> list[dict[str, Any]]:
    url = target.fresh("http")
    db = Database(url)
    store = AdminStore(db)
    store.create_user("bench", "admin", "bench-password")
    producer_keys = [
        store.create_key(f"bench-producer-{i}", "producer", username="bench") for i in range(clients)
    ]
    worker_keys = [store.create_key(f"bench-worker-{i}", "worker") for i in range(clients)]
    db.dispose()
    env = {"QUEUELOG_DATABASE_URL": url, "QUEUELOG_SECRET_KEY": "bench", "QUEUELOG_RETRY_BACKOFF_BASE": "0"}
    rows: list[dict[str, Any]] = []
    # The do-nothing endpoint, measured before each of queuelog's rows and after the last.
    ceilings: list[dict[str, Any]] = []
    context = multiprocessing.get_context("spawn")
    with context.Pool(clients) as pool:
        pool.map(time.sleep, [0] * clients)  # start the client processes before timing anything
        noop = Server(
            "queuelog.bench.noop:app", env, workers, threads, target.folder / "noop.log", worker_class
        )
        server: Server | None = None
        try:
            _run_phase(pool, noop, producer_keys, "noop", max(clients, n // 5))  # warm-up, not counted
            server = Server(
                "queuelog:create_app()", env, workers, threads, target.folder / "queuelog.log", worker_class
            )
            _run_phase(pool, server, producer_keys, "enqueue", max(clients, n // 5))  # warm-up

            def measure(label: str, keys: list[str], phase: str, refill: bool = False) -> None:
                assert server is not None
                if refill:
                    _enqueue_batches(server.port, producer_keys[0], n)
                ceilings.append(_run_phase(pool, noop, producer_keys, "noop", n))
                progress(f"http: {label}", 0, 1)
                rows.append({"operation": label, **_run_phase(pool, server, keys, phase, n, batch)})
                progress(f"http: {label}", 1, 1)

            measure("enqueue", producer_keys, "enqueue")
            measure("claim+complete, 1 job per claim", worker_keys, "claim_complete")
            measure("claim+complete, 1 job per claim, minimal", worker_keys, "claim_complete" + MINIMAL, True)
            measure(
                "claim, then complete-and-claim-next, 1 job at a time, minimal",
                worker_keys,
                "complete_next" + MINIMAL,
                True,
            )
            for suffix, label in (("", ""), (MINIMAL, ", minimal")):
                measure(f"batch claim {batch} + batch complete{label}", worker_keys, "batch" + suffix, True)
            measure(
                f"batch claim {batch}, then complete-and-claim-next, minimal",
                worker_keys,
                "batch_next" + MINIMAL,
                True,
            )
            ceilings.append(_run_phase(pool, noop, producer_keys, "noop", n))
        finally:
            noop.stop()
            if server is not None:
                server.stop()
    # The ceiling row is the do-nothing run of median speed (of an even count, the faster of the middle
    # two); each row's jobs per ceiling request divide by it. One run can land on a busy second of a shared
    # machine (runs of one hour differed by 2x): the median of eight runs spread through the scenario cannot.
    by_speed = sorted(ceilings, key=lambda run: run["requests_per_s"])
    ceiling_row = {
        "operation": "do-nothing POST (stack ceiling)",
        **by_speed[len(by_speed) // 2],
        "errors_5xx": sum(run["errors_5xx"] for run in ceilings),  # of every run, not the median's only
        "ceiling_runs_per_s": [run["requests_per_s"] for run in ceilings],
    }
    rows.insert(0, ceiling_row)
    ceiling = ceiling_row["requests_per_s"]
    for row in rows:
        row.update(scenario="http", engine=target.engine, workers=workers, threads=threads, clients=clients)
        # What a ceiling request buys: jobs (requests for the do-nothing row and enqueues, one job each),
        # measured in the same run, so that a loaded machine's slowness cancels out.
        row["per_ceiling_request"] = (row["jobs_per_s"] or row["requests_per_s"]) / ceiling
    assert server is not None
    rows[-1]["server_max_rss_mb"] = server.max_rss_mb
    return rows


def _enqueue_batches(port: int, key: str, n: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    for first in range(0, n, 500):
        body = {"jobs": [{"type": "bench", "payload": {"n": i}} for i in range(first, min(n, first + 500))]}
        conn.request("POST", "/jobs/batch", body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        response.read()
        assert response.status == 201, response.status
    conn.close()
