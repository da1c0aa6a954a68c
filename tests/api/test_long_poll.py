"""Long polls (wait_seconds) and batch claims, through a real server."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
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


def test_a_job_enqueued_through_another_server_wakes_a_waiting_long_poll_at_once(keys, live_server):
    """LISTEN/NOTIFY on PostgreSQL, datagrams on SQLite: with the safety-net probe a minute apart, each
    pickup within half a second came from a signal between the servers' processes."""
    if os.environ.get("QUEUELOG_WAKEUPS") == "poll":
        pytest.skip("signals are off (QUEUELOG_WAKEUPS=poll, as behind PgBouncer)")
    quiet = {"QUEUELOG_WAKEUP_SAFETY_NET": "60"}
    first = live_server(workers=1, threads=4, env=quiet)
    second = live_server(workers=1, threads=4, env=quiet)
    worker = _session(keys.raw("worker", "w"))
    producer = _session(keys.raw("producer", "alice"))
    worker.post(f"{first.url}/jobs/claim", json={"wait_seconds": 0.5}, timeout=30)  # starts its listener
    time.sleep(0.5)
    latencies = []
    with ThreadPoolExecutor(1) as pool:
        for _ in range(8):
            future = pool.submit(
                worker.post, f"{first.url}/jobs/claim", json={"wait_seconds": 10}, timeout=30
            )
            time.sleep(0.2)  # the long poll is waiting
            job = producer.post(f"{second.url}/jobs", json={"type": "email"}, timeout=10).json()
            enqueued = time.monotonic()
            response = future.result(timeout=15)
            latencies.append(time.monotonic() - enqueued)
            assert response.status_code == 200 and response.json()["id"] == job["id"]
    assert max(latencies) < 0.5, latencies


def test_beyond_its_waiting_polls_a_server_answers_at_once_with_retry_after(keys, live_server):
    server = live_server(workers=1, threads=6, env={"QUEUELOG_MAX_WAITING_POLLS": "2"})
    worker = _session(keys.raw("worker", "w"))
    with ThreadPoolExecutor(2) as pool:
        polls = [
            pool.submit(_session(keys.raw("worker", f"w{i}")).post, f"{server.url}/jobs/claim",
                        json={"wait_seconds": 3}, timeout=30)
            for i in range(2)
        ]  # fmt: skip
        time.sleep(0.5)
        start = time.monotonic()
        full = worker.post(f"{server.url}/jobs/claim", json={"wait_seconds": 10, "limit": 5}, timeout=30)
        assert time.monotonic() - start < 1.0
        assert full.status_code == 200 and full.json() == {"jobs": []}
        assert 1 <= int(full.headers["Retry-After"]) <= 5
        bare = worker.post(f"{server.url}/jobs/claim", json={"wait_seconds": 10}, timeout=30)
        assert bare.status_code == 204 and "Retry-After" in bare.headers
        assert [p.result().status_code for p in polls] == [204, 204]
    waited = worker.post(f"{server.url}/jobs/claim", json={"wait_seconds": 0.5}, timeout=30)
    assert waited.status_code == 204 and "Retry-After" not in waited.headers  # room to wait again


def test_many_waiting_long_polls_do_not_delay_a_producer(keys, live_server):
    """Sixty workers wait on one process; the producer's GET /jobs answers as if nobody did."""
    server = live_server(workers=1, threads=8 + 60, env={"QUEUELOG_MAX_WAITING_POLLS": "60"})
    producer = _session(keys.raw("producer", "alice"))
    producer.post(f"{server.url}/jobs", json={"type": "pdf"}, timeout=10)
    key = keys.raw("worker", "w")
    with ThreadPoolExecutor(60) as pool:
        polls = [
            pool.submit(_session(key).post, f"{server.url}/jobs/claim",
                        json={"wait_seconds": 4, "types": ["email"]}, timeout=30)
            for _ in range(60)
        ]  # fmt: skip
        time.sleep(1.5)
        times = []
        for _ in range(10):
            start = time.monotonic()
            assert producer.get(f"{server.url}/jobs", timeout=10).status_code == 200
            times.append(time.monotonic() - start)
        assert sorted(times)[5] < 0.2, times
        assert max(times) < 1.0, times
        assert {p.result().status_code for p in polls} == {204}


