"""The floor for ``queuelog-bench core``: a minimal job queue written straight on the driver.

One ``jobs`` table with one partial claim index and nothing else: no history, no counters, no idempotency
keys, no decoding of rows into records. Each operation is the same unit of work as queuelog's (one job
per transaction for enqueue and for claim+complete; one claim of ``batch`` and one completion of them),
with the same durability settings (WAL and ``synchronous = NORMAL`` on SQLite; each statement committed on
PostgreSQL) and the same guards a queue cannot do without (the claim marks what it picks in one statement;
a completion names the lease token). What queuelog does beyond this is the price of its guarantees.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.engine import make_url

SQLITE_SCHEMA = (
    "CREATE TABLE jobs (id INTEGER PRIMARY KEY, type TEXT NOT NULL, payload TEXT NOT NULL,"
    " priority INTEGER NOT NULL, status TEXT NOT NULL, available_at TEXT NOT NULL, worker_id TEXT,"
    " lease_token TEXT, lease_expires_at TEXT, result TEXT)",
    "CREATE INDEX jobs_claim ON jobs (priority DESC, available_at, id) WHERE status = 'pending'",
)
POSTGRES_SCHEMA = (
    "CREATE TABLE jobs (id bigserial PRIMARY KEY, type text NOT NULL, payload jsonb NOT NULL,"
    " priority smallint NOT NULL, status text NOT NULL, available_at timestamptz NOT NULL, worker_id text,"
    " lease_token text, lease_expires_at timestamptz, result jsonb)",
    "CREATE INDEX jobs_claim ON jobs (priority DESC, available_at, id) WHERE status = 'pending'",
)

_SQLITE = {
    "insert": "INSERT INTO jobs (type, payload, priority, status, available_at) VALUES (?, ?, 0, 'pending', ?)"
    " RETURNING id",
    "claim": "UPDATE jobs SET status = 'running', worker_id = ?, lease_token = ?, lease_expires_at = ?"
    " WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' AND available_at <= ?"
    " ORDER BY priority DESC, available_at, id LIMIT ?) RETURNING id, lease_token",
    "complete": "UPDATE jobs SET status = 'completed', result = ?, lease_token = NULL, lease_expires_at = NULL"
    " WHERE id = ? AND status = 'running' AND lease_token = ?",
}
_POSTGRES = {
    "insert": "INSERT INTO jobs (type, payload, priority, status, available_at) VALUES (%s, %s, 0, 'pending', %s)"
    " RETURNING id",
    "claim": "WITH picked AS (SELECT id FROM jobs WHERE status = 'pending' AND available_at <= %s"
    " ORDER BY priority DESC, available_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
    " UPDATE jobs SET status = 'running', worker_id = %s, lease_token = %s, lease_expires_at = %s"
    " FROM picked WHERE jobs.id = picked.id RETURNING jobs.id, jobs.lease_token",
    "complete": "UPDATE jobs SET status = 'completed', result = %s, lease_token = NULL, lease_expires_at = NULL"
    " WHERE id = %s AND status = 'running' AND lease_token = %s",
    "complete_many": "UPDATE jobs SET status = 'completed', result = NULL, lease_token = NULL,"
    " lease_expires_at = NULL FROM unnest(%s::bigint[], %s::text[]) AS b(id, token)"
    " WHERE jobs.id = b.id AND jobs.status = 'running' AND jobs.lease_token = b.token",
}


def _wall() -> float:
    return time.perf_counter()


def _cpu() -> float:
    return time.process_time()


clock = _wall  # what ``core`` and the minimal loop time with (use_clock)


def use_clock(kind: str) -> None:
    """Time the core loops by the wall clock ("wall", the default) or by this process's CPU time ("cpu").

    On SQLite the database works inside this process, so CPU time measures the work itself even on a
    busy machine; on PostgreSQL it leaves out the server's share and only compares client work."""
    global clock
    clock = {"wall": _wall, "cpu": _cpu}[kind]


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def _now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def run(target: Any, payloads: list[str], batch: int, name: str = "minimal") -> dict[str, float]:
    """The minimal loop on a new, empty database ``name`` of ``target`` (queuelog/bench/targets.py)."""
    url = target.empty(name)
    if target.engine == "sqlite":
        return sqlite_loop(make_url(url).database, payloads, batch)
    return postgres_loop(url, payloads, batch)


