"""The worker client in real processes against a real server: crashes, restarts, shutdowns.

Every test here is bounded in time and stops the processes it started.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import requests

from tests.worker.processes import FAST, session, wait_until


def test_worker_runs_handlers_reports_results_and_failures(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    admin = session(keys.raw("producer", "admin"))
    ids = [
        producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"n": n}}).json()["id"]
        for n in range(12)
    ]
    retried = producer.post(
        f"{server.url}/jobs", json={"type": "email", "max_retries": 1, "payload": {"fail": "smtp down"}}
    ).json()
    permanent = producer.post(
        f"{server.url}/jobs", json={"type": "email", "payload": {"fail_permanently": "bad address"}}
    ).json()
    scalar = producer.post(f"{server.url}/jobs", json={"type": "pdf"}).json()
    proc = workers.start(server.url, keys.raw("worker", "w-a"), "--concurrency", "4", "--wait-seconds", "1")

    def finished():
        jobs = admin.get(f"{server.url}/jobs?limit=200").json()["jobs"]
        return all(j["status"] in ("completed", "failed") for j in jobs) and jobs

    jobs = {j["id"]: j for j in wait_until(finished, 30, "all jobs to finish")}
    assert all(jobs[i]["status"] == "completed" and jobs[i]["result"]["n"] == n for n, i in enumerate(ids))
    assert jobs[scalar["id"]]["result"] == {"value": "rendered"}
    failed = jobs[retried["id"]]
    assert failed["status"] == "failed" and failed["retry_count"] == 1  # tried twice
    assert "RuntimeError: smtp down" in failed["error"] and "Traceback" in failed["error"]
    assert "swordfish" not in failed["error"]  # redacted on the way in
    assert jobs[permanent["id"]]["status"] == "failed" and jobs[permanent["id"]]["retry_count"] == 0
    assert "PermanentFailure: bad address" in jobs[permanent["id"]]["error"]

    rss_kb = int(
        next(
            line
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            if line.startswith("VmRSS:")
        ).split()[1]
    )
    assert rss_kb < 60 * 1024, (
        f"the worker uses {rss_kb // 1024} MB"
    )  # it imports neither Flask nor SQLAlchemy
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


def test_sigkilled_worker_jobs_are_recovered_by_another_worker(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    admin = session(keys.raw("producer", "admin"))
    ids = [
        producer.post(
            f"{server.url}/jobs", json={"type": "email", "payload": {"n": n, "sleep_first": 60}}
        ).json()["id"]
        for n in range(3)
    ]
    doomed_key = keys.raw("worker", "doomed")
    doomed = workers.start(
        server.url,
        doomed_key,
        "--concurrency",
        "3",
        "--lease-seconds",
        "5",
        "--wait-seconds",
        "1",
    )

    def held_by_doomed():
        jobs = [admin.get(f"{server.url}/jobs/{i}").json() for i in ids]
        return all(j["status"] == "running" and j["worker_id"] == "doomed" for j in jobs)

    wait_until(held_by_doomed, 20, "the doomed worker to hold all three jobs")
    db = app.extensions["queuelog"]["db"]
    with db.cursor() as cur:  # the dead worker's lease tokens, to replay its late report afterwards
        cur.execute(db.sql("SELECT id, lease_token FROM jobs WHERE worker_id = 'doomed'"))
        old_tokens = dict(cur.fetchall())
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=10)

    rescuer = workers.start(
        server.url, keys.raw("worker", "rescuer"), "--concurrency", "3", "--wait-seconds", "1"
    )

    def all_completed():
        jobs = [admin.get(f"{server.url}/jobs/{i}").json() for i in ids]
        return all(j["status"] == "completed" for j in jobs) and jobs

    jobs = wait_until(all_completed, 30, "the rescuer to complete the jobs")
    assert {j["worker_id"] for j in jobs} == {"rescuer"}
    assert all(j["retry_count"] == 1 and j["result"]["attempt"] == 2 for j in jobs)
    for job_id in ids:
        events = admin.get(f"{server.url}/jobs/{job_id}/events").json()["events"]
        assert [e["event"] for e in events] == [
            "enqueued",
            "claimed",
            "lease_expired",
            "claimed",
            "completed",
        ]
        assert events[2]["actor"] == "system" and "held by doomed" in events[2]["error"]
    # The dead holder's late report, with its old lease, is refused.
    ghost = session(doomed_key)
    late = ghost.post(f"{server.url}/jobs/{ids[0]}/complete", json={"lease_token": old_tokens[ids[0]]})
    assert late.status_code == 409
    rescuer.send_signal(signal.SIGTERM)
    assert rescuer.wait(timeout=20) == 0


def test_sigterm_lets_a_slow_job_finish_and_report(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    job = producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"n": 1, "sleep": 3}}).json()
    proc = workers.start(server.url, keys.raw("worker", "w"), "--wait-seconds", "1", "--grace-period", "20")
    wait_until(
        lambda: producer.get(f"{server.url}/jobs/{job['id']}").json()["status"] == "running", 20, "the claim"
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=25) == 0
    final = producer.get(f"{server.url}/jobs/{job['id']}").json()
    assert final["status"] == "completed" and final["result"]["n"] == 1
    assert "stopped cleanly: 1 completed" in workers.output(proc)


def test_server_killed_mid_burst_loses_no_answered_enqueue_and_workers_carry_on(
    app, keys, live_server, workers
):
    server = live_server(workers=2, threads=4, env=FAST)
    producer_key = keys.raw("producer", "alice")
    worker_proc = workers.start(
        server.url,
        keys.raw("worker", "steady"),
        "--concurrency",
        "4",
        "--wait-seconds",
        "1",
        "--lease-seconds",
        "5",
    )
    answered: dict[int, dict] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def burst(thread_no: int) -> None:
        s = session(producer_key)
        n = 0
        while not stop.is_set():
            payload = {"thread": thread_no, "n": n, "text": "ü" * (n % 50)}
            n += 1
            try:
                response = s.post(
                    f"{server.url}/jobs", json={"type": "email", "payload": payload}, timeout=10
                )
            except requests.RequestException:
                time.sleep(0.05)  # the server is down: try again
                continue
            if response.status_code == 201:
                with lock:
                    answered[response.json()["id"]] = payload

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    wait_until(lambda: len(answered) > 100, 30, "a hundred answered enqueues")
    server.kill()  # mid-burst, master and workers at once
    time.sleep(0.5)
    server.start()
    wait_until(lambda: len(answered) > 250, 30, "enqueues to resume after the restart")
    stop.set()
    for t in threads:
        t.join(20)

    queue = app.extensions["queuelog"]["queue"]
    for job_id, payload in answered.items():
        job = queue.get(job_id)
        assert job is not None and json.loads(job.payload) == payload, job_id
    db = app.extensions["queuelog"]["db"]
    with db.cursor() as cur:  # nothing half-written: every job has its "enqueued" event
        cur.execute(
            "SELECT count(*) FROM jobs j WHERE NOT EXISTS "
            "(SELECT 1 FROM job_events e WHERE e.job_id = j.id AND e.event = 'enqueued')"
        )
        assert cur.fetchone()[0] == 0

    def drained():
        with db.cursor() as cur:
            cur.execute("SELECT count(*) FROM jobs WHERE status <> 'completed'")
            return cur.fetchone()[0] == 0

    wait_until(drained, 60, "the worker to complete every job after the restart")
    assert worker_proc.poll() is None, "the worker survived the outage"
    worker_proc.send_signal(signal.SIGTERM)
    assert worker_proc.wait(timeout=20) == 0


def test_a_worker_completes_each_job_and_claims_the_next_in_one_request(app, keys, live_server, workers):
    """docs/worker.md: a report asks for the next job in its own request. The job it claims has its
    ``claimed`` row at the very moment of the report's ``completed`` row: one transaction, one clock read."""
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    admin = session(keys.raw("producer", "admin"))
    ids = [
        producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"n": n}}).json()["id"]
        for n in range(6)
    ]
    proc = workers.start(
        server.url, keys.raw("worker", "w-next"), "--concurrency", "1", "--wait-seconds", "1"
    )

    def finished():
        jobs = admin.get(f"{server.url}/jobs?limit=50").json()["jobs"]
        return all(j["status"] == "completed" for j in jobs) and jobs

    wait_until(finished, 30, "all jobs to finish")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    events = {i: admin.get(f"{server.url}/jobs/{i}/events").json()["events"] for i in ids}
    completed_at = {i: next(e["at"] for e in events[i] if e["event"] == "completed") for i in ids}
    claimed_at = {i: next(e["at"] for e in events[i] if e["event"] == "claimed") for i in ids}
    for before, after in zip(ids, ids[1:], strict=False):  # one at a time, in claim order
        assert claimed_at[after] == completed_at[before]
    assert all([e["event"] for e in events[i]] == ["enqueued", "claimed", "completed"] for i in ids)
