"""How many times a request goes out, through a real TCP proxy that drops a kept-alive connection after the
server acted (docs/client.md#retries, docs/worker.md): every send counts against the client's bound and in
its ``attempts``, the transport's own second send on a dropped kept-alive connection too; a request that
must reach the server at most once (a worker adding jobs to its batch) never goes out again; and a worker's
reports wait at least the server's Retry-After before they go again."""

from __future__ import annotations

import threading
import time

import pytest

from queuelog.client import ConnectionFailed
from queuelog.worker import QueueClient
from queuelog.worker.client import TransientError
from queuelog.worker.reports import COMPLETED, Report, Reporter
from tests.client.proxy import FlakyProxy, canned


def claimed(served) -> tuple[str, dict]:
    """A new worker key and the one job it claimed, straight from the server."""
    key = served.worker_key()
    direct = QueueClient(served.url, key)
    try:
        [job] = direct.claim(limit=1, wait_seconds=0)
    finally:
        direct.transport.close()
    return key, job


def posts(proxy: FlakyProxy, path: str) -> int:
    return sum(request.startswith(f"POST {path} ".encode()) for request in proxy.requests)


def test_a_cancel_sent_again_by_the_transport_counts_and_returns_the_cancelled_job(served):
    key = served.producer_key()
    job = served.client(key).enqueue("email", {"to": "a@example.com"})
    proxy = FlakyProxy(served.port, [("forward", "drop")])  # drops the kept-alive connection's second
    client = served.client(key, url=proxy.url)
    try:
        client.get(job.id)
        cancelled = client.cancel(job.id)  # cancelled by the first send, whose answer was lost
    finally:
        proxy.close()
    assert cancelled.status == "cancelled"
    assert posts(proxy, f"/jobs/{job.id}/cancel") == 2  # the transport sent it again: 409, then read


def test_the_transports_second_send_counts_against_the_bound(served):
    key = served.producer_key()
    job = served.client(key).enqueue("email", {"to": "a@example.com"})
    proxy = FlakyProxy(served.port, [("forward", "drop"), "drop", "drop", "drop"])
    client = served.client(key, url=proxy.url, retries=1)
    try:
        client.get(job.id)
        with pytest.raises(ConnectionFailed) as failed:
            client.cancel(job.id)
    finally:
        proxy.close()
    assert posts(proxy, f"/jobs/{job.id}/cancel") == 2 == failed.value.attempts  # retries + 1, no more


def test_jobs_added_to_a_batch_go_out_once_even_on_a_dropped_kept_alive_connection(served):
    producer = served.client()
    batch = producer.batch([{"type": "email", "payload": {"n": 1}}])
    key, job = claimed(served)
    proxy = FlakyProxy(served.port, [("forward", "drop")])
    client = QueueClient(proxy.url, key)
    try:
        client.heartbeat(job["id"], job["lease_token"], 60)  # the kept-alive connection
        with pytest.raises(TransientError):
            client.add_to_batch(batch.id, job["lease_token"], [{"type": "email", "payload": {"n": 2}}])
    finally:
        client.transport.close()
        proxy.close()
    assert posts(proxy, f"/batches/{batch.id}/jobs") == 1
    assert producer.get_batch(batch.id).total == 2  # the one job it sent, added once


def test_a_report_waits_at_least_the_servers_retry_after(served):
    producer = served.client()
    made = producer.enqueue("email", {"n": 1})
    key, job = claimed(served)
    busy = canned("503 Service Unavailable", b'{"status": 503}', "application/problem+json", "Retry-After: 2")
    proxy = FlakyProxy(served.port, [busy])
    client = QueueClient(proxy.url, key)
    done = threading.Event()
    reporter = Reporter(client, release=lambda *_: done.set(), past_deadline=lambda: False, max_backoff=5)
    reporter.put(Report(job, 1))
    started = time.monotonic()
    threading.Thread(target=reporter.run, daemon=True).start()
    try:
        assert done.wait(30)
    finally:
        client.transport.close()
        proxy.close()
    took = time.monotonic() - started
    assert 2.0 <= took < 5  # the server's 2 s, not the first backoff's 0.5 s, and below the cap
    assert posts(proxy, "/jobs/complete") + posts(proxy, f"/jobs/{made.id}/complete") == 2
    assert reporter.counts[COMPLETED] == 1
