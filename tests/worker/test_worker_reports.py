"""queuelog-worker's reports against a live server: a batch of completions claims a job for each slot it
frees in the same request (docs/worker.md), and the jobs it claims go to the slots."""

from __future__ import annotations

import pytest

from queuelog.worker.client import QueueClient
from queuelog.worker.reports import COMPLETED, LOST, Report, Reporter
from tests.worker.processes import FAST, session


@pytest.fixture
def client_for():
    """QueueClients for the test, their connections closed at its end."""
    clients: list[QueueClient] = []

    def make(url: str, key: str) -> QueueClient:
        clients.append(QueueClient(url, key))
        return clients[-1]

    yield make
    for client in clients:
        client.transport.close()


def reporter_for(client: QueueClient, then):
    released: list[tuple[int, list[dict]]] = []
    reporter = Reporter(
        client,
        release=lambda job_id, claimed: released.append((job_id, claimed)),
        past_deadline=lambda: False,
        then=then,
    )
    return reporter, released


def test_a_batch_of_completions_claims_a_job_for_each_slot_it_frees(app, keys, live_server, client_for):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    ids = [
        producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"n": n}}).json()["id"]
        for n in range(7)
    ]
    client = client_for(server.url, keys.raw("worker", "w-batch"))
    held = client.claim(limit=3, wait_seconds=0)
    assert [job["id"] for job in held] == ids[:3]
    reporter, released = reporter_for(client, lambda: {"limit": 1})
    for job in held:
        reporter.put(Report(job, 1, result={"n": job["payload"]["n"]}))
    reporter._deliver(reporter._next_batch(), "r1")  # the three completions waiting: one batch, one request
    assert [job_id for job_id, _ in released] == ids[:3]
    # The three jobs claimed next go with the first job released (the slots are counted, not the jobs).
    assert [job["id"] for job in released[0][1]] == ids[3:6] and released[1][1] == released[2][1] == []
    assert reporter.counts[COMPLETED] == 3
    queue = app.extensions["queuelog"]["queue"]
    assert [queue.get(i).status for i in ids] == ["completed"] * 3 + ["running"] * 3 + ["pending"]
    completed_at = {e.at for i in ids[:3] for e in queue.events(i) if e.event == "completed"}
    claimed_at = {e.at for i in ids[3:6] for e in queue.events(i) if e.event == "claimed"}
    assert len(completed_at) == 1 and claimed_at == completed_at  # one transaction, one clock read


def test_a_batch_whose_leases_were_lost_still_fills_its_slots(app, keys, live_server, client_for):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    ids = [
        producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"n": n}}).json()["id"]
        for n in range(4)
    ]
    client = client_for(server.url, keys.raw("worker", "w-lost"))
    held = client.claim(limit=2, wait_seconds=0)
    reporter, released = reporter_for(client, lambda: {"limit": 1})
    for job in held:
        reporter.put(Report({**job, "lease_token": "0" * 32}, 1))
    reporter._deliver(reporter._next_batch(), "r1")
    assert reporter.counts[LOST] == 2 and reporter.counts[COMPLETED] == 0
    assert [job["id"] for job in released[0][1]] == ids[2:4]


def test_without_then_a_batch_claims_nothing(app, keys, live_server, client_for):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    for n in range(3):
        producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"n": n}})
    client = client_for(server.url, keys.raw("worker", "w-stop"))
    held = client.claim(limit=2, wait_seconds=0)
    reporter, released = reporter_for(client, lambda: None)  # stopping: claim nothing more
    for job in held:
        reporter.put(Report(job, 1))
    reporter._deliver(reporter._next_batch(), "r1")
    assert reporter.counts[COMPLETED] == 2 and all(claimed == [] for _, claimed in released)
    assert app.extensions["queuelog"]["queue"].get(held[-1]["id"] + 1).status == "pending"
