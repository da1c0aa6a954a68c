"""How long a batch's page takes (docs/batches.md#measured): ``python -m queuelog.bench.batch_page``.

Makes a fresh SQLite database (or uses ``--database-url``), enqueues one batch of ``--jobs`` jobs chained
by dependencies (each waits for the one before) through ``POST /batches``, completes the first
``--done`` of them so that the page shows every status colour, and then times, in-process as an admin
(no network): the batch's page, the jobs list page (50 rows), the jobs list searched by the batch, the
batches list, and the drawing of the graph alone (queuelog/web/graph.py). Prints one line per figure:
the median and the slowest of ``--samples`` runs.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _timed(work: Callable[[], object], samples: int) -> tuple[float, float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, max(times) * 1000


def measure(url: str, jobs: int, done: int, samples: int) -> list[tuple[str, float, float, int]]:
    """(what, median ms, slowest ms, bytes) for each figure."""
    from queuelog import create_app
    from queuelog.web.graph import Node, draw

    settings = {"DATABASE_URL": url, "SECRET_KEY": "bench", "ADMIN_PASSWORD": "bench-password"}
    app = create_app({"QUEUELOG": {**settings, "RETENTION": None, "SCHEDULE_TICK": 0}})
    extensions = app.extensions["queuelog"]
    key = extensions["admin"].create_key("bench-batch-page", "producer", username="admin")
    worker_key = extensions["admin"].create_key("bench-batch-worker", "worker")
    api = {"Authorization": f"Bearer {key}"}
    client = app.test_client()
    body = [{"type": "email", "ref": "j0"}]
    body += [{"type": "email", "ref": f"j{i}", "depends_on": [f"j{i - 1}"]} for i in range(1, jobs)]
    made = client.post("/batches", json={"jobs": body, "description": "bench chain"}, headers=api)
    assert made.status_code == 201, made.get_data(as_text=True)
    batch = made.get_json()
    worker = {"Authorization": f"Bearer {worker_key}"}
    for _ in range(done):
        held = client.post("/jobs/claim", json={}, headers=worker).get_json()
        token = {"lease_token": held["lease_token"]}
        client.post(f"/jobs/{held['id']}/complete", json=token, headers=worker)
    login = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', login).group(1)
    answer = client.post(
        "/login", data={"csrf_token": csrf, "username": "admin", "password": "bench-password"}
    )
    assert answer.status_code == 302
    rows = []
    for label, path in (
        (f"batch page ({jobs:,} chained jobs)", f"/queue/batches/{batch['id']}"),
        ("jobs list page (50 rows)", "/queue"),
        ("jobs list searched by the batch (50 rows)", f"/queue?batch={batch['id']}"),
        ("batches list page", "/queue/batches"),
    ):
        size = len(client.get(path).data)

        def get(path: str = path) -> None:
            assert client.get(path).status_code == 200

        rows.append((label, *_timed(get, samples), size))
    chain = [Node(1, "completed", "email")] + [
        Node(i, "waiting", "email", (i - 1,)) for i in range(2, jobs + 1)
    ]
    names = {"completed": "completed", "waiting": "waiting"}
    svg = draw(chain, "/queue/", names, "graph")
    rows.append(
        (
            f"graph SVG alone ({jobs:,} chained jobs)",
            *_timed(lambda: draw(chain, "/queue/", names, "graph"), samples),
            len(svg.encode()),
        )
    )
    extensions["db"].dispose()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m queuelog.bench.batch_page", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000, help="jobs in the chain (default 1,000)")
    parser.add_argument("--done", type=int, default=10, help="of them completed first (default 10)")
    parser.add_argument("--samples", type=int, default=15, help="runs of each (default 15)")
    parser.add_argument("--database-url", help="an empty database (default: a new SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = args.database_url or f"sqlite:///{Path(folder) / 'batch-page.sqlite3'}"
        rows = measure(url, args.jobs, args.done, args.samples)
    for label, median, slowest, size in rows:
        print(f"{label:<48} median {median:8.1f} ms   slowest {slowest:8.1f} ms   {size / 1024:8.1f} KiB")


if __name__ == "__main__":
    main()
