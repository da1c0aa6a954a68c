"""A handler adds jobs to its own batch (docs/worker.md#adding-jobs-to-its-batch) in a real queuelog-worker
process against a real server: the batch waits for them, and its callback comes once, after them."""

from __future__ import annotations

import signal

from tests.worker.processes import FAST, session, wait_until


def test_a_handler_adds_jobs_to_its_batch_and_the_batch_waits_for_them(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    body = {"jobs": [{"type": "email", "payload": {"add": [1, 2, 3]}}], "on_success": {"type": "sync"}}
    batch = producer.post(f"{server.url}/batches", json=body).json()
    proc = workers.start(server.url, keys.raw("worker", "w-batch"), "--wait-seconds", "1")
    url = f"{server.url}/batches/{batch['id']}"
    done = wait_until(lambda: (b := producer.get(url).json())["status"] != "running" and b, 30, "the batch")
    assert done["status"] == "succeeded" and done["total"] == 5, done
    assert done["counts"]["completed"] == 5
    parent = producer.get(f"{server.url}/jobs/{batch['jobs'][0]}").json()
    added = parent["result"]["added"]
    assert len(added) == 4 and sorted(done["jobs"]) == sorted([batch["jobs"][0], *added])
    join = producer.get(f"{server.url}/jobs/{added[-1]}").json()
    assert join["depends_on"] == added[:3] and join["batch_id"] == batch["id"]
    # The callback came once the added jobs were done too: after the last of them finished.
    callback = producer.get(f"{server.url}/jobs/{done['on_success_job']}").json()
    assert callback["type"] == "sync" and callback["created_at"] >= join["finished_at"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert "Traceback" not in workers.output(proc)


def test_a_job_outside_any_batch_cannot_add_to_one(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    job = producer.post(
        f"{server.url}/jobs", json={"type": "email", "payload": {"add": [1]}, "max_retries": 0}
    )
    proc = workers.start(server.url, keys.raw("worker", "w-alone"), "--wait-seconds", "1")
    url = f"{server.url}/jobs/{job.json()['id']}"
    wait_until(lambda: producer.get(url).json()["status"] == "failed", 20, "the failure")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert f"RuntimeError: job {job.json()['id']} is not in a batch" in workers.output(proc)
