"""Running jobs in real queuelog-worker processes against a real server (docs/running-jobs.md): a handler
cancelled mid-run, progress on the way, and a snooze."""

from __future__ import annotations

import signal

from tests.worker.processes import FAST, session, wait_until


def test_a_handler_reporting_progress_is_cancelled_mid_run(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    admin = session(keys.raw("producer", "admin"))
    payload = {"steps": 600, "step_sleep": 0.1}  # a minute's work, reporting progress every 0.1 s
    job = producer.post(f"{server.url}/jobs", json={"type": "email", "payload": payload}).json()
    proc = workers.start(
        server.url, keys.raw("worker", "w-cancel"), "--wait-seconds", "1", "--lease-seconds", "60"
    )
    url = f"{server.url}/jobs/{job['id']}"

    progressing = wait_until(lambda: (j := producer.get(url).json())["progress"] and j, 20, "progress")
    assert progressing["status"] == "running" and progressing["progress_message"].startswith("step ")
    asked = admin.post(f"{url}/cancel")
    assert asked.status_code == 202 and asked.json()["cancel_requested"] is True
    ended = wait_until(
        lambda: (j := producer.get(url).json())["status"] == "cancelled" and j, 10, "cancelled"
    )
    assert ended["retry_count"] == 0 and ended["finished_at"] is not None
    events = [(e["event"], e["actor"]) for e in admin.get(f"{url}/events").json()["events"]]
    assert events == [
        ("enqueued", "alice"),
        ("claimed", "w-cancel"),
        ("cancel_requested", "admin"),
        ("cancelled", "w-cancel"),
    ]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    log = workers.output(proc)
    assert f"job {job['id']}: its cancellation was requested" in log
    assert f"job {job['id']} (email) cancelled; ran" in log and "1 cancelled" in log
    assert "Traceback" not in log


def test_a_handler_watching_the_flag_learns_from_the_heartbeat(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    job = producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"watch_cancel": 60}}).json()
    url = f"{server.url}/jobs/{job['id']}"
    # a 6 s lease: a heartbeat every 2 s, each of which may bring the request
    proc = workers.start(
        server.url, keys.raw("worker", "w-flag"), "--wait-seconds", "1", "--lease-seconds", "6"
    )
    wait_until(lambda: producer.get(url).json()["status"] == "running", 20, "the claim")
    assert producer.post(f"{url}/cancel").status_code == 202
    ended = wait_until(
        lambda: (j := producer.get(url).json())["status"] == "cancelled" and j, 10, "cancelled"
    )
    events = [(e["event"], e["actor"]) for e in producer.get(f"{url}/events").json()["events"]]
    assert events[-2:] == [("cancel_requested", "alice"), ("cancelled", "w-flag")]
    assert ended["cancel_requested"] is False
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


def test_a_snoozed_job_runs_again_later_without_counting_a_failure(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    admin = session(keys.raw("producer", "admin"))
    body = {"type": "email", "max_retries": 0, "payload": {"n": 7, "snooze": 1, "snoozes": 2}}
    job = producer.post(f"{server.url}/jobs", json=body).json()
    url = f"{server.url}/jobs/{job['id']}"
    proc = workers.start(server.url, keys.raw("worker", "w-snooze"), "--wait-seconds", "1")
    done = wait_until(
        lambda: (j := producer.get(url).json())["status"] == "completed" and j, 30, "completion"
    )
    assert (done["retry_count"], done["snooze_count"], done["result"]) == (0, 2, {"n": 7, "attempt": 1})
    events = [e["event"] for e in admin.get(f"{url}/events").json()["events"]]
    assert events == ["enqueued", "claimed", "snoozed", "claimed", "snoozed", "claimed", "completed"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert "snoozed for 1 s" in workers.output(proc) and "2 snoozed" in workers.output(proc)
