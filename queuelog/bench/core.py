"""In-process scenarios: the queue layer next to a raw driver loop running the very same statements, and
next to a minimal queue on the bare driver (minimal.py).

- ``core``: enqueue (one job per transaction), claim+complete (one job per transaction each), batch
  claim of 100 + batch complete, and batches as queuelog-worker runs them (a claim, then each batch
  completion claims the next batch in its transaction: ``batch_100_next``), each as jobs/s for queuelog,
  for the raw loop running its statements and for the minimal loop (whose batch loop is the floor of
  both batch rows), with the ratios queuelog / raw and queuelog / minimal.
- ``backlog``: claim latency p50/p99 with 1,000, N/10 and N pending jobs, and 1,000 pending beside N finished.
"""

from __future__ import annotations

import json
import statistics
import time
from datetime import timedelta
from typing import Any

from queuelog.bench import minimal
from queuelog.bench.targets import Target, progress
from queuelog.models import utcnow
from queuelog.queue import JobSpec, NextClaim, Queue

WORKER = "bench-worker"
TOKEN = "t" * 32


def _spec(i: int) -> JobSpec:
    payload = {"n": i, "to": "someone@example.com"}
    return JobSpec(type="bench", payload=payload, payload_json=json.dumps(payload, separators=(",", ":")))


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


# -- the queue layer ----------------------------------------------------------------------------------


def layer_loop(queue: Queue, n: int, batch: int, *, then_next: bool = False) -> dict[str, float]:
    specs = [_spec(i) for i in range(n)]
    start = minimal.clock()
    for i, spec in enumerate(specs):
        queue.enqueue("bench", spec)
        if i % 500 == 0:
            progress("queuelog: enqueue", i, n)
    enqueue = minimal.clock() - start
    progress("queuelog: enqueue", n, n)

    start = minimal.clock()
    done = 0
    while jobs := queue.claim(WORKER):
        queue.complete(jobs[0].id, WORKER, jobs[0].lease_token, None)
        done += 1
        if done % 500 == 0:
            progress("queuelog: claim+complete", done, n)
    cycle = minimal.clock() - start
    progress("queuelog: claim+complete", n, n)
    assert done == n, f"completed {done} of {n}"

    def refill() -> None:  # in batches of 500 (not timed)
        for first in range(0, n, 500):
            queue.enqueue_many("bench", specs[first : first + 500])

    refill()
    start = minimal.clock()
    done = 0
    while jobs := queue.claim(WORKER, limit=batch):  # completed as queuelog-worker's batches are: compact
        outcomes = queue.complete_each(WORKER, [(j.id, j.lease_token, None) for j in jobs])
        assert all(refusal is None for _, refusal in outcomes)
        done += len(jobs)
        progress(f"queuelog: batch of {batch}", done, n)
    batched = minimal.clock() - start
    assert done == n
    rates = {
        "enqueue": _rate(n, enqueue),
        "claim_complete": _rate(n, cycle),
        f"batch_{batch}": _rate(n, batched),
    }
    if then_next:  # as queuelog-worker runs batches: each completion claims the next batch
        refill()
        start = minimal.clock()
        done = 0
        jobs = queue.claim(WORKER, limit=batch)
        while jobs:
            items = [(j.id, j.lease_token, None) for j in jobs]
            outcomes, jobs = queue.complete_each_and_claim(WORKER, items, NextClaim(limit=batch))
            assert all(refusal is None for _, refusal in outcomes)
            done += len(outcomes)
            progress(f"queuelog: batch of {batch}, next", done, n)
        assert done == n
        rates[f"batch_{batch}_next"] = _rate(n, minimal.clock() - start)
    return rates


# -- the raw driver -----------------------------------------------------------------------------------


