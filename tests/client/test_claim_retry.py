"""queuelog-worker's claims through a real TCP proxy that drops the answer: the claim is sent again with
its request id, and the server answers the job the lost answer held, instead of leaving it held by nobody
until its lease ends (docs/operations.md#outages)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from queuelog.worker import QueueClient
from queuelog.worker.runner import Worker
from tests.client.proxy import FlakyProxy


@pytest.fixture
def proxy(served):
    made = FlakyProxy(served.port)
    yield made
    made.close()


def test_a_claim_whose_answer_was_lost_is_sent_again_with_its_request_id(served, proxy):
    producer = served.client()
    job = producer.enqueue("pdf", {"n": 1})
    proxy.script = ["drop"]  # the first connection: the claim reaches the server, its answer is lost
    done = threading.Event()
    ran: list[int] = []

    def handle(held):
        ran.append(held.id)
        done.set()

    runner = Worker(
        QueueClient(proxy.url, served.worker_key()), {"pdf": handle}, wait_seconds=1, max_backoff=1
    )

    def run() -> None:
        try:
            runner.run()
        finally:
            runner.client.transport.close()  # this thread's keep-alive connection

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert done.wait(30)
    finally:
        runner.stop()
        thread.join(timeout=30)
    claims = [
        json.loads(request.partition(b"\r\n\r\n")[2])
        for request in proxy.requests
        if request.startswith(b"POST /jobs/claim")
    ]
    assert len(claims) >= 2 and claims[0]["request_id"] == claims[1]["request_id"]
    assert ran == [job.id]  # the job the lost answer held, at once: not after its lease
    deadline = time.monotonic() + 10
    while producer.get(job.id).status != "completed" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert producer.get(job.id).status == "completed"
    events = [event.event for event in producer.events(job.id)]
    assert events.count("claimed") == 1 and events.count("completed") == 1
