"""The server's refusals, each as the error class of its problem type, on both engines; answers that are
no problem document (from a proxy in front of the server) still make clear errors."""

from __future__ import annotations

import json

import pytest

from queuelog.client import (
    Forbidden,
    MethodNotAllowed,
    NotFound,
    NotLeaseHolder,
    PayloadTooLarge,
    QueuelogError,
    RateLimited,
    ServerError,
    Unauthorized,
    UnsupportedMediaType,
    ValidationFailed,
)
from tests.client.proxy import FlakyProxy, canned


def test_an_unknown_key_is_unauthorized(served):
    client = served.client("not-a-key")
    with pytest.raises(Unauthorized) as caught:
        client.get(1)
    error = caught.value
    assert (error.status, error.type, error.title) == (401, "unauthorized", "Unauthorized")
    assert error.detail == "the API key is unknown or revoked"
    assert str(error) == "HTTP 401 Unauthorized: the API key is unknown or revoked"
    assert isinstance(error, QueuelogError) and error.body["status"] == 401


def test_what_a_key_may_not_do_is_forbidden(served):
    producer = served.client()
    with pytest.raises(Forbidden) as caught:
        producer.enqueue("email", priority="critical")
    assert (caught.value.status, caught.value.type) == (403, "forbidden")
    assert "low and medium" in caught.value.detail
    with pytest.raises(Forbidden):
        served.client(served.worker_key()).enqueue("email")  # a worker key does not enqueue
    assert len(producer.list()) == 0


def test_jobs_one_may_not_see_are_not_found(served):
    mine = served.client().enqueue("email")
    other = served.client()
    for call in (lambda: other.get(mine.id), lambda: other.events(mine.id), lambda: other.cancel(mine.id)):
        with pytest.raises(NotFound) as caught:
            call()
        assert (caught.value.status, caught.value.type, caught.value.title) == (404, "not-found", "Not found")
    with pytest.raises(NotFound):
        other.get(10**12)
    with pytest.raises(TypeError):
        other.get("1/cancel")  # a job id is an int: nothing else goes into the path


def test_invalid_input_names_its_fields(served):
    client = served.client()
    with pytest.raises(ValidationFailed) as caught:
        client.enqueue("email", max_retries=99)
    error = caught.value
    assert (error.status, error.type, error.title) == (422, "validation-failed", "Validation failed")
    assert [e.field for e in error.errors] == ["max_retries"] and error.errors[0].message
    with pytest.raises(ValidationFailed) as caught:
        client.enqueue("email", {"big": "x" * 70_000})  # over the payload limit, within the request limit
    assert [e.field for e in caught.value.errors] == ["payload"]
    with pytest.raises(ValidationFailed) as caught:
        client.enqueue("email", run_at="tomorrow")
    assert [e.field for e in caught.value.errors] == ["run_at"]
    assert len(client.list()) == 0


def test_a_request_over_the_size_limit(served):
    client = served.client()
    with pytest.raises(PayloadTooLarge) as caught:
        client.enqueue("email", {"big": "x" * 1_100_000})
    assert (caught.value.status, caught.value.type) == (413, "payload-too-large")
    assert caught.value.attempts == 1
    assert len(client.list()) == 0


def test_a_request_far_over_the_limit_still_reads_the_servers_answer(served):
    """The server answers 413 without reading the body and closes the connection, which breaks the
    client's sending half-way (here, BrokenPipeError while 16 MB were on their way, until the transport
    read the answer after it): the answer is still read."""
    client = served.client()
    with pytest.raises(PayloadTooLarge) as caught:
        client.enqueue("email", {"big": "x" * 16_000_000})
    assert (caught.value.status, caught.value.attempts) == (413, 1)
    assert len(client.list()) == 0  # and the connection after it serves the next request


def test_a_method_the_api_does_not_have(served):
    with pytest.raises(MethodNotAllowed) as caught:
        served.client().request("DELETE", "/jobs")
    assert (caught.value.status, caught.value.type) == (405, "method-not-allowed")


def test_rate_limited_is_raised_with_its_wait_and_not_retried(served):
    problem = {
        "type": "/problems/rate-limited",
        "title": "Too many requests",
        "status": 429,
        "detail": "slow down",
    }
    answer = canned(
        "429 Too Many Requests", json.dumps(problem).encode(), "application/problem+json", "Retry-After: 7"
    )
    proxy = FlakyProxy(served.port, [answer])
    try:
        with pytest.raises(RateLimited) as caught:
            served.client(url=proxy.url).enqueue("email")
    finally:
        proxy.close()
    assert (caught.value.status, caught.value.type, caught.value.retry_after) == (429, "rate-limited", 7.0)
    assert len(proxy.requests) == 1 and caught.value.attempts == 1


def test_a_refusal_that_is_no_problem_document(served):
    """A proxy's own 403 page: the class comes from the status, the title from its reason phrase, the
    detail from the page's text, and the type is about:blank (RFC 9457)."""
    page = b"<html>\n<body>   <h1>403 Forbidden</h1>\n  blocked by policy </body></html>"
    proxy = FlakyProxy(served.port, [canned("403 Forbidden", page, "text/html")])
    try:
        with pytest.raises(Forbidden) as caught:
            served.client(url=proxy.url).get(1)
    finally:
        proxy.close()
    error = caught.value
    assert (error.status, error.type, error.title, error.errors) == (403, "about:blank", "Forbidden", [])
    assert error.detail == "<html> <body> <h1>403 Forbidden</h1> blocked by policy </body></html>"
    assert len(proxy.requests) == 1


def test_a_report_from_a_worker_that_does_not_hold_the_job(served):
    """The worker endpoints' refusal, through the client's general ``request`` with a worker's key."""
    job = served.client(served.admin_key()).enqueue("email", priority="critical")  # claimed first
    worker = served.client(served.worker_key())
    claimed = worker.request("POST", "/jobs/claim", {"types": ["email"]}, retries=0)  # a resend claims more
    assert claimed["id"] == job.id
    with pytest.raises(NotLeaseHolder) as caught:
        worker.request("POST", f"/jobs/{job.id}/complete", {"lease_token": "0" * 32})
    assert (caught.value.status, caught.value.type, caught.value.title) == (
        409,
        "not-lease-holder",
        "Not the lease holder",
    )
    worker.request("POST", f"/jobs/{job.id}/complete", {"lease_token": claimed["lease_token"]})


def test_a_body_that_is_not_json(served):
    with pytest.raises(UnsupportedMediaType) as caught:
        served.client().request("POST", "/jobs", {"type": "email"}, headers={"Content-Type": "text/plain"})
    assert (caught.value.status, caught.value.type) == (415, "unsupported-media-type")


def test_a_server_error_is_not_retried(served):
    problem = {
        "type": "/problems/internal-error",
        "title": "Internal server error",
        "status": 500,
        "detail": "oops",
    }
    proxy = FlakyProxy(
        served.port,
        [canned("500 Internal Server Error", json.dumps(problem).encode(), "application/problem+json")],
    )
    try:
        with pytest.raises(ServerError) as caught:
            served.client(url=proxy.url).get(1)
    finally:
        proxy.close()
    assert (caught.value.status, caught.value.type, caught.value.detail) == (500, "internal-error", "oops")
    assert len(proxy.requests) == 1 and caught.value.attempts == 1
