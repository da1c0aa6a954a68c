"""``queuelog-bench``: how fast the queue layer is next to the raw driver, on this machine.

Scenarios (each on a fresh SQLite file in a temporary folder):

- ``core``: enqueue and claim+complete through the queue layer, one job per transaction, next to a raw
  ``sqlite3`` loop running the very same SQL statements in the same run; prints jobs/s and the ratio.
- ``backlog``: claim latency (p50/p99) with 1,000 and with N pending jobs (default 1,000,000), and with
  as many finished jobs beside them.

Figures are for comparing within one run: the machine is shared, so absolute numbers drift.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from queuelog.db import Database
from queuelog.models import utcnow
from queuelog.queue import JobSpec, Queue
from queuelog.queue.core import statements
from queuelog.queue.dialects import SQLiteDialect

WORKER = "bench-worker"


def _fresh_queue(folder: Path, name: str) -> Queue:
    db = Database(f"sqlite:///{folder / name}")
    db.upgrade()
    queue = Queue(db, backoff_base=0)
    queue.types.seed("bench")
    return queue


def _spec(i: int) -> JobSpec:
    payload = {"n": i, "to": "someone@example.com"}
    return JobSpec(type="bench", payload=payload, payload_json=json.dumps(payload, separators=(",", ":")))


def _progress(label: str, done: int, total: int) -> None:
    if sys.stderr.isatty():
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{label:<28} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


# -- core ---------------------------------------------------------------------------------------------


def bench_queue_layer(folder: Path, n: int) -> dict[str, float]:
    queue = _fresh_queue(folder, "layer.sqlite3")
    specs = [_spec(i) for i in range(n)]
    start = time.perf_counter()
    for i, spec in enumerate(specs):
        queue.enqueue("bench", spec)
        if i % 500 == 0:
            _progress("queue layer: enqueue", i, n)
    enqueue = time.perf_counter() - start
    _progress("queue layer: enqueue", n, n)
    start = time.perf_counter()
    done = 0
    while True:
        jobs = queue.claim(WORKER)
        if not jobs:
            break
        queue.complete(jobs[0]["id"], WORKER, jobs[0]["lease_token"], None)
        done += 1
        if done % 500 == 0:
            _progress("queue layer: claim+complete", done, n)
    cycle = time.perf_counter() - start
    _progress("queue layer: claim+complete", n, n)
    assert done == n, f"completed {done} of {n}"
    queue.db.dispose()
    return {"enqueue": _rate(n, enqueue), "claim_complete": _rate(n, cycle)}


def bench_raw_sqlite(folder: Path, n: int) -> dict[str, float]:
    """The same statements as the queue layer, through sqlite3 directly: the floor to compare with."""
    queue = _fresh_queue(folder, "raw.sqlite3")  # same schema, same pragmas
    path = queue.db.url.database
    queue.db.dispose()
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("busy_timeout = 30000", "journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON"):
        conn.execute(f"PRAGMA {pragma}")
    sql = statements(SQLiteDialect)
    insert, event = sql["insert"], sql["event"]
    claim, complete = SQLiteDialect.CLAIM[False], sql["complete"]
    time_text = SQLiteDialect.time
    specs = [_spec(i) for i in range(n)]
    start = time.perf_counter()
    for spec in specs:
        now = time_text(utcnow())
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            insert,
            {
                "type": spec.type,
                "payload": spec.payload_json,
                "priority": 0,
                "max_retries": 3,
                "key": None,
                "fingerprint": None,
                "owner": "bench",
                "available_at": now,
                "now": now,
            },
        ).fetchone()
        conn.execute(
            event,
            {"job_id": row[0], "at": now, "event": "enqueued", "actor": "bench", "attempt": 0, "error": None},
        )
        conn.execute("COMMIT")
    enqueue = time.perf_counter() - start
    start = time.perf_counter()
    done = 0
    while True:
        moment = utcnow()
        now = time_text(moment)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql["expire"], {"now": now, "error": "lease expired"}).fetchall()
        rows = conn.execute(
            claim,
            {
                "now": now,
                "limit": 1,
                "true": True,
                "worker": WORKER,
                "token": "t" * 32,
                "expires": time_text(moment + timedelta(seconds=300)),
            },
        ).fetchall()
        if not rows:
            conn.execute("COMMIT")
            break
        conn.execute(
            event,
            {
                "job_id": rows[0][0],
                "at": now,
                "event": "claimed",
                "actor": WORKER,
                "attempt": 1,
                "error": None,
            },
        )
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            complete, {"id": rows[0][0], "worker": WORKER, "token": "t" * 32, "now": now, "result": None}
        ).fetchone()
        conn.execute(
            event,
            {
                "job_id": rows[0][0],
                "at": now,
                "event": "completed",
                "actor": WORKER,
                "attempt": 1,
                "error": None,
            },
        )
        conn.execute("COMMIT")
        done += 1
    cycle = time.perf_counter() - start
    assert done == n
    conn.close()
    return {"enqueue": _rate(n, enqueue), "claim_complete": _rate(n, cycle)}


def scenario_core(folder: Path, n: int) -> list[dict[str, Any]]:
    layer = bench_queue_layer(folder, n)
    raw = bench_raw_sqlite(folder, n)
    return [
        {
            "scenario": "core",
            "engine": "sqlite",
            "operation": op,
            "queuelog_per_s": layer[op],
            "raw_per_s": raw[op],
            "ratio": layer[op] / raw[op],
        }
        for op in ("enqueue", "claim_complete")
    ]


# -- backlog ------------------------------------------------------------------------------------------


def _fill(queue: Queue, pending: int, finished: int) -> None:
    """Insert rows directly, in big transactions: this measures the claim, not the fill."""
    path = queue.db.url.database
    queue.db.dispose()
    conn = sqlite3.connect(path, isolation_level=None)
    now = SQLiteDialect.time(utcnow() - timedelta(seconds=1))
    sql = (
        "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner, available_at,"
        " created_at, updated_at, finished_at) VALUES ('bench', '{}', ?, ?, 0, 3, 'bench', ?, ?, ?, ?)"
    )
    for status, count in (("completed", finished), ("pending", pending)):
        batch = 50_000
        for first in range(0, count, batch):
            conn.execute("BEGIN")
            conn.executemany(
                sql,
                (
                    (i % 4 * 10, status, now, now, now, now if status == "completed" else None)
                    for i in range(first, min(count, first + batch))
                ),
            )
            conn.execute("COMMIT")
            _progress(f"backlog: {status} rows", min(count, first + batch), count)
    conn.execute("PRAGMA optimize")
    conn.close()


def _claim_latency(queue: Queue, samples: int) -> dict[str, float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        jobs = queue.claim(WORKER)
        times.append(time.perf_counter() - start)
        assert jobs, "backlog ran dry"
    times.sort()
    return {"p50_ms": statistics.median(times) * 1000, "p99_ms": times[int(len(times) * 0.99) - 1] * 1000}


def scenario_backlog(folder: Path, big: int, samples: int = 500) -> list[dict[str, Any]]:
    out = []
    for label, pending, finished in (
        ("1k pending", 1000, 0),
        (f"{big} pending", big, 0),
        (f"1k pending + {big} finished", 1000, big),
    ):
        queue = _fresh_queue(folder, f"backlog-{pending}-{finished}.sqlite3")
        _fill(queue, pending, finished)
        queue = Queue(Database(f"sqlite:///{queue.db.url.database}"), backoff_base=0)
        out.append(
            {
                "scenario": "backlog",
                "engine": "sqlite",
                "operation": f"claim, {label}",
                **_claim_latency(queue, min(samples, pending)),
            }
        )
        queue.db.dispose()
    return out


# -- command ------------------------------------------------------------------------------------------


def _table(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        if row["scenario"] == "core":
            lines.append(
                f"{row['engine']:<8} {row['operation']:<32} queuelog {row['queuelog_per_s']:>9,.0f}/s"
                f"   raw {row['raw_per_s']:>9,.0f}/s   ratio {row['ratio']:.2f}x"
            )
        else:
            lines.append(
                f"{row['engine']:<8} {row['operation']:<32} p50 {row['p50_ms']:.3f} ms"
                f"   p99 {row['p99_ms']:.3f} ms"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="queuelog-bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=["core", "backlog", "all"])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per core run (default 5000)")
    parser.add_argument("--backlog", type=int, default=1_000_000, help="pending jobs in the big backlog")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="queuelog-bench-") as tmp:
        folder = Path(tmp)
        if args.scenario in ("core", "all"):
            rows += scenario_core(folder, args.jobs)
        if args.scenario in ("backlog", "all"):
            rows += scenario_backlog(folder, args.backlog)
    print(json.dumps(rows, indent=2) if args.json else _table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
