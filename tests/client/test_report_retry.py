"""queuelog-worker's batch reports through a real TCP proxy that drops the answer: the report is sent
again with the same next.request_id, and the server answers the jobs the lost answer claimed, instead of
leaving them held by nobody until their leases end (docs/operations.md#outages)."""

from __future__ import annotations

import json
import threading

import pytest

from queuelog.worker import QueueClient
from queuelog.worker.reports import COMPLETED, Report, Reporter
from tests.client.proxy import FlakyProxy


@pytest.fixture
def proxy(served):
    made = FlakyProxy(served.port)
    yield made
    made.close()


def test_a_batch_report_whose_answer_was_lost_is_sent_again_with_its_request_id(served, proxy):
    producer = served.client()
    made = [producer.enqueue("email", {"n": n}) for n in range(4)]
    key = served.worker_key()
    direct = QueueClient(served.url, key)
    try:
        held = direct.claim(limit=2, wait_seconds=0)
    finally:
        direct.transport.close()
    assert [job["id"] for job in held] == [made[0].id, made[1].id]
    client = QueueClient(proxy.url, key)
    released: list[tuple[int, list[dict]]] = []
    both = threading.Event()

    def release(job_id: int, claimed: list[dict]) -> None:
        released.append((job_id, claimed))
        if len(released) == len(held):
            both.set()

    reporter = Reporter(
        client, release=release, past_deadline=lambda: False, max_backoff=0.5, then=lambda: {"limit": 1}
    )
    proxy.script = ["drop"]  # the first connection: the batch reaches the server, its answer is lost
    for job in held:
        reporter.put(Report(job, 1))
    threading.Thread(target=reporter.run, daemon=True).start()  # waits for more reports once done
    try:
        assert both.wait(30)
    finally:
        client.transport.close()
    sent = [
        json.loads(request.partition(b"\r\n\r\n")[2])
        for request in proxy.requests
        if request.startswith(b"POST /jobs/complete")
    ]
    assert len(sent) == 2 and sent[0] == sent[1]  # the same report, with the same request id
    assert sent[0]["next"] == {"limit": 2, "request_id": sent[0]["next"]["request_id"]}
    assert len(sent[0]["next"]["request_id"]) == 32
    assert reporter.counts[COMPLETED] == 2
    claimed = released[0][1]
    assert [job["id"] for job in claimed] == [made[2].id, made[3].id] and released[1][1] == []
    for job in made[:2]:
        assert [e.event for e in producer.events(job.id)] == ["enqueued", "claimed", "completed"]
    for job in made[2:]:  # the jobs the lost answer claimed: leased once, and handed to this worker
        assert [e.event for e in producer.events(job.id)] == ["enqueued", "claimed"]
        assert producer.get(job.id).status == "running"
