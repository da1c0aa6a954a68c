"""Many workers completing each job and claiming the next in one request (``next`` on POST
/jobs/{id}/complete and /fail, docs/api.md#report-and-claim-in-one-request), against a real server
(gunicorn, several processes) and a real database."""

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


def test_eight_workers_complete_and_claim_next_each_job_exactly_once(app, keys, live_server):
    server = live_server(workers=2, threads=8, env={"QUEUELOG_RETRY_BACKOFF_BASE": "0"})
    producer = _session(keys.raw("producer", "alice"))
    total = 300
    for start in range(0, total, 100):
        batch = [{"type": "email", "payload": {"n": n}} for n in range(start, start + 100)]
        assert producer.post(f"{server.url}/jobs/batch", json={"jobs": batch}, timeout=30).status_code == 201
    worker_keys = [keys.raw("worker", f"worker-{i}") for i in range(8)]
    statuses: Counter[int] = Counter()
    handed: list[tuple[int, str]] = []  # (job id, worker) for every job a worker was handed
    lock = threading.Lock()
    start = threading.Barrier(len(worker_keys))

    def work(index: int) -> None:
        session, name = _session(worker_keys[index]), f"worker-{index}"
        start.wait()
        response = session.post(f"{server.url}/jobs/claim", json={"limit": 1}, timeout=30)
        jobs = response.json()["jobs"]
        while jobs:
            job = jobs[0]
            with lock:
                handed.append((job["id"], name))
            # Every fifth job fails once (retried at once), the rest complete; each asks for the next.
            if job["payload"]["n"] % 5 == 0 and job["retry_count"] == 0:
                body = {"lease_token": job["lease_token"], "error": "once", "next": {}}
                response = session.post(f"{server.url}/jobs/{job['id']}/fail", json=body, timeout=30)
            else:
                body = {"lease_token": job["lease_token"], "result": {"by": name}, "next": {}}
                response = session.post(
                    f"{server.url}/jobs/{job['id']}/complete",
                    json=body,
                    headers={"Prefer": "return=minimal"},
                    timeout=30,
                )
            with lock:
                statuses[response.status_code] += 1
            assert response.status_code == 200, response.text
            jobs = response.json()["next"]["jobs"]

    with ThreadPoolExecutor(max_workers=len(worker_keys)) as pool:
        list(pool.map(work, range(len(worker_keys))))

    retried = total // 5
    assert statuses == Counter({200: total + retried}), statuses
    ids = [job_id for job_id, _ in handed]
    assert len(ids) == total + retried and len(set(ids)) == total  # each once, a retried one twice
    assert len({name for _, name in handed}) > 1, "the work was shared"
    queue = app.extensions["queuelog"]["queue"]
    jobs = queue.list_jobs(limit=total + 1)
    assert len(jobs) == total and all(job.status == "completed" for job in jobs)
    assert all(json.loads(job.result) == {"by": job.worker_id} for job in jobs)
    for job in jobs:  # completed exactly once; claimed once, or twice around its one failure
        events = [event.event for event in queue.events(job.id)]
        once = ["enqueued", "claimed", "completed"]
        twice = ["enqueued", "claimed", "retry_scheduled", "claimed", "completed"]
        assert events == (twice if json.loads(job.payload)["n"] % 5 == 0 else once), events


def test_eight_workers_complete_batches_and_claim_the_next_each_job_exactly_once(app, keys, live_server):
    """Batches with next (POST /jobs/complete): each completion claims the next batch in its request;
    with some items sent with a wrong token (refused, the job still held) and sent again."""
    server = live_server(workers=2, threads=8)
    producer = _session(keys.raw("producer", "alice"))
    total = 600
    for start in range(0, total, 200):
        batch = [{"type": "email", "payload": {"n": n}} for n in range(start, start + 200)]
        assert producer.post(f"{server.url}/jobs/batch", json={"jobs": batch}, timeout=30).status_code == 201
    worker_keys = [keys.raw("worker", f"batcher-{i}") for i in range(8)]
    completed: list[tuple[int, str]] = []
    refused = Counter()
    lock = threading.Lock()
    start = threading.Barrier(len(worker_keys))

    def work(index: int) -> None:
        session, name = _session(worker_keys[index]), f"batcher-{index}"
        session.headers["Prefer"] = "return=minimal"
        start.wait()
        jobs = session.post(f"{server.url}/jobs/claim", json={"limit": 9}, timeout=30).json()["jobs"]
        retry: list[dict] = []
        while jobs or retry:
            # Every seventh job is first sent with a wrong token: refused, it stays held, and goes again.
            items = [
                {
                    "id": j["id"],
                    "lease_token": "0" * 32 if j["id"] % 7 == 0 else j["lease_token"],
                }
                for j in jobs
            ] + [{"id": j["id"], "lease_token": j["lease_token"]} for j in retry]
            body = {"jobs": items, "next": {"limit": 9}}
            response = session.post(f"{server.url}/jobs/complete", json=body, timeout=30)
            assert response.status_code == 200, response.text
            answer = response.json()
            sent = {j["id"]: j for j in [*jobs, *retry]}
            retry = []
            with lock:
                for result in answer["results"]:
                    if result["status"] == 200:
                        completed.append((result["id"], name))
                    else:
                        assert result["status"] == 409, result
                        refused[result["id"]] += 1
                        retry.append(sent[result["id"]])
            jobs = answer["next"]["jobs"]

    with ThreadPoolExecutor(max_workers=len(worker_keys)) as pool:
        list(pool.map(work, range(len(worker_keys))))

    ids = [job_id for job_id, _ in completed]
    assert len(ids) == total and len(set(ids)) == total  # every job completed, none twice
    assert len({name for _, name in completed}) > 1, "the work was shared"
    assert set(refused) == {i for i in ids if i % 7 == 0} and set(refused.values()) == {1}
    queue = app.extensions["queuelog"]["queue"]
    jobs = queue.list_jobs(limit=total + 1)
    assert len(jobs) == total and all(job.status == "completed" for job in jobs)
    owner = dict(completed)
    for job in jobs:  # claimed once, completed once, by the worker that held it
        assert [event.event for event in queue.events(job.id)] == ["enqueued", "claimed", "completed"]
        assert job.worker_id == owner[job.id]