def test_the_worker_client_waits_as_long_as_retry_after_asks(keys, live_server):
    """A server with no room for waiting long polls answers at once with Retry-After; queuelog-worker's
    client waits that long itself before it claims again, instead of asking again at once."""
    from queuelog.worker.client import QueueClient

    server = live_server(workers=1, threads=4, env={"QUEUELOG_MAX_WAITING_POLLS": "0"})
    client = QueueClient(server.url, keys.raw("worker", "w"))
    try:
        start = time.monotonic()
        assert client.claim(limit=1, wait_seconds=3) == []  # Retry-After: 1
        assert 0.9 < time.monotonic() - start < 2.5
        start = time.monotonic()
        assert client.claim(limit=1, wait_seconds=0.5) == []  # never longer than the long poll asked for
        assert 0.4 < time.monotonic() - start < 1.5
    finally:
        client.transport.close()


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


@pytest.mark.parametrize("minimal", [True, False], ids=["compact", "whole"])
def test_a_batch_completion_with_next_long_polls_after_committing_the_completions(keys, live_server, minimal):
    server = live_server(workers=1, threads=4)
    worker = _session(keys.raw("worker", "w"))
    if minimal:
        worker.headers["Prefer"] = "return=minimal"
    producer = _session(keys.raw("producer", "alice"))
    made = [producer.post(f"{server.url}/jobs", json={"type": "email"}).json() for _ in range(2)]
    held = worker.post(f"{server.url}/jobs/claim", json={"limit": 5}).json()["jobs"]
    result = {}

    def report():
        start = time.monotonic()
        items = [{"id": j["id"], "lease_token": j["lease_token"]} for j in held]
        body = {"jobs": items, "next": {"limit": 3, "wait_seconds": 10}}
        response = worker.post(f"{server.url}/jobs/complete", json=body, timeout=30)
        result.update(status=response.status_code, elapsed=time.monotonic() - start, body=response.json())

    thread = threading.Thread(target=report)
    thread.start()
    time.sleep(0.5)
    # The completions are committed while the request still waits for the next jobs.
    assert [producer.get(f"{server.url}/jobs/{j['id']}").json()["status"] for j in made] == ["completed"] * 2
    job = producer.post(f"{server.url}/jobs", json={"type": "email"}).json()
    thread.join(15)
    assert result["status"] == 200 and [r["status"] for r in result["body"]["results"]] == [200, 200]
    assert [j["id"] for j in result["body"]["next"]["jobs"]] == [job["id"]]
    assert 0.4 < result["elapsed"] < 3.0  # well before the 10 s deadline


def test_a_report_with_next_and_no_room_to_wait_answers_no_jobs(keys, live_server):
    """With as many waiting long polls as the server allows (here none), a report that asks to wait for
    its next job stands, and its answer says it claimed none: never a 5xx after a committed report."""
    server = live_server(workers=1, threads=4, env={"QUEUELOG_MAX_WAITING_POLLS": "0"})
    worker = _session(keys.raw("worker", "w"))
    producer = _session(keys.raw("producer", "alice"))
    made = [producer.post(f"{server.url}/jobs", json={"type": "email"}).json() for _ in range(2)]
    first, second = worker.post(f"{server.url}/jobs/claim", json={"limit": 2}).json()["jobs"]
    single = worker.post(
        f"{server.url}/jobs/{first['id']}/complete",
        json={"lease_token": first["lease_token"], "next": {"wait_seconds": 5}},
        timeout=30,
    )
    assert single.status_code == 200 and single.json()["next"] == {"jobs": []}
    batch = worker.post(
        f"{server.url}/jobs/complete",
        json={
            "jobs": [{"id": second["id"], "lease_token": second["lease_token"]}],
            "next": {"wait_seconds": 5},
        },
        headers={"Prefer": "return=minimal"},
        timeout=30,
    )
    assert batch.status_code == 200 and batch.json() == {
        "results": [{"id": second["id"], "status": 200}],
        "next": {"jobs": []},
    }
    assert [producer.get(f"{server.url}/jobs/{j['id']}").json()["status"] for j in made] == ["completed"] * 2
