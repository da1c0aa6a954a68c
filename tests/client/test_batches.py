"""The client's dependencies and batches (docs/client.md#dependencies-and-batches) against a live server on
both engines: ``depends_on`` on enqueue, ``batch`` with refs and callbacks, ``get_batch``, ``list_batches``,
``cancel_batch``, ``retry_batch``, ``wait_batch`` and its timeout, and the refusals naming the item."""

from __future__ import annotations

import time

import pytest

from queuelog.client import Batch, BatchWaitTimeout, Forbidden, NotFound, ValidationFailed
from tests.client.conftest import RESERVED_TYPE


def test_enqueue_with_dependencies_waits_and_shows_them(served, fake_worker):
    client = served.client()
    first = client.enqueue(RESERVED_TYPE)
    second = client.enqueue("email", depends_on=[first.id], on_dependency_failure="run")
    assert (second.status, second.depends_on, second.waiting_on) == ("waiting", [first.id], [first.id])
    assert first.depends_on == [] and first.waiting_on == [] and first.batch_id is None
    fake_worker.finish(error="boom")
    again = client.get(second.id)
    assert (again.status, again.waiting_on) == ("pending", [])  # "run": it runs whatever the outcome
    client.cancel(second.id)


def test_a_batch_with_refs_runs_in_order_and_calls_back_once(served, fake_worker):
    client = served.client()
    batch = client.batch(
        [
            {"type": RESERVED_TYPE, "payload": {"step": 1}, "ref": "one"},
            {"type": RESERVED_TYPE, "payload": {"step": 2}, "depends_on": ["one"]},
        ],
        on_success={"type": "email", "payload": {"to": "ada@example.com"}},
        on_finish={"type": "email", "payload": {"done": True}},
        description="two steps",
    )
    assert isinstance(batch, Batch)
    assert (batch.status, batch.total, batch.description, batch.finished) == (
        "running",
        2,
        "two steps",
        False,
    )
    first, second = batch.jobs
    assert client.get(second).status == "waiting" and client.get(second).batch_id == batch.id
    assert batch.counts.get("pending") == 1 and batch.counts.get("waiting") == 1 and batch.done == 0
    fake_worker.later(0.2)
    fake_worker.later(0.6)
    done = client.wait_batch(batch.id, timeout=30)
    assert (done.status, done.done, done.finished) == ("succeeded", 2, True)
    assert done.counts.get("completed") == 2 and done.finished_at is not None
    callbacks = [client.get(done.on_success_job), client.get(done.on_finish_job)]
    assert [c.type for c in callbacks] == ["email", "email"]
    assert all(c.batch_id == batch.id and c.status == "pending" for c in callbacks)
    found = [j.id for j in client.iter_jobs(batch_id=batch.id)]  # the members and the callbacks
    assert found == sorted([first, second, done.on_success_job, done.on_finish_job], reverse=True)
    for job in callbacks:
        client.cancel(job.id)


def test_wait_batch_returns_a_batch_with_failures_and_times_out_with_the_batch(served, fake_worker):
    client = served.client()
    batch = client.batch(
        [{"type": RESERVED_TYPE, "max_retries": 0}, {"type": "email", "delay_seconds": 3600}]
    )
    started = time.monotonic()
    with pytest.raises(BatchWaitTimeout) as caught:
        client.wait_batch(batch.id, timeout=0.5)
    assert 0.5 <= time.monotonic() - started < 5
    assert caught.value.batch.id == batch.id and caught.value.batch.status == "running"
    assert "0 of 2 jobs finished" in caught.value.detail
    fake_worker.finish(error="boom")
    cancelled = client.cancel_batch(batch.id)
    assert cancelled.id == batch.id
    done = client.wait_batch(batch.id, timeout=5)
    assert done.status == "finished_with_failures"
    assert done.counts.get("failed") == 1 and done.counts.get("cancelled") == 1


def test_list_batches_pages_newest_first_and_retry_is_for_admins(served):
    client = served.client()
    made = [client.batch([{"type": "email", "delay_seconds": 3600}]) for _ in range(3)]
    page = client.list_batches(limit=2)
    assert [b.id for b in page] == [made[2].id, made[1].id] and page.next_cursor and len(page) == 2
    rest = client.list_batches(limit=2, cursor=page.next_cursor)
    assert [b.id for b in rest] == [made[0].id] and rest.next_cursor is None
    assert [b.id for b in client.list_batches(status="succeeded")] == []
    client.cancel_batch(made[0].id)
    with pytest.raises(Forbidden):
        client.retry_batch(made[0].id)
    admin = served.client(served.admin_key())
    again = admin.retry_batch(made[0].id)
    assert again.status == "running" and again.counts.get("pending") == 1
    for batch in made:
        client.cancel_batch(batch.id)


def test_another_producers_batch_is_not_found(served):
    mine = served.client().batch([{"type": "email", "delay_seconds": 3600}])
    other = served.client()
    with pytest.raises(NotFound):
        other.get_batch(mine.id)
    with pytest.raises(NotFound):
        other.cancel_batch(mine.id)
    with pytest.raises(ValidationFailed) as caught:  # another's job is no job to depend on
        other.enqueue("email", depends_on=[mine.jobs[0]])
    assert [e.field for e in caught.value.errors] == ["depends_on[0]"]


def test_a_refused_batch_names_the_item_and_makes_nothing(served):
    client = served.client()
    before = len(client.list_batches())
    with pytest.raises(ValidationFailed) as caught:
        client.batch([{"type": "email", "ref": "a"}, {"type": "email", "depends_on": ["nowhere"]}])
    assert [e.field for e in caught.value.errors] == ["jobs[1].depends_on[0]"]
    with pytest.raises(ValidationFailed) as caught:
        client.batch([{"type": "email"}], on_success={"type": "no-such-type"})
    assert [e.field for e in caught.value.errors] == ["on_success.type"]
    assert len(client.list_batches()) == before


def test_the_same_idempotency_key_finds_the_same_batch(served):
    client = served.client()
    jobs = [{"type": "email", "delay_seconds": 3600}]
    first = client.batch(jobs, idempotency_key="nightly-2026-12-03")
    again = client.batch(jobs, idempotency_key="nightly-2026-12-03")
    assert again.id == first.id and again.jobs == first.jobs
    client.cancel_batch(first.id)
