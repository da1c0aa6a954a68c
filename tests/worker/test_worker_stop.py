"""How promptly a real queuelog-worker process stops on SIGTERM and SIGINT, against a real server.

The README's guarantees: on SIGTERM or SIGINT the worker stops claiming, lets running handlers finish
within --grace-period, delivers their reports and exits 0.
"""

from __future__ import annotations

import signal
import time

import pytest

from queuelog.queue.admin import AdminStore
from tests.client.proxy import FlakyProxy
from tests.worker.processes import FAST, session, wait_until


def started(workers, proc) -> bool:
    return "worker started:" in workers.output(proc)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_idle_worker_in_a_long_poll_stops_within_two_seconds(app, keys, live_server, workers, signum):
    server = live_server(env=FAST)
    proc = workers.start(server.url, keys.raw("worker", "idle"), "--wait-seconds", "10")
    wait_until(lambda: started(workers, proc), 20, "the worker to start")
    time.sleep(1.5)  # well into its long poll on the empty queue
    sent = time.monotonic()
    proc.send_signal(signum)
    assert proc.wait(timeout=10) == 0
    took = time.monotonic() - sent
    assert took < 2.0, f"the worker took {took:.1f}s to stop"
    text = workers.output(proc)
    assert f"stopping ({signum.name})" in text and "stopped cleanly: 0 completed" in text
    assert "claim failed" not in text and "Traceback" not in text and "WARNING" not in text


def test_a_worker_whose_claim_gets_no_answer_stops_within_seconds_not_the_claims_timeout(
    app, keys, live_server, workers
):
    """A server (or proxy) that takes the claim and never answers: the stop cuts the claim a second past
    its long poll instead of waiting for its 30 s timeout (docs/worker.md)."""
    server = live_server(env=FAST)
    proxy = FlakyProxy(server.port, ["hang"])  # the worker's first connection: its claim
    try:
        proc = workers.start(proxy.url, keys.raw("worker", "stuck"), "--wait-seconds", "1")
        wait_until(lambda: proxy.requests, 20, "the worker's claim")
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0
        took = time.monotonic() - sent
    finally:
        proxy.close()
    assert took < 1 + 1 + 1.5, f"the worker took {took:.1f}s to stop"  # the long poll, a second, slack
    text = workers.output(proc)
    assert "stopping (SIGTERM)" in text and "stopped cleanly: 0 completed" in text
    assert len(proxy.requests) == 1  # the cut claim was not sent again


def test_a_second_signal_exits_at_once_without_waiting_for_the_handler(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    job = producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"sleep": 30}}).json()
    proc = workers.start(server.url, keys.raw("worker", "w"), "--wait-seconds", "1")
    wait_until(
        lambda: producer.get(f"{server.url}/jobs/{job['id']}").json()["status"] == "running", 20, "the claim"
    )
    proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "stopping (SIGTERM)" in workers.output(proc), 5, "the worker to start stopping")
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 1
    assert time.monotonic() - sent < 2.0
    assert "second signal: exiting now" in workers.output(proc)
    assert (
        producer.get(f"{server.url}/jobs/{job['id']}").json()["status"] == "running"
    )  # until its lease ends


def test_the_grace_period_ends_the_process_even_while_a_handler_runs(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    job = producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {"sleep": 30}}).json()
    proc = workers.start(server.url, keys.raw("worker", "w"), "--wait-seconds", "1", "--grace-period", "1")
    wait_until(
        lambda: producer.get(f"{server.url}/jobs/{job['id']}").json()["status"] == "running", 20, "the claim"
    )
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    assert time.monotonic() - sent < 3.0  # 1 s of grace, not the handler's 30 s
    assert "stopped after the grace period with 1 job(s) unreported" in workers.output(proc)


def test_a_refused_claim_stops_the_worker_with_the_servers_reason(app, keys, live_server, workers):
    server = live_server(env=FAST)
    proc = workers.start(server.url, "ql_not_a_real_key", "--wait-seconds", "1")
    assert proc.wait(timeout=20) == 1
    text = workers.output(proc)
    assert "claim refused (HTTP 401 Unauthorized: the API key is unknown or revoked)" in text
    assert "Traceback" not in text and "stopped cleanly" not in text
    assert "stopped, not cleanly: the server refused this worker's key (HTTP 401" in text


def test_a_key_revoked_while_the_worker_runs_stops_it_saying_so(app, keys, live_server, workers):
    server = live_server(env=FAST)
    producer = session(keys.raw("producer", "alice"))
    job = producer.post(f"{server.url}/jobs", json={"type": "email", "payload": {}}).json()
    proc = workers.start(server.url, keys.raw("worker", "w-revoked"), "--wait-seconds", "1")
    wait_until(
        lambda: producer.get(f"{server.url}/jobs/{job['id']}").json()["status"] == "completed", 20, "the job"
    )
    assert proc.poll() is None  # working with a good key
    AdminStore(keys.db).revoke_key("w-revoked")
    assert proc.wait(timeout=20) == 1
    text = workers.output(proc)
    assert (
        "the server refused this worker's key (HTTP 401 Unauthorized: the API key is unknown or revoked)"
        in text
    )
    assert "ERROR queuelog.worker: stopped, not cleanly: the server refused this worker's key" in text
    assert "stopped cleanly" not in text and "Traceback" not in text
    assert "claim failed" not in text  # a refusal is not retried as if the server were down


def test_claims_refused_for_another_reason_are_named_as_such(app, keys, live_server, workers):
    server = live_server(env=FAST)
    # A producer's key may not claim: 403, not a key the server does not know.
    proc = workers.start(server.url, keys.raw("producer", "alice"), "--wait-seconds", "1")
    assert proc.wait(timeout=20) == 1
    text = workers.output(proc)
    assert "stopped, not cleanly: the server refused its claims (HTTP 403" in text
    assert "stopped cleanly" not in text and "refused this worker's key" not in text
