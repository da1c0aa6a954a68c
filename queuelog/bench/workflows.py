"""The ``workflows`` scenario (docs/workflows.md, Cost): what dependencies and batches cost.

- enqueue: a batch of ``n`` jobs chained by dependencies (each waits for the one before) through
  ``POST /batches``, next to ``n`` plain jobs through ``POST /jobs/batch`` (in requests of 500, its limit),
  both through the app in-process as an admin: the ratio is the price of the chain (the aim: at most 2x).
- release: completing a job that ``n`` waiting jobs depend on, through the queue layer: the one transaction
  that completes it and releases them all (one statement, however many), next to completing a plain job.

Each figure is the median of ``rounds`` runs on fresh databases, timed by the clock ``--clock`` chooses (CPU
time measures SQLite's work itself on a busy machine).
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

from queuelog.bench import minimal
from queuelog.bench.targets import Target

PLAIN_REQUEST = 500  # POST /jobs/batch takes at most 500 jobs a request
_RUNS = itertools.count()  # each run on a database of its own


def _fresh(target: Target, name: str) -> str:
    return target.fresh(f"{name}-{next(_RUNS)}")


def _app(url: str):
    from queuelog import create_app

    settings = {"DATABASE_URL": url, "SECRET_KEY": "bench", "ADMIN_PASSWORD": "bench-password"}
    app = create_app({"QUEUELOG": {**settings, "RETENTION": None, "SCHEDULE_TICK": 0}})
    key = app.extensions["queuelog"]["admin"].create_key("bench-admin-key", "producer", username="admin")
    return app, {"Authorization": f"Bearer {key}"}


def _enqueue(target: Target, n: int, chained: bool) -> float:
    """Seconds to enqueue ``n`` jobs: chained in one batch, or plain in requests of 500."""
    app, headers = _app(_fresh(target, "workflows-chain" if chained else "workflows-plain"))
    client = app.test_client()
    client.post("/jobs", json={"type": "bench"}, headers=headers)  # warm: first request, caches
    if chained:
        jobs = [
            {"type": "bench", "ref": f"j{i}", **({"depends_on": [f"j{i - 1}"]} if i else {})}
            for i in range(n)
        ]
        bodies = [("/batches", {"jobs": jobs})]
    else:
        bodies = [
            ("/jobs/batch", {"jobs": [{"type": "bench"}] * min(PLAIN_REQUEST, n - first)})
            for first in range(0, n, PLAIN_REQUEST)
        ]
    start = minimal.clock()
    for path, body in bodies:
        response = client.post(path, json=body, headers=headers)
        assert response.status_code == 201, response.get_json()
    elapsed = minimal.clock() - start
    app.extensions["queuelog"]["db"].dispose()
    return elapsed


def _release(target: Target, n: int) -> float:
    """Seconds to complete a job that ``n`` waiting jobs depend on (0: a plain job)."""
    from queuelog.queue import JobSpec

    queue = target.queue(_fresh(target, "workflows-release"))
    [(root, _)] = queue.enqueue_many("bench", [JobSpec("bench", {}, "{}")])
    if n:
        queue.enqueue_many("bench", [JobSpec("bench", {}, "{}", depends_on=(root.id,)) for _ in range(n)])
    [held] = queue.claim("bench-worker")
    start = minimal.clock()
    queue.complete(held.id, "bench-worker", held.lease_token or "")
    elapsed = minimal.clock() - start
    if n:
        assert len(queue.engine.list_jobs(status="pending", limit=n + 1)) == n
    queue.db.dispose()
    return elapsed


def scenario_workflows(target: Target, n: int = 1000, rounds: int = 3) -> list[dict[str, Any]]:
    chained = statistics.median(_enqueue(target, n, True) for _ in range(rounds))
    plain = statistics.median(_enqueue(target, n, False) for _ in range(rounds))
    release = statistics.median(_release(target, n) for _ in range(rounds))
    alone = statistics.median(_release(target, 0) for _ in range(rounds))
    return [
        {
            "scenario": "workflows",
            "engine": target.engine,
            "operation": f"enqueue {n:,} chained (POST /batches) vs plain (/jobs/batch)",
            "workflow_ms": chained * 1000,
            "plain_ms": plain * 1000,
            "ratio": chained / plain,
        },
        {
            "scenario": "workflows",
            "engine": target.engine,
            "operation": f"complete a job with {n:,} waiting dependents vs none",
            "workflow_ms": release * 1000,
            "plain_ms": alone * 1000,
            "ratio": release / alone,
        },
    ]
