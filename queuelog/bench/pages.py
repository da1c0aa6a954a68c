"""The ``pages`` scenario: how long the pages and lists take with a large jobs table.

Fills a fresh database with ``n`` jobs (90% completed over the last two hours, 5% failed with an error
event each, 5% pending but for one in 2,000 running, each finished or running job claimed by one of 8
workers), then times each page through the app in-process (no network), as an admin.
"""

from __future__ import annotations

import re
import statistics
import time
from datetime import timedelta
from typing import Any

from queuelog.bench.targets import Target, progress
from queuelog.models import utcnow

ERRORS = [
    "TimeoutError: gave up after {n}s",
    "KeyError: 'field_{n}'",
    "ConnectionError: refused by 10.0.0.{n}",
]


def _fill(target: Target, url: str, n: int) -> None:
    conn = target.raw_connect(url)
    cur = conn.cursor()
    d = target.sql
    now = utcnow()
    job_sql = target.named(
        "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner, available_at,"
        " created_at, updated_at, finished_at, error, worker_id, claimed_at, lease_expires_at) VALUES (:type,"
        " :payload, :priority, :status, 0, 3, :owner, :at, :at, :at, :finished, :error, :worker, :claimed,"
        " :expires)"
    )
    batch = 20_000
    for first in range(0, n, batch):
        rows = []
        for i in range(first, min(n, first + batch)):
            status = "completed" if i % 20 < 18 else ("failed" if i % 20 == 18 else "pending")
            if i % 2000 == 1999:
                status = "running"  # held by the workers page's workers
            at = now - timedelta(seconds=7200 * (n - i) / n)
            claimed = None if status == "pending" else at + timedelta(seconds=2)
            rows.append(
                {
                    "type": ("email", "pdf", "sync")[i % 3],
                    "payload": d.bind_json(f'{{"n": {i}}}'),
                    "priority": (i % 4) * 10,
                    "status": status,
                    "owner": ("alice", "bob", "carol")[i % 3],
                    "at": d.bind_time(at),
                    "finished": d.bind_time(claimed + timedelta(seconds=1 + i % 7))
                    if status in ("completed", "failed")
                    else None,
                    "error": ERRORS[i % 3].format(n=i % 50) if status == "failed" else None,
                    "worker": None if claimed is None else f"bench-worker-{i % 8}",
                    "claimed": None if claimed is None else d.bind_time(claimed),
                    "expires": d.bind_time(now + timedelta(hours=1)) if status == "running" else None,
                }
            )
        target.begin(cur)
        cur.executemany(job_sql, rows)
        conn.commit()
        progress("pages: filling jobs", min(n, first + batch), n)
    # One failure event per failed job, for the errors page.
    target.begin(cur)
    cur.execute(
        "INSERT INTO job_events (job_id, at, event, actor, attempt, error)"
        " SELECT id, finished_at, 'failed', 'bench-worker', 1, error FROM jobs WHERE status = 'failed'"
    )
    conn.commit()
    if target.engine == "postgresql":
        conn.autocommit = True
        cur.execute("VACUUM ANALYZE")
    else:
        cur.execute("PRAGMA optimize")
    conn.close()


def _time(client, path: str, headers: dict[str, str], samples: int) -> dict[str, float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        response = client.get(path, headers=headers)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, (path, response.status_code)
    times.sort()
    return {"p50_ms": statistics.median(times) * 1000, "max_ms": times[-1] * 1000}


def scenario_pages(target: Target, n: int, samples: int = 15) -> list[dict[str, Any]]:
    from queuelog import create_app

    url = target.fresh("pages")
    _fill(target, url, n)
    # No maintenance thread: it would outlive the scenario, whose database is dropped after it.
    settings = {"DATABASE_URL": url, "SECRET_KEY": "bench", "ADMIN_PASSWORD": "bench-password"}
    app = create_app({"QUEUELOG": {**settings, "RETENTION": None, "SCHEDULE_TICK": 0}})
    db = app.extensions["queuelog"]["db"]
    key = app.extensions["queuelog"]["admin"].create_key("bench-admin-key", "producer", username="admin")
    api = {"Authorization": f"Bearer {key}"}
    client = app.test_client()
    login = client.get("/login").get_data(as_text=True)
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', login).group(1)
    assert (
        client.post(
            "/login", data={"csrf_token": token, "username": "admin", "password": "bench-password"}
        ).status_code
        == 302
    )
    middle = n // 2
    from queuelog.api.jobs import encode_cursor

    pages = [
        ("dashboard /", "/", {}),
        ("jobs list, first page", "/queue", {}),
        ("jobs list, deep page", f"/queue?before={middle}", {}),
        ("jobs list, failed only", "/queue?status=failed", {}),
        ("errors page", "/admin/errors", {}),
        ("GET /jobs, first page", "/jobs?limit=50", api),
        ("GET /jobs, deep page", f"/jobs?limit=50&cursor={encode_cursor(middle)}", api),
        ("GET /jobs?type=pdf", "/jobs?type=pdf&limit=50", api),
        ("GET /metrics", "/metrics", api),
        ("workers page", "/admin/workers", {}),
        ("figures by type page", "/admin/figures", {}),
        ("dashboard, a live poll", "/", {"X-Queuelog-Live": "1"}),
    ] + console_searches(n, now=utcnow())
    rows = []
    for label, path, headers in pages:
        rows.append(
            {
                "scenario": "pages",
                "engine": target.engine,
                "operation": f"{label} ({n:,} jobs)",
                **_time(client, path, headers, samples),
            }
        )
    db.dispose()
    return rows


def console_searches(n: int, *, now) -> list[tuple[str, str, dict]]:
    """The console's searches (queuelog/web/search.py) and bulk confirmations, as an admin whose time zone
    is UTC: fields matched through an index, and fields checked on the bounded window of candidates,
    where a search that finds nothing costs the most (it reads its whole window)."""
    hour_ago = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    half_hour_ago = (now - timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M")
    return [
        ("search: job number", f"/queue?id={n // 2}", {}),
        ("search: owner and type (indexes)", "/queue?owner=bob&type=pdf", {}),
        ("search: worker, no match (whole window)", "/queue?worker=nobody", {}),
        ("search: payload field, one match", f"/queue?path=n&value={n - 100}", {}),
        ("search: payload field, no match (whole window)", "/queue?path=n&value=none", {}),
        ("search: failed, error text", "/queue?status=failed&error=refused", {}),
        ("search: created in a half hour", f"/queue?created_from={hour_ago}&created_to={half_hour_ago}", {}),
        (
            "search: finished, no match (whole window)",
            "/queue?finished_from=2001-01-01T00:00&finished_to=2001-01-02T00:00",
            {},
        ),
        ("bulk confirmation: retry all failed (count)", "/queue/bulk/retry?status=failed", {}),
        ("bulk confirmation: delete all pdf (count, capped)", "/queue/bulk/delete?type=pdf", {}),
    ]
