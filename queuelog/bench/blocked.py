"""What jobs that must wait cost the claim (docs/flow-control.md): claim latency with a type held back by
its limits and none of its jobs pending, next to the same with ``blocked`` of its jobs pending ahead of
every other job in claim order, and the latency of another producer's enqueues meanwhile.

Two ways of holding a type back: its concurrency limit of 1 taken by a running job, or a rate limit whose
bucket is empty (1 a day, no tokens left). The two databases (without and with the blocked jobs) are
claimed from in turn, one claim each per round, so that both see the same machine. The claims take jobs of
another type (``bench``) one at a time, each completed before the next claim (not timed). Then the claims
run again while on each database a producer, a process of its own, enqueues a job of a third type every
2 ms: its enqueues' latency is the second figure. Each row prints the figure without the blocked jobs, the
figure with them, and the ratio blocked / none; claims also the CPU time this process spent in them (on
SQLite the claim's own work).
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from datetime import timedelta
from typing import Any

from queuelog.bench.core import WORKER
from queuelog.bench.targets import Target, progress
from queuelog.models import utcnow
from queuelog.queue import JobSpec

HELD, OTHER = "held", "other"  # the type held back; the producer's type


def _percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times) * 1000, times[max(0, int(len(times) * 0.99) - 1)] * 1000


def _fill(target: Target, url: str, claimable: int, blocked: int) -> None:
    """``claimable`` pending ``bench`` jobs at priority 0; ``blocked`` pending jobs of HELD at priority 10,
    ahead of them in claim order; one running HELD job with a lease that outlives the run. Straight
    through the driver, in big transactions: this measures the claim, not the fill."""
    conn = target.raw_connect(url)
    cur = conn.cursor()
    sql = target.sql
    now = sql.bind_time(utcnow() - timedelta(seconds=1))
    far = sql.bind_time(utcnow() + timedelta(days=1))
    columns = (
        "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner, available_at,"
        " created_at, updated_at, worker_id, lease_token, claimed_at, lease_expires_at)"
    )
    if target.engine == "postgresql":
        rows = (
            f"{columns} SELECT %(type)s, '{{}}'::jsonb, %(priority)s, %(status)s, 0, 3, 'bench', %(now)s, %(now)s,"
            " %(now)s, %(worker)s, %(token)s, %(claimed)s, %(expires)s FROM generate_series(1, %(count)s)"
        )
        for kind, priority, status, count in (
            (HELD, 10, "running", 1),
            (HELD, 10, "pending", blocked),
            ("bench", 0, "pending", claimable),
        ):
            running = status == "running"
            cur.execute(
                rows,
                {
                    "type": kind,
                    "priority": priority,
                    "status": status,
                    "now": now,
                    "count": count,
                    "worker": "holder" if running else None,
                    "token": "h" * 32 if running else None,
                    "claimed": now if running else None,
                    "expires": far if running else None,
                },
            )
            conn.commit()
        conn.autocommit = True
        cur.execute("VACUUM ANALYZE jobs")
    else:
        row = f"{columns} VALUES (?, '{{}}', ?, ?, 0, 3, 'bench', ?, ?, ?, ?, ?, ?, ?)"
        cur.execute("BEGIN")
        cur.execute(row, (HELD, 10, "running", now, now, now, "holder", "h" * 32, now, far))
        cur.executemany(
            row, ((HELD, 10, "pending", now, now, now, None, None, None, None) for _ in range(blocked))
        )
        cur.executemany(
            row, (("bench", 0, "pending", now, now, now, None, None, None, None) for _ in range(claimable))
        )
        cur.execute("COMMIT")
    conn.close()


def _produce(target: Target, url: str, stop: Any, ready: Any, answer: Any) -> None:
    """The other producer (a child process): enqueue every 2 ms until told to stop, saying when the first
    is done (the claims start then, so that a short run on a slow machine still measures some); answer
    the latencies."""
    queue = target.queue(url)
    spec = JobSpec(type=OTHER, payload={"n": 0}, payload_json='{"n":0}', priority=-10)
    times: list[float] = []
    while not times or not stop.is_set():
        start = time.perf_counter()
        queue.enqueue("producer", spec)
        times.append(time.perf_counter() - start)
        ready.set()
        time.sleep(0.002)
    queue.db.dispose()
    answer.send(times)


def _hold(target: Target, url: str, how: str) -> None:
    queue = target.queue(url)
    queue.types.add(HELD)
    queue.types.add(OTHER)
    if how == "concurrency":
        queue.types.update(HELD, concurrency_limit=1)
    else:  # a rate limit of 1 a day, its bucket spent just now
        queue.types.update(HELD, rate_limit=1, rate_period=86_400)
        queue.engine.update_job_type(HELD, {"rate_tokens": 0.0, "rate_checked_at": utcnow()})
    queue.db.dispose()


def _claims(
    queues: dict[str, Any], claims: int, label: str
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Claim on each database in turn, one claim each per round (in alternating order), so that both
    see the same machine: on a shared machine the load drifts within seconds. Wall and CPU times."""
    times: dict[str, list[float]] = {name: [] for name in queues}
    cpu: dict[str, list[float]] = {name: [] for name in queues}
    names = list(queues)
    for i in range(claims):
        for name in names if i % 2 else reversed(names):
            queue = queues[name]
            start, start_cpu = time.perf_counter(), time.thread_time()
            jobs = queue.claim(WORKER)
            cpu[name].append(time.thread_time() - start_cpu)
            times[name].append(time.perf_counter() - start)
            assert jobs and jobs[0].type == "bench", f"claimed {jobs}"
            queue.complete(jobs[0].id, WORKER, jobs[0].lease_token, None)
        progress(label, i + 1, claims)
    return times, cpu