def raw_loop(
    target: Target,
    url: str,
    n: int,
    batch: int,
    *,
    sql: Any = None,
    history: bool = True,
    then_next: bool = False,
) -> dict[str, float]:
    """The engine's statements through the driver alone: the floor to compare with.

    Like the engines: on SQLite each operation is one BEGIN IMMEDIATE transaction that adds the history
    rows; on PostgreSQL each is one autocommitted statement that writes its history rows itself.
    ``sql`` replaces the engine's statements, and ``history=False`` leaves out SQLite's history rows, for
    ``queuelog-bench price`` (price.py).
    """
    sql = sql or target.sql
    logs_itself = target.engine == "postgresql"
    conn = target.raw_connect(url)
    if logs_itself:
        conn.autocommit = True
    cur = conn.cursor()
    specs = [_spec(i) for i in range(n)]

    def begin() -> None:
        target.begin(cur)

    def log(job_ids: list[int], now: Any, name: str, attempt: int) -> None:
        """SQLite's history rows of one transition, as the engine writes them."""
        if history and len(job_ids) == 1:
            cur.execute(sql.EVENT, (job_ids[0], now, name, WORKER, attempt, None))
        elif history and job_ids:  # a batch's rows, in one statement
            pairs = ",".join(f"[{i:d},{attempt:d}]" for i in job_ids)
            cur.execute(sql.EVENTS_ALIKE, {"at": now, "event": name, "actor": WORKER, "jobs": f"[{pairs}]"})

    def finish(job_ids: list[int], now: Any, name: str, attempt: int) -> None:
        if not logs_itself:
            log(job_ids, now, name, attempt)
            conn.commit()

    def insert(spec: JobSpec, now: Any) -> int:
        cur.execute(
            sql.INSERT,
            {
                "type": spec.type,
                "payload": sql.bind_json(spec.payload_json),
                "priority": 0,
                "max_retries": 3,
                "key": None,
                "fingerprint": None,
                "owner": "bench",
                "available_at": now,
                "now": now,
            },
        )
        return cur.fetchall()[0][0]

    def enqueue_all() -> None:  # one job per transaction, as the engine's enqueue
        for spec in specs:
            now = sql.bind_time(utcnow())
            begin()
            finish([insert(spec, now)], now, "enqueued", 0)

    start = minimal.clock()
    enqueue_all()
    enqueue = minimal.clock() - start

    def claim_params(moment: Any, limit: int) -> dict[str, Any]:
        return {
            "now": sql.bind_time(moment),
            "limit": limit,
            "true": True,
            "worker": WORKER,
            "token": TOKEN,
            "expires": sql.bind_time(moment + timedelta(seconds=300)),
            "base": 0,
            "cap": 0,
        }

    def claim_some(limit: int) -> list[Any]:
        params = claim_params(utcnow(), limit)
        now = params["now"]
        begin()
        if logs_itself:  # PostgreSQL's claim settles expired leases itself; rows come back tagged
            cur.execute(sql.CLAIM_IN_ORDER[False], params)  # as the engine while no type has a limit
            rows = [row[1:] for row in cur.fetchall() if row[0] == "claimed"]
        else:  # as the engine does: expired leases are settled only when the probe finds one
            if cur.execute(sql.CLAIM_PROBE, params).fetchone()[0]:
                cur.execute(sql.EXPIRE, params)
                cur.fetchall()
            cur.execute(sql.CLAIM_IN_ORDER[False], params)  # no type has a limit here
            rows = cur.fetchall()
        finish([row[0] for row in rows], now, "claimed", 1)
        if not rows and not logs_itself:
            conn.commit()
        return rows

    start = minimal.clock()
    done = 0
    while rows := claim_some(1):
        now = sql.bind_time(utcnow())
        begin()
        cur.execute(
            sql.COMPLETE, {"id": rows[0][0], "worker": WORKER, "token": TOKEN, "now": now, "result": None}
        )
        cur.fetchall()
        finish([rows[0][0]], now, "completed", 1)
        done += 1
    cycle = minimal.clock() - start
    assert done == n

    enqueue_all()  # refill (not timed)
    start = minimal.clock()
    done = 0
    while rows := claim_some(batch):
        now = sql.bind_time(utcnow())
        begin()
        ids = [row[0] for row in rows]
        items = [(job_id, TOKEN, None) for job_id in ids]
        cur.execute(sql.COMPLETE_EACH, {"worker": WORKER, "now": now, **sql.bind_items(items)})
        cur.fetchall()
        finish(ids, now, "completed", 1)
        done += len(ids)
    batched = minimal.clock() - start
    assert done == n
    rates = {
        "enqueue": _rate(n, enqueue),
        "claim_complete": _rate(n, cycle),
        f"batch_{batch}": _rate(n, batched),
    }
    if then_next:  # each batch completion claims the next batch, in its transaction
        enqueue_all()  # refill (not timed)
        start = minimal.clock()
        done = 0
        rows = claim_some(batch)
        while rows:
            moment = utcnow()
            ids = [row[0] for row in rows]
            params = {**claim_params(moment, batch), **sql.bind_items([(i, TOKEN, None) for i in ids])}
            begin()
            if logs_itself:  # one statement: the completions, then the claim (tagged rows)
                cur.execute(sql.COMPLETE_EACH_THEN_CLAIM[sql.CLAIM_IN_ORDER[False]], params)
                rows = [row[1:] for row in cur.fetchall() if row[0] == "claimed"]
            else:
                cur.execute(sql.COMPLETE_EACH, params)
                cur.fetchall()
                log(ids, params["now"], "completed", 1)
                if cur.execute(sql.CLAIM_PROBE, params).fetchone()[0]:
                    cur.execute(sql.EXPIRE, params)
                    cur.fetchall()
                cur.execute(sql.CLAIM_IN_ORDER[False], params)
                rows = cur.fetchall()
                finish([row[0] for row in rows], params["now"], "claimed", 1)
            done += len(ids)
        assert done == n
        rates[f"batch_{batch}_next"] = _rate(n, minimal.clock() - start)
    conn.close()
    return rates


