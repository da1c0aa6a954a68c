"""Workflows across processes (docs/workflows.md, Exactly once): two gunicorn servers on one database
(SQLite: processes on one file; PostgreSQL: the real server) complete the last two members of each batch at
the same moment, one through each server. Every batch finishes once with each callback enqueued once, and
every job waiting on both members is released once: never missed, never twice."""

from __future__ import annotations

import http.client
import json
import multiprocessing
from urllib.parse import urlparse

BATCHES = 12


def _complete_all(base_url: str, key: str, jobs: list[tuple[int, str]], barrier, results) -> None:
    url = urlparse(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    statuses = []
    barrier.wait()
    for job_id, token in jobs:
        conn.request(
            "POST", f"/jobs/{job_id}/complete", body=json.dumps({"lease_token": token}), headers=headers
        )
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
    results.put(statuses)


def test_the_last_two_members_finishing_on_two_servers_fire_callbacks_and_release_once(
    app, keys, live_server, backend
):
    producer, admin = keys.producer("alice"), keys.admin()
    body = {
        "jobs": [{"type": "email"}, {"type": "email"}],
        "on_success": {"type": "sync", "payload": {"on": "success"}},
        "on_finish": {"type": "sync", "payload": {"on": "finish"}},
    }
    batches = [producer.post("/batches", json=body).json for _ in range(BATCHES)]
    joins = [producer.post("/jobs", json={"type": "pdf", "depends_on": b["jobs"]}).json for b in batches]
    assert {j["status"] for j in joins} == {"waiting"}
    claimer = keys.worker("racer")
    worker_key = claimer.key
    held = claimer.post("/jobs/claim", json={"limit": 100, "types": ["email"]}).json["jobs"]
    token = {job["id"]: job["lease_token"] for job in held}
    assert len(token) == 2 * BATCHES
    servers = [live_server(workers=2, threads=2), live_server(workers=2, threads=2)]
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    halves = [[(b["jobs"][side], token[b["jobs"][side]]) for b in batches] for side in (0, 1)]
    processes = [
        context.Process(
            target=_complete_all, args=(servers[side].url, worker_key, halves[side], barrier, results)
        )
        for side in (0, 1)
    ]
    for process in processes:
        process.start()
    statuses = [status for _ in processes for status in results.get(timeout=120)]
    for process in processes:
        process.join(timeout=30)
    assert statuses == [200] * (2 * BATCHES)

    for batch in batches:
        done = producer.get(f"/batches/{batch['id']}").json
        assert done["status"] == "succeeded" and done["counts"]["completed"] == 2
        members_and_callbacks = admin.get(f"/jobs?batch_id={batch['id']}").json["jobs"]
        callbacks = sorted(j["payload"]["on"] for j in members_and_callbacks if j["type"] == "sync")
        assert callbacks == ["finish", "success"]  # each once: never missed, never twice
        assert {done["on_success_job"], done["on_finish_job"]} == {
            j["id"] for j in members_and_callbacks if j["type"] == "sync"
        }
    for join in joins:
        now = producer.get(f"/jobs/{join['id']}").json
        events = [e["event"] for e in producer.get(f"/jobs/{join['id']}/events").json["events"]]
        assert now["status"] == "pending" and events.count("released") == 1
    sync_jobs = admin.get("/jobs?type=sync&limit=200").json["jobs"]
    assert len(sync_jobs) == 2 * BATCHES