def _measure(target: Target, urls: dict[str, str], claims: int) -> dict[str, dict[str, float]]:
    """First the claims alone; then the claims again while a producer enqueues on each database."""
    queues = {label: target.queue(url) for label, url in urls.items()}
    for queue in queues.values():
        queue.claim(WORKER)  # one untimed claim: connections and statements warm
    times, cpu = _claims(queues, claims, "blocked: claims")
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    pipes, producers, readies = {}, [], []
    for label, url in urls.items():
        mine, theirs = context.Pipe()
        pipes[label] = mine
        readies.append(context.Event())
        producers.append(context.Process(target=_produce, args=(target, url, stop, readies[-1], theirs)))
    for producer in producers:
        producer.start()
    for ready in readies:
        ready.wait(timeout=60)
    try:
        _claims(queues, claims, "blocked: claims beside a producer")
    finally:
        stop.set()
        enqueues = {label: pipe.recv() for label, pipe in pipes.items()}
        for producer in producers:
            producer.join()
        for queue in queues.values():
            queue.db.dispose()
    out = {}
    for label in urls:
        claim_p50, claim_p99 = _percentiles(times[label])
        enqueue_p50, enqueue_p99 = _percentiles(enqueues[label])
        out[label] = {
            "claim_p50": claim_p50,
            "claim_p99": claim_p99,
            "claim_cpu_p50": statistics.median(cpu[label]) * 1000,
            "enqueue_p50": enqueue_p50,
            "enqueue_p99": enqueue_p99,
        }
    return out


def scenario_blocked(target: Target, claims: int, blocked: int) -> list[dict[str, Any]]:
    out = []
    for how in ("concurrency", "rate"):
        urls = {}
        for label, count in (("none", 0), ("blocked", blocked)):
            urls[label] = target.fresh(f"blocked-{how}-{label}")
            _fill(target, urls[label], 2 * claims + 1, count)
            _hold(target, urls[label], how)
        figures = _measure(target, urls, claims)
        held = "concurrency limit 1 taken" if how == "concurrency" else "rate limit, no tokens"
        for key, what in (("claim", "claim"), ("enqueue", "other producer's enqueue")):
            none, full = figures["none"], figures["blocked"]
            row = {
                "scenario": "blocked",
                "engine": target.engine,
                "operation": f"{what}, {held}",
                "blocked": blocked,
                "none_p50_ms": none[f"{key}_p50"],
                "blocked_p50_ms": full[f"{key}_p50"],
                "ratio": full[f"{key}_p50"] / none[f"{key}_p50"],
                "none_p99_ms": none[f"{key}_p99"],
                "blocked_p99_ms": full[f"{key}_p99"],
            }
            if key == "claim":  # this process's CPU time: on SQLite the claim's own work, without waits
                row["none_cpu_p50_ms"], row["blocked_cpu_p50_ms"] = (
                    none["claim_cpu_p50"],
                    full["claim_cpu_p50"],
                )
            out.append(row)
    return out
