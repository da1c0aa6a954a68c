"""Each method of the producer client against a live server, on both engines."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from queuelog.client import Event, IdempotencyKeyReused, InvalidState, Job, ValidationFailed


def test_enqueue_returns_the_job_typed(served):
    client = served.client()
    before = datetime.now(UTC)
    job = client.enqueue("email", {"to": "ada@example.com"}, priority="medium", max_retries=2)
    assert isinstance(job, Job)
    assert (job.type, job.payload, job.priority, job.status) == (
        "email",
        {"to": "ada@example.com"},
        "medium",
        "pending",
    )
    assert (job.retry_count, job.max_retries, job.attempt, job.result, job.error) == (0, 2, 1, None, None)
    assert job.created_at.tzinfo is not None and before - timedelta(seconds=5) < job.created_at
    assert job.finished is False and job.lease_token is None
    uuid.UUID(job.idempotency_key)  # made up by the client for this call
    assert job.raw["id"] == job.id
    assert client.get(job.id) == job  # the same job, read back


def test_enqueue_defaults_and_start_times(served):
    client = served.client()
    plain = client.enqueue("pdf")
    assert (plain.payload, plain.priority, plain.max_retries) == ({}, "low", 3)

    start = datetime(2031, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=2)))
    aware = client.enqueue("pdf", run_at=start)
    assert aware.available_at == start and aware.available_at.utcoffset() == timedelta(0)
    text = client.enqueue("pdf", run_at="2031-05-06T05:08:09Z")
    assert text.available_at == start
    delayed = client.enqueue("pdf", delay_seconds=3600)
    assert timedelta(minutes=59) < delayed.available_at - delayed.created_at <= timedelta(minutes=61)

    with pytest.raises(ValueError, match="aware"):
        client.enqueue("pdf", run_at=datetime(2031, 5, 6))  # naive: refused before anything is sent
    assert len(client.list()) == 4


def test_an_idempotency_key_of_ones_own(served):
    client = served.client()
    first = client.enqueue("email", {"n": 1}, idempotency_key="order-17")
    again = client.enqueue("email", {"n": 1}, idempotency_key="order-17")
    assert again == first and again.idempotency_key == "order-17"
    with pytest.raises(IdempotencyKeyReused) as caught:
        client.enqueue("email", {"n": 2}, idempotency_key="order-17")
    assert (caught.value.status, caught.value.type, caught.value.title) == (
        422,
        "idempotency-key-reused",
        "Idempotency key reused",
    )
    assert [j.id for j in client.list()] == [first.id]


def test_enqueue_many_in_order(served):
    client = served.client()
    jobs = client.enqueue_many(
        [
            {"type": "email", "payload": {"to": "a@example.com"}},
            {"type": "pdf", "priority": "medium", "run_at": datetime(2031, 1, 1, tzinfo=UTC)},
            {"type": "email", "idempotency_key": "mine"},
        ]
    )
    assert [j.type for j in jobs] == ["email", "pdf", "email"]
    assert jobs[0].payload == {"to": "a@example.com"} and jobs[1].priority == "medium"
    assert jobs[1].available_at == datetime(2031, 1, 1, tzinfo=UTC)
    batch, _, index = jobs[0].idempotency_key.partition("#")
    uuid.UUID(batch)
    assert index == "0" and jobs[1].idempotency_key == f"{batch}#1" and jobs[2].idempotency_key == "mine"
    assert sorted(j.id for j in client.list()) == sorted(j.id for j in jobs)


def test_enqueue_many_is_all_or_nothing(served):
    client = served.client()
    items = [{"type": "email"}, {"type": "pdf"}, {"type": "no-such-type"}, {"type": "email"}]
    with pytest.raises(ValidationFailed) as caught:
        client.enqueue_many(items)
    assert caught.value.status == 422
    assert [e.field for e in caught.value.errors] == ["jobs[2].type"]
    assert "email" in caught.value.errors[0].message  # the message lists the allowed types
    assert len(client.list()) == 0  # nothing was made

    with pytest.raises(TypeError):
        client.enqueue_many([{"type": "email", "colour": "red"}])  # not an argument of enqueue
    assert len(client.list()) == 0


def test_enqueue_many_with_a_batch_key_replays(served):
    client = served.client()
    items = [{"type": "email", "payload": {"n": n}} for n in range(3)]
    first = client.enqueue_many(items, idempotency_key="nightly-2031-01-01")
    again = client.enqueue_many(items, idempotency_key="nightly-2031-01-01")
    assert again == first
    assert [j.idempotency_key for j in first] == [f"nightly-2031-01-01#{i}" for i in range(3)]
    with pytest.raises(IdempotencyKeyReused):
        client.enqueue_many(items[:2] + [{"type": "pdf"}], idempotency_key="nightly-2031-01-01")
    assert len(client.list()) == 3


def test_events_tell_the_history(served):
    client = served.client()
    job = client.enqueue("email")
    client.cancel(job.id)
    events = client.events(job.id)
    assert all(isinstance(e, Event) for e in events)
    assert [e.event for e in events] == ["enqueued", "cancelled"]
    assert events[0].attempt == 0 and events[0].at.tzinfo is not None and events[0].error is None
    assert events[1].actor == job.owner


def test_cancel_a_pending_job_once(served):
    client = served.client()
    job = client.enqueue("email")
    cancelled = client.cancel(job.id)
    assert cancelled.status == "cancelled" and cancelled.finished and cancelled.finished_at is not None
    with pytest.raises(InvalidState) as caught:
        client.cancel(job.id)
    assert (caught.value.status, caught.value.type, caught.value.attempts) == (409, "invalid-state", 1)


def test_list_filters_and_pages(served):
    client = served.client()
    made = [
        client.enqueue("email" if n % 2 else "pdf", priority="medium" if n < 3 else "low") for n in range(7)
    ]
    client.cancel(made[0].id)
    newest_first = [j.id for j in reversed(made)]

    page = client.list(limit=3)
    assert [j.id for j in page] == newest_first[:3] and page.next_cursor
    second = client.list(limit=3, cursor=page.next_cursor)
    assert [j.id for j in second] == newest_first[3:6]
    assert [len(p) for p in client.pages(limit=3)] == [3, 3, 1]
    assert [j.id for j in client.iter_jobs(limit=2)] == newest_first
    assert [j.id for j in client.list(type="email")] == [j.id for j in reversed(made) if j.type == "email"]
    assert [j.id for j in client.list(priority="medium", status="pending")] == [made[2].id, made[1].id]
    assert [j.id for j in client.list(status="cancelled")] == [made[0].id]
    last = client.list(status="cancelled")
    assert last.next_cursor is None

    with pytest.raises(ValidationFailed) as caught:
        client.list(status="sleeping")
    assert [e.field for e in caught.value.errors] == ["status"]


def test_admins_list_everyones_jobs_and_see_errors(served, fake_worker):
    producer = served.client()
    admin = served.client(served.admin_key())
    job = producer.enqueue("sync")
    fake_worker.finish(error="disk full; password=hunter2")
    assert producer.get(job.id).error is None  # producers never see error text
    seen = admin.get(job.id)
    assert seen.status == "failed" and seen.error == "disk full; password=[REDACTED]"
    assert job.id in {j.id for j in admin.iter_jobs(status="failed")}
    assert admin.events(job.id)[-1].error == "disk full; password=[REDACTED]"
