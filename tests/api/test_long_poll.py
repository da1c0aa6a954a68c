"""Long polls (wait_seconds) and batch claims, through a real server."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests


def _session(key):
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {key}"
    return s


def test_long_poll_returns_as_soon_as_a_job_arrives(keys, live_server):
    server = live_server(workers=1, threads=4)
    worker = _session(keys.raw("worker", "w"))
    producer = _session(keys.raw("producer", "alice"))
    result = {}

    def poll():
        start = time.monotonic()
        response = worker.post(f"{server.url}/jobs/claim", json={"wait_seconds": 10}, timeout=30)
        result.update(status=response.status_code, elapsed=time.monotonic() - start, body=response.json())

    thread = threading.Thread(target=poll)
    thread.start()
    time.sleep(0.5)
    job = producer.post(f"{server.url}/jobs", json={"type": "email"}).json()
    thread.join(15)
    assert result["status"] == 200
    assert result["body"]["id"] == job["id"]
    assert 0.4 < result["elapsed"] < 3.0  # well before the 10 s deadline


def test_long_poll_sees_jobs_enqueued_through_another_server(keys, live_server):
    first, second = live_server(workers=1, threads=4), live_server(workers=1, threads=4)
    worker = _session(keys.raw("worker", "w"))
    producer = _session(keys.raw("producer", "alice"))
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(worker.post, f"{first.url}/jobs/claim", json={"wait_seconds": 10}, timeout=30)
        time.sleep(0.5)
        start = time.monotonic()
        producer.post(f"{second.url}/jobs", json={"type": "email"})
        response = future.result(timeout=15)
        assert response.status_code == 200
        assert time.monotonic() - start < 3.0  # found by the poll of the other process, long before 10 s


def test_long_poll_answers_204_at_the_deadline(keys, live_server):
    server = live_server(workers=1, threads=4)
    worker = _session(keys.raw("worker", "w"))
    start = time.monotonic()
    response = worker.post(f"{server.url}/jobs/claim", json={"wait_seconds": 1.5}, timeout=30)
    assert response.status_code == 204
    assert 1.4 < time.monotonic() - start < 5


def test_waiting_long_polls_do_not_block_other_requests(keys, live_server):
    server = live_server(workers=1, threads=4)
    worker = _session(keys.raw("worker", "w"))
    with ThreadPoolExecutor(3) as pool:
        polls = [
            pool.submit(worker.post, f"{server.url}/jobs/claim", json={"wait_seconds": 5}, timeout=30)
            for _ in range(3)
        ]
        time.sleep(0.5)
        start = time.monotonic()
        health = requests.get(f"{server.url}/healthz", timeout=5)
        assert health.status_code == 200
        assert time.monotonic() - start < 1.0
        assert [p.result().status_code for p in polls] == [204, 204, 204]


def test_batch_claims_hand_out_distinct_jobs_in_priority_order(admin, keys):
    bodies = [
        {"type": "email", "priority": p, "payload": {"i": i}}
        for i, p in enumerate(["low", "critical", "medium", "high", "low", "critical", "medium", "high"])
    ]
    jobs = admin.post("/jobs/batch", json={"jobs": bodies}).json["jobs"]
    rank = {"critical": 0, "high": 1, "medium": 2, "low": 3}
    expected = [j["id"] for j in sorted(jobs, key=lambda j: (rank[j["priority"]], j["id"]))]
    first = keys.worker("w1").post("/jobs/claim", json={"limit": 3}).json["jobs"]
    second = keys.worker("w2").post("/jobs/claim", json={"limit": 10}).json["jobs"]
    assert [j["id"] for j in first] == expected[:3]
    assert [j["id"] for j in second] == expected[3:]
    assert (
        len({j["lease_token"] for j in first} | {j["lease_token"] for j in second}) == 2
    )  # one lease per claim


def test_wait_seconds_limits(worker):
    for value in (-1, 21, "5", True):
        assert worker.post("/jobs/claim", json={"wait_seconds": value}).status_code == 422


def test_a_report_with_next_long_polls_after_committing_the_report(keys, live_server):
    server = live_server(workers=1, threads=4)
    worker = _session(keys.raw("worker", "w"))
    producer = _session(keys.raw("producer", "alice"))
    first = producer.post(f"{server.url}/jobs", json={"type": "email"}).json()
    held = worker.post(f"{server.url}/jobs/claim").json()
    result = {}

    def report():
        start = time.monotonic()
        body = {"lease_token": held["lease_token"], "next": {"wait_seconds": 10}}
        response = worker.post(f"{server.url}/jobs/{first['id']}/complete", json=body, timeout=30)
        result.update(status=response.status_code, elapsed=time.monotonic() - start, body=response.json())

    thread = threading.Thread(target=report)
    thread.start()
    time.sleep(0.5)
    # The report is committed while its request still waits for the next job.
    assert producer.get(f"{server.url}/jobs/{first['id']}").json()["status"] == "completed"
    job = producer.post(f"{server.url}/jobs", json={"type": "email"}).json()
    thread.join(15)
    assert result["status"] == 200 and result["body"]["status"] == "completed"
    assert [j["id"] for j in result["body"]["next"]["jobs"]] == [job["id"]]
    assert 0.4 < result["elapsed"] < 3.0  # well before the 10 s deadline