def sqlite_loop(path: str, payloads: list[str], batch: int) -> dict[str, float]:
    """The minimal loop on a new SQLite file at ``path``: jobs/s for each operation."""
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "busy_timeout = 30000"):
        conn.execute(f"PRAGMA {pragma}")
    for statement in SQLITE_SCHEMA:
        conn.execute(statement)
    cur = conn.cursor()
    sql = _SQLITE
    n = len(payloads)

    def enqueue_all() -> float:
        start = clock()
        for payload in payloads:
            cur.execute("BEGIN IMMEDIATE")
            cur.execute(sql["insert"], ("bench", payload, _now_text())).fetchall()
            cur.execute("COMMIT")
        return clock() - start

    def claim(limit: int) -> list[Any]:
        now = datetime.now(UTC)
        expires = (now + timedelta(seconds=300)).strftime("%Y-%m-%d %H:%M:%S.%f")
        cur.execute("BEGIN IMMEDIATE")
        params = ("w", secrets.token_hex(16), expires, now.strftime("%Y-%m-%d %H:%M:%S.%f"), limit)
        rows = cur.execute(sql["claim"], params).fetchall()
        cur.execute("COMMIT")
        return rows

    def complete(rows: list[Any]) -> None:
        cur.execute("BEGIN IMMEDIATE")
        if len(rows) == 1:
            cur.execute(sql["complete"], (None, rows[0][0], rows[0][1]))
        else:
            cur.executemany(sql["complete"], [(None, job_id, token) for job_id, token in rows])
        cur.execute("COMMIT")

    out = _cycles(enqueue_all, claim, complete, n, batch)
    conn.close()
    return out


def postgres_loop(url: str, payloads: list[str], batch: int) -> dict[str, float]:
    """The minimal loop in the (new, empty) schema that ``url``'s search_path names."""
    import psycopg

    conn = psycopg.connect(make_url(url).set(drivername="postgresql").render_as_string(hide_password=False))
    conn.autocommit = True
    cur = conn.cursor()
    for statement in POSTGRES_SCHEMA:
        cur.execute(statement)
    sql = _POSTGRES
    n = len(payloads)

    def enqueue_all() -> float:
        start = clock()
        for payload in payloads:
            cur.execute(sql["insert"], ("bench", payload, datetime.now(UTC)))
            cur.fetchall()
        return clock() - start

    def claim(limit: int) -> list[Any]:
        now = datetime.now(UTC)
        params = (now, limit, "w", secrets.token_hex(16), now + timedelta(seconds=300))
        return cur.execute(sql["claim"], params).fetchall()

    def complete(rows: list[Any]) -> None:
        if len(rows) == 1:
            cur.execute(sql["complete"], (None, rows[0][0], rows[0][1]))
        else:
            cur.execute(sql["complete_many"], ([r[0] for r in rows], [r[1] for r in rows]))

    out = _cycles(enqueue_all, claim, complete, n, batch)
    conn.close()
    return out


def _cycles(enqueue_all: Any, claim: Any, complete: Any, n: int, batch: int) -> dict[str, float]:
    """Time enqueue, claim+complete one at a time, then (after refilling) batches of ``batch``."""
    enqueue = enqueue_all()
    start = clock()
    done = 0
    while rows := claim(1):
        complete(rows)
        done += 1
    cycle = clock() - start
    assert done == n, f"completed {done} of {n}"
    enqueue_all()  # refill (not timed)
    start = clock()
    done = 0
    while rows := claim(batch):
        complete(rows)
        done += len(rows)
    batched = clock() - start
    assert done == n, f"completed {done} of {n}"
    return {
        "enqueue": _rate(n, enqueue),
        "claim_complete": _rate(n, cycle),
        f"batch_{batch}": _rate(n, batched),
    }
