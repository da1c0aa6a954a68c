"""Retries through a real TCP proxy that drops connections, answers 502/503 or hangs: the same bytes are
sent again, so a retried enqueue never makes a second job; 4xx answers are never retried."""

from __future__ import annotations

import json
import socket
import time

import pytest

from queuelog.client import ConnectionFailed, Forbidden, Unavailable
from tests.client.proxy import FlakyProxy, canned


@pytest.fixture
def proxy(served):
    """A proxy to the module's server; the test sets its script."""
    made = FlakyProxy(served.port)
    yield made
    made.close()


def bodies(proxy: FlakyProxy) -> list[bytes]:
    return [request.partition(b"\r\n\r\n")[2] for request in proxy.requests]


def test_an_enqueue_whose_answer_was_lost_makes_one_job(served, proxy):
    proxy.script = ["drop"]
    client = served.client(url=proxy.url)
    job = client.enqueue("email", {"to": "ada@example.com"})
    sent = bodies(proxy)
    assert len(sent) == 2 and sent[0] == sent[1]  # the same body, the same idempotency key
    assert json.loads(sent[0])["idempotency_key"] == job.idempotency_key
    assert [j.id for j in client.list()] == [job.id]  # the first attempt made it; the retry found it
    assert [e.event for e in client.events(job.id)] == ["enqueued"]


def test_without_retries_the_lost_answer_is_an_error_but_the_job_exists(served, proxy):
    """Why retries need the key: the server acted on a request whose answer never came."""
    proxy.script = ["drop"]
    client = served.client(url=proxy.url, retries=0)
    with pytest.raises(ConnectionFailed) as caught:
        client.enqueue("email", idempotency_key="invoice-9")
    assert (caught.value.status, caught.value.type, caught.value.attempts) == (None, None, 1)
    # Sent again by hand with the same key, it finds the job rather than making another.
    job = client.enqueue("email", idempotency_key="invoice-9")
    assert [j.id for j in client.list()] == [job.id]


def test_a_batch_whose_answer_was_lost_is_made_once(served, proxy):
    proxy.script = ["drop"]
    client = served.client(url=proxy.url)
    jobs = client.enqueue_many([{"type": "email", "payload": {"n": n}} for n in range(3)])
    sent = bodies(proxy)
    assert len(sent) == 2 and sent[0] == sent[1]
    assert sorted(j.id for j in client.list()) == sorted(j.id for j in jobs) and len(jobs) == 3


def test_a_cancel_whose_answer_was_lost_still_returns_the_cancelled_job(served, proxy):
    client = served.client(url=proxy.url)
    job = client.enqueue("email")
    proxy.script = ["drop"]
    client.close()  # a new connection, so that the drop meets the cancel
    cancelled = client.cancel(job.id)
    assert cancelled.id == job.id and cancelled.status == "cancelled"
    assert [e.event for e in client.events(job.id)] == ["enqueued", "cancelled"]


def test_bad_gateways_are_retried_until_the_server_answers(served, proxy):
    proxy.script = ["502", "502"]
    client = served.client(url=proxy.url, retries=3)
    job = client.enqueue("pdf")
    sent = bodies(proxy)
    assert len(sent) == 3 and len(set(sent)) == 1
    assert [j.id for j in client.list()] == [job.id]


def test_retries_are_bounded_and_a_proxy_page_is_a_clear_error(served, proxy):
    proxy.script = ["502"] * 3
    client = served.client(url=proxy.url, retries=2)
    with pytest.raises(Unavailable) as caught:
        client.enqueue("pdf")
    error = caught.value
    assert (error.status, error.type, error.title, error.attempts) == (502, "about:blank", "Bad Gateway", 3)
    assert error.detail == "<html><body><h1>502 Bad Gateway</h1><p>no server is up</p></body></html>"
    assert str(error).startswith("HTTP 502 Bad Gateway: <html>")
    assert len(proxy.requests) == 3
    assert len(client.list()) == 0  # the fourth connection is forwarded: nothing was made


def test_retry_after_of_a_503_is_honoured(served, proxy):
    problem = {
        "type": "/problems/unavailable",
        "title": "Service unavailable",
        "status": 503,
        "detail": "the database is unavailable or busy; try again",
    }
    proxy.script = [
        canned(
            "503 Service Unavailable",
            json.dumps(problem).encode(),
            "application/problem+json",
            "Retry-After: 1",
        )
    ]
    client = served.client(url=proxy.url, backoff=0.01)
    started = time.monotonic()
    job = client.enqueue("pdf")
    assert time.monotonic() - started >= 1.0
    assert len(proxy.requests) == 2 and job.status == "pending"


def test_refusals_are_never_retried(served, proxy):
    client = served.client(url=proxy.url, retries=5)
    with pytest.raises(Forbidden) as caught:
        client.enqueue("email", priority="high")
    assert len(proxy.requests) == 1 and caught.value.attempts == 1


def test_reads_are_retried_too(served, proxy):
    client = served.client(url=proxy.url)
    job = client.enqueue("email")
    client.close()
    proxy.script = ["drop", "502"]
    assert client.get(job.id) == job
    assert len(proxy.requests) == 4  # the enqueue, then the read three times


