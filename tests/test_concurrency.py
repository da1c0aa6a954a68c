"""Many workers and producers at once against a real server (gunicorn) and a real database."""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests


def _session(key: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    return session


def test_eight_workers_claim_and_complete_500_jobs_exactly_once(app, keys, live_server):
    server = live_server(workers=2, threads=8)
    producer_keys = [keys.raw("producer", f"producer-{i}") for i in range(4)]
    worker_keys = [keys.raw("worker", f"worker-{i}") for i in range(8)]
    total = 500
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def produce(index: int) -> list[int]:
        session = _session(producer_keys[index])
        ids = []
        for n in range(index, total, len(producer_keys)):
            response = session.post(
                f"{server.url}/jobs", json={"type": "email", "payload": {"n": n}}, timeout=30
            )
            with lock:
                statuses[response.status_code] += 1
            assert response.status_code == 201, response.text
            ids.append(response.json()["id"])
        return ids

    claimed: list[tuple[int, str]] = []
    start = threading.Barrier(len(worker_keys))

    def work(index: int) -> None:
        session = _session(worker_keys[index])
        start.wait()
        idle = 0
        while idle < 3:  # enqueueing may still be going on: give up after three empty claims
            response = session.post(f"{server.url}/jobs/claim", timeout=30)
            with lock:
                statuses[response.status_code] += 1
            if response.status_code == 204:
                idle += 1
                continue
            assert response.status_code == 200, response.text
            idle = 0
            job = response.json()
            with lock:
                claimed.append((job["id"], job["worker_id"]))
            done = session.post(
                f"{server.url}/jobs/{job['id']}/complete",
                json={"lease_token": job["lease_token"], "result": {"by": job["worker_id"]}},
                timeout=30,
            )
            with lock:
                statuses[done.status_code] += 1
            assert done.status_code == 200, done.text

    with ThreadPoolExecutor(max_workers=len(producer_keys)) as pool:
        enqueued = [job_id for ids in pool.map(produce, range(len(producer_keys))) for job_id in ids]
    with ThreadPoolExecutor(max_workers=len(worker_keys)) as pool:
        list(pool.map(work, range(len(worker_keys))))

    assert len(enqueued) == total
    claimed_ids = [job_id for job_id, _ in claimed]
    assert len(claimed_ids) == total, "every job claimed"
    assert len(set(claimed_ids)) == total, "no job claimed twice"
    assert set(claimed_ids) == set(enqueued)
    assert not any(code >= 500 for code in statuses), statuses
    assert len({worker for _, worker in claimed}) > 1, "the work was shared"

    queue = app.extensions["queuelog"]["queue"]
    jobs = queue.list_jobs(limit=total + 1)
    assert len(jobs) == total
    assert all(job["status"] == "completed" for job in jobs)
    assert all(json.loads(job["result"]) == {"by": job["worker_id"]} for job in jobs)


def test_concurrent_enqueues_with_one_idempotency_key_make_one_job(app, keys, live_server):
    server = live_server(workers=2, threads=8)
    key = keys.raw("producer", "alice")
    barrier = threading.Barrier(16)

    def enqueue(_):
        session = _session(key)
        barrier.wait()
        response = session.post(
            f"{server.url}/jobs",
            json={"type": "email", "payload": {"order": 7}},
            headers={"Idempotency-Key": "order-7"},
            timeout=30,
        )
        return response.status_code, response.json()["id"]

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(enqueue, range(16)))
    codes = Counter(code for code, _ in results)
    assert codes[201] == 1 and codes[200] == 15, codes
    assert len({job_id for _, job_id in results}) == 1
    assert len(app.extensions["queuelog"]["queue"].list_jobs(limit=10)) == 1
