"""``Client.wait`` against a live server on both engines: a worker (over HTTP) finishes the job while the
client polls; failures and cancellations are raised with the job; the timeout is kept."""

from __future__ import annotations

import time

import pytest

from queuelog.client import JobCancelled, JobFailed, QueuelogError, WaitTimeout
from tests.client.conftest import RESERVED_TYPE
from tests.client.proxy import FlakyProxy


def test_wait_returns_the_completed_job(served, fake_worker):
    client = served.client()
    job = client.enqueue(RESERVED_TYPE, {"n": 1})
    fake_worker.later(0.5, result={"synced": 7})
    done = client.wait(job.id, timeout=30)
    assert (done.id, done.status, done.result) == (job.id, "completed", {"synced": 7})
    assert done.finished and done.finished_at >= done.created_at


def test_wait_on_a_job_already_done_answers_at_once(served, fake_worker):
    client = served.client()
    job = client.enqueue(RESERVED_TYPE)
    fake_worker.finish(result={"ok": True})
    started = time.monotonic()
    assert client.wait(job.id, timeout=0).result == {"ok": True}
    assert time.monotonic() - started < 1


def test_wait_raises_a_failure_with_the_job(served, fake_worker):
    admin = served.client(served.admin_key())
    job = admin.enqueue(RESERVED_TYPE, max_retries=0)
    fake_worker.later(0.3, error="Traceback ...\nRuntimeError: upstream said 503")
    with pytest.raises(JobFailed) as caught:
        admin.wait(job.id, timeout=30)
    error = caught.value
    assert isinstance(error, QueuelogError) and error.status is None
    assert error.job.id == job.id and error.job.status == "failed"
    assert error.detail == f"job {job.id} failed after 1 attempt(s): RuntimeError: upstream said 503"
    assert error.job.error.endswith("RuntimeError: upstream said 503")


def test_a_producer_waiting_on_a_failure_sees_no_error_text(served, fake_worker):
    client = served.client()
    job = client.enqueue(RESERVED_TYPE, max_retries=0)
    fake_worker.finish(error="password=hunter2")
    with pytest.raises(JobFailed) as caught:
        client.wait(job.id, timeout=5)
    assert caught.value.job.error is None and caught.value.detail == f"job {job.id} failed after 1 attempt(s)"


def test_wait_raises_a_cancellation(served):
    client = served.client()
    job = client.enqueue("email", delay_seconds=3600)
    client.cancel(job.id)
    with pytest.raises(JobCancelled) as caught:
        client.wait(job.id, timeout=5)
    assert caught.value.job.status == "cancelled"


def test_wait_times_out_polling_less_and_less_often(served):
    key = served.producer_key()
    client = served.client(key)
    job = client.enqueue("email", delay_seconds=3600)  # no worker will take it within the test
    proxy = FlakyProxy(served.port)
    try:
        polling = served.client(key, url=proxy.url)
        started = time.monotonic()
        with pytest.raises(WaitTimeout) as caught:
            polling.wait(job.id, timeout=2, interval=0.1, max_interval=1)
        elapsed = time.monotonic() - started
    finally:
        proxy.close()
    assert caught.value.job.status == "pending" and caught.value.job.id == job.id
    assert f"job {job.id} is still pending after 2s" == caught.value.detail
    assert 2 <= elapsed < 3.5
    # At 0, 0.1, 0.25, 0.48, 0.81, 1.31 and 2 s (the last as the time runs out): 7 polls, where a fixed
    # 0.1 s would have made 21.
    assert 6 <= len(proxy.requests) <= 8
    client.cancel(job.id)