def scenario_core(target: Target, n: int, batch: int = 100) -> list[dict[str, Any]]:
    """queuelog, the raw driver running queuelog's statements, and the minimal loop, one after another."""
    layer_queue = target.queue(target.fresh("layer"))
    layer = layer_loop(layer_queue, n, batch, then_next=True)
    layer_queue.db.dispose()
    raw = raw_loop(target, target.fresh("raw"), n, batch, then_next=True)
    floor = minimal.run(target, [_spec(i).payload_json for i in range(n)], batch)
    floor[f"batch_{batch}_next"] = floor[f"batch_{batch}"]  # the minimal loop's batches are its floor too
    return [
        {
            "scenario": "core",
            "engine": target.engine,
            "operation": op,
            "queuelog_per_s": layer[op],
            "raw_per_s": raw[op],
            "ratio": layer[op] / raw[op],
            "minimal_per_s": floor[op],
            "ratio_minimal": layer[op] / floor[op],
        }
        for op in layer
    ]


# -- backlog ------------------------------------------------------------------------------------------


def _fill(target: Target, url: str, pending: int, finished: int) -> None:
    """Insert rows straight through the driver, in big transactions: this measures the claim, not the fill."""
    conn = target.raw_connect(url)
    cur = conn.cursor()
    now = target.sql.bind_time(utcnow() - timedelta(seconds=1))
    if target.engine == "postgresql":
        for status, count in (("completed", finished), ("pending", pending)):
            finished_at = "%(now)s" if status == "completed" else "NULL"
            cur.execute(
                "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner, available_at,"
                f" created_at, updated_at, finished_at) SELECT 'bench', '{{}}'::jsonb, (g %% 4) * 10, '{status}', 0, 3,"
                f" 'bench', %(now)s, %(now)s, %(now)s, {finished_at} FROM generate_series(1, %(count)s) AS g",
                {"now": now, "count": count},
            )
            conn.commit()
        conn.autocommit = True
        cur.execute("VACUUM ANALYZE jobs")
    else:
        sql = (
            "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner, available_at,"
            " created_at, updated_at, finished_at) VALUES ('bench', '{}', ?, ?, 0, 3, 'bench', ?, ?, ?, ?)"
        )
        for status, count in (("completed", finished), ("pending", pending)):
            for first in range(0, count, 50_000):
                cur.execute("BEGIN")
                cur.executemany(
                    sql,
                    (
                        (i % 4 * 10, status, now, now, now, now if status == "completed" else None)
                        for i in range(first, min(count, first + 50_000))
                    ),
                )
                cur.execute("COMMIT")
                progress(f"backlog: {status} rows", min(count, first + 50_000), count)
    conn.close()


def claim_latency(queue: Queue, samples: int) -> dict[str, float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        jobs = queue.claim(WORKER)
        times.append(time.perf_counter() - start)
        assert jobs, "the backlog ran dry"
    times.sort()
    return {
        "p50_ms": statistics.median(times) * 1000,
        "p99_ms": times[max(0, int(len(times) * 0.99) - 1)] * 1000,
    }


def scenario_backlog(target: Target, big: int, samples: int = 500) -> list[dict[str, Any]]:
    out = []
    middle = max(1000, big // 10)
    for label, pending, finished in (
        ("1,000 pending", 1000, 0),
        (f"{middle:,} pending", middle, 0),
        (f"{big:,} pending", big, 0),
        (f"1,000 pending + {big:,} finished", 1000, big),
    ):
        url = target.fresh(f"backlog-{pending}-{finished}")
        _fill(target, url, pending, finished)
        queue = target.queue(url)
        out.append(
            {
                "scenario": "backlog",
                "engine": target.engine,
                "operation": f"claim, {label}",
                **claim_latency(queue, min(samples, pending)),
            }
        )
        queue.db.dispose()
    return out
