"""Flow control across app servers (docs/flow-control.md): eight worker processes, claiming through two
gunicorn servers on one database, never hold more jobs of a type than its concurrency limit."""

from __future__ import annotations

import http.client
import json
import multiprocessing
import time
from urllib.parse import urlparse

LIMIT = 2


def _worker_process(base_url: str, key: str, results) -> None:
    """Claim up to three jobs, hold them a moment, complete them; stop after a second with nothing to claim.

    Each job's holding interval, from the claim's answer to just before its completion is sent, lies
    within the time the database counts it running, so at no moment may more than LIMIT intervals overlap.
    """
    url = urlparse(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    held, statuses = [], []
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 1.0:
        conn.request("POST", "/jobs/claim", body=json.dumps({"limit": 3}), headers=headers)
        response = conn.getresponse()
        body = json.loads(response.read())
        statuses.append(response.status)
        jobs = body.get("jobs", []) if response.status == 200 else []
        if not jobs:
            time.sleep(0.005)
            continue
        start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on the machine
        time.sleep(0.02)
        for job in jobs:
            held.append((job["id"], start, time.monotonic()))
            conn.request(
                "POST",
                f"/jobs/{job['id']}/complete",
                body=json.dumps({"lease_token": job["lease_token"]}),
                headers=headers,
            )
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
        idle_since = time.monotonic()
    results.put((held, statuses))


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals that overlap at one moment."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_eight_workers_on_two_servers_never_run_more_than_the_limit(app, keys, live_server, backend):
    queue = app.extensions["queuelog"]["queue"]
    queue.types.update("email", concurrency_limit=LIMIT)
    total = 60
    producer = keys.producer("alice")
    response = producer.post(
        "/jobs/batch", json={"jobs": [{"type": "email", "payload": {"n": n}} for n in range(total)]}
    )
    assert response.status_code == 201
    servers = [live_server(workers=2, threads=4), live_server(workers=2, threads=4)]

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    worker_keys = [keys.raw("worker", f"worker-{i}") for i in range(8)]
    processes = [
        context.Process(target=_worker_process, args=(servers[i % 2].url, key, results))
        for i, key in enumerate(worker_keys)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=150) for _ in processes]
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0

    held = [entry for entries, _ in outcomes for entry in entries]
    statuses = [status for _, codes in outcomes for status in codes]
    assert len(held) == len({job_id for job_id, _, _ in held}) == total, "every job claimed exactly once"
    assert not [s for s in statuses if s >= 500]
    assert most_at_once([(start, end) for _, start, end in held]) == LIMIT  # reached, never passed
    assert sum(1 for entries, _ in outcomes if entries) >= 2, "the work was spread over the workers"
    assert {j["status"] for j in queue.list_jobs(limit=total + 1)} == {"completed"}