def test_no_server_at_all(served):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nobody listens on it
        client = served.client(url=f"http://127.0.0.1:{port}", retries=2, backoff=0.1)
        started = time.monotonic()
        with pytest.raises(ConnectionFailed) as caught:
            client.get(1)
    elapsed = time.monotonic() - started
    assert caught.value.attempts == 3 and "ConnectionRefusedError" in caught.value.detail
    assert 0.15 <= elapsed < 2  # two pauses: at least half of 0.1 and of 0.2 s


def test_a_server_that_does_not_answer_in_time(served, proxy):
    proxy.script = ["hang", "hang"]
    client = served.client(url=proxy.url, timeout=0.5, retries=1)
    started = time.monotonic()
    with pytest.raises(ConnectionFailed) as caught:
        client.enqueue("email")
    assert 1.0 <= time.monotonic() - started < 5
    assert caught.value.attempts == 2 and "timed out" in caught.value.detail


def test_one_request_may_forgo_the_retries(served, proxy):
    client = served.client(url=proxy.url, retries=5)
    proxy.script = ["502"]
    with pytest.raises(Unavailable) as caught:
        client.request("POST", "/jobs/claim", {}, retries=0)  # a claim sent twice would claim twice
    assert caught.value.attempts == 1 and len(proxy.requests) == 1


# -- a kept-alive connection dropped after the server acted: retries=0 means once -----------------------


def _kept_alive(served, proxy, script: tuple, **options):
    """A client whose connection through the proxy is open and kept alive (one read went through), so
    that its next request meets the rest of ``script``."""
    proxy.script = [("forward", *script)]
    client = served.client(url=proxy.url, **options)
    assert list(client.list()) == []  # the first request of the connection
    return client


def posts(proxy: FlakyProxy, path: bytes) -> int:
    return sum(request.startswith(b"POST " + path + b" ") for request in proxy.requests)


def test_a_post_with_no_retries_is_sent_once_when_its_kept_alive_connection_drops(served, proxy):
    client = _kept_alive(served, proxy, ("drop",))
    with pytest.raises(ConnectionFailed) as caught:
        client.request("POST", "/jobs", {"type": "email"}, retries=0)
    assert caught.value.attempts == 1
    assert posts(proxy, b"/jobs") == 1  # the old transport sent it again on a new connection
    assert len(client.list()) == 1  # the server made the job before the connection dropped: once


def test_a_batch_with_no_retries_is_sent_once_when_its_kept_alive_connection_drops(served, proxy):
    client = _kept_alive(served, proxy, ("drop",))
    batch = {"jobs": [{"type": "email", "payload": {"n": n}} for n in range(2)]}
    with pytest.raises(ConnectionFailed):
        client.request("POST", "/jobs/batch", batch, retries=0)
    assert posts(proxy, b"/jobs/batch") == 1
    assert len(client.list()) == 2


def test_a_client_without_retries_sends_a_cancel_once(served, proxy):
    client = _kept_alive(served, proxy, ("forward", "drop"), retries=0)
    job = client.enqueue("email")
    with pytest.raises(ConnectionFailed):
        client.cancel(job.id)
    assert posts(proxy, f"/jobs/{job.id}/cancel".encode()) == 1
    assert client.get(job.id).status == "cancelled"


def test_requests_safe_to_repeat_still_recover_from_a_dropped_kept_alive_connection(served, proxy):
    # An enqueue carries its idempotency key, so even with retries=0 the resend finds the first job.
    client = _kept_alive(served, proxy, ("drop",), retries=0)
    job = client.enqueue("email", {"n": 1})
    assert posts(proxy, b"/jobs") == 2 and [j.id for j in client.list()] == [job.id]
    # A batch likewise, and a request that carries an Idempotency-Key header.
    client = _kept_alive(served, proxy, ("drop",), retries=0)
    client.enqueue_many([{"type": "email"}, {"type": "pdf"}])
    assert posts(proxy, b"/jobs/batch") == 2 and len(client.list()) == 2
    client = _kept_alive(served, proxy, ("drop",))
    keyed = {"Idempotency-Key": "by-hand-7"}
    made = client.request("POST", "/jobs", {"type": "email"}, headers=keyed, retries=0)
    assert made["idempotency_key"] == "by-hand-7" and len(client.list()) == 1
    # A read: the transport sends it again at once.
    client = _kept_alive(served, proxy, ("forward", "drop"), retries=0)
    job = client.enqueue("pdf")
    assert client.get(job.id) == job
    # A POST with retries left is sent again by the retry loop; nothing here makes it twice.
    client = _kept_alive(served, proxy, ("drop",), retries=1)
    client.enqueue("pdf", idempotency_key="twice")
    assert len(client.list()) == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_before_a_post_goes_once(served, proxy):
    """The usual reason a kept-alive connection fails: the server's keep-alive timeout closed it. A
    request with retries=0 is not sent on it: the client sees the close first and opens a new one."""
    client = _kept_alive(served, proxy, ("close",))
    time.sleep(0.2)  # the proxy closes the idle connection
    made = client.request("POST", "/jobs", {"type": "email"}, retries=0)
    assert made["status"] == "pending" and posts(proxy, b"/jobs") == 1
    assert proxy.connections == 2 and [j.id for j in client.list()] == [made["id"]]
