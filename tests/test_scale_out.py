"""Several app servers and many worker processes sharing one database."""

from __future__ import annotations

import http.client
import json
import multiprocessing
import time
from urllib.parse import urlparse


def _worker_process(base_url: str, key: str, done_event, results) -> None:
    """A worker in its own process: claim, complete, repeat; stop once producers are done and nothing is left."""
    url = urlparse(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    claimed, statuses = [], []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        conn.request("POST", "/jobs/claim", body=json.dumps({"limit": 5}), headers=headers)
        response = conn.getresponse()
        body = json.loads(response.read())
        statuses.append(response.status)
        jobs = body.get("jobs", []) if response.status == 200 else []
        if not jobs:
            if done_event.is_set():
                break
            time.sleep(0.02)
            continue
        for job in jobs:
            claimed.append(job["id"])
            conn.request(
                "POST",
                f"/jobs/{job['id']}/complete",
                body=json.dumps({"lease_token": job["lease_token"]}),
                headers=headers,
            )
            response = conn.getresponse()
            response.read()
            statuses.append(response.status)
    results.put((key[-6:], claimed, statuses))


def test_two_app_servers_and_eight_worker_processes_share_one_database(app, keys, live_server, backend):
    servers = [live_server(workers=2, threads=4), live_server(workers=2, threads=4)]
    total = 1200
    producer_keys = [keys.raw("producer", "alice"), keys.raw("producer", "bob")]
    worker_keys = [keys.raw("worker", f"worker-{i}") for i in range(8)]

    context = multiprocessing.get_context("spawn")
    done_event = context.Event()
    results = context.Queue()
    processes = [
        context.Process(target=_worker_process, args=(servers[i % 2].url, key, done_event, results))
        for i, key in enumerate(worker_keys)
    ]
    for process in processes:
        process.start()

    # Producers enqueue through both servers while the workers are already claiming.
    enqueued = []
    for batch in range(total // 100):
        server = servers[batch % 2]
        url = urlparse(server.url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
        body = {"jobs": [{"type": "email", "payload": {"batch": batch, "n": n}} for n in range(100)]}
        conn.request(
            "POST",
            "/jobs/batch",
            body=json.dumps(body),
            headers={
                "Authorization": f"Bearer {producer_keys[batch % 2]}",
                "Content-Type": "application/json",
            },
        )
        response = conn.getresponse()
        assert response.status == 201
        enqueued += [job["id"] for job in json.loads(response.read())["jobs"]]
        conn.close()
    done_event.set()

    outcomes = [results.get(timeout=150) for _ in processes]
    for process in processes:
        process.join(timeout=30)
        assert process.exitcode == 0

    claimed = [job_id for _, ids, _ in outcomes for job_id in ids]
    statuses = [status for _, _, codes in outcomes for status in codes]
    assert len(enqueued) == total
    assert sorted(claimed) == sorted(enqueued), "every job claimed exactly once"
    assert not [s for s in statuses if s >= 500]
    assert sum(1 for _, ids, _ in outcomes if ids) >= 4, "the work was spread over the workers"
    jobs = app.extensions["queuelog"]["queue"].list_jobs(limit=total + 1)
    assert len(jobs) == total and {j["status"] for j in jobs} == {"completed"}
    assert {j["worker_id"] for j in jobs} <= {f"worker-{i}" for i in range(8)}
