"""The client's types stay in step with the API's declarations (queuelog/api/answers.py, jobs.py,
problems.py), and the worker and the client share one job type. No server needed."""

from __future__ import annotations

import inspect
from dataclasses import fields
from datetime import UTC, datetime

import pytest

import queuelog.client
import queuelog.worker
from queuelog.api.answers import EVENT, JOB_FIELDS
from queuelog.api.batches import BATCH, CALLBACK_BODY, MEMBER_BODY
from queuelog.api.batches import LIST_QUERY as BATCH_LIST_QUERY
from queuelog.api.jobs import JOB_BODY, LIST_QUERY
from queuelog.api.problems import TITLES
from queuelog.client import Batch, Client, Job, ServerError
from queuelog.client.errors import MalformedRequest, QueuelogError, from_answer
from queuelog.client.shapes import callback_body, job_body, member_body
from queuelog.wire.job import Event


def test_the_job_has_the_fields_the_api_declares_in_its_order():
    assert [f.name for f in fields(Job) if f.name != "raw"] == list(JOB_FIELDS)
    assert [f.name for f in fields(Event)] == list(EVENT.fields)


def test_the_batch_has_the_fields_the_api_declares_in_its_order():
    assert [f.name for f in fields(Batch) if f.name != "raw"] == list(BATCH.fields)


def test_a_batchs_bodies_take_the_fields_the_api_declares():
    member = set(inspect.signature(job_body).parameters) - {"idempotency_key"} | {"ref"}
    assert member == set(MEMBER_BODY.fields)
    assert set(inspect.signature(callback_body).parameters) == set(CALLBACK_BODY.fields)
    assert list(inspect.signature(Client.list_batches).parameters)[1:] == list(BATCH_LIST_QUERY.fields)
    with pytest.raises(TypeError):
        member_body({"type": "email", "colour": "red"})
    assert member_body({"type": "email", "ref": "a", "depends_on": ["b", 3]}) == {
        "type": "email",
        "depends_on": ["b", 3],
        "ref": "a",
    }


def test_one_job_type_for_the_worker_and_the_client():
    assert queuelog.worker.Job is queuelog.client.Job is Job


def test_a_job_from_a_partial_answer_keeps_what_came():
    """A claim's answer, say, or a newer server's with a field this client does not know."""
    raw = {"id": 5, "type": "email", "payload": {"a": 1}, "retry_count": 2, "max_retries": 3}
    raw |= {"lease_token": "t" * 32, "lease_expires_at": "2031-01-01T00:00:00.000001Z", "colour": "red"}
    job = Job.from_json(raw)
    assert (job.id, job.type, job.payload, job.attempt, job.lease_token) == (
        5,
        "email",
        {"a": 1},
        3,
        "t" * 32,
    )
    assert job.lease_expires_at == datetime(2031, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    assert job.status is None and job.created_at is None and job.raw["colour"] == "red"


def test_enqueue_takes_the_fields_of_a_job_body():
    body = list(inspect.signature(job_body).parameters)
    assert sorted(body) == sorted(JOB_BODY.fields)
    enqueue = list(inspect.signature(Client.enqueue).parameters)[1:]
    assert enqueue == body


def test_list_takes_the_fields_of_the_list_query():
    params = list(inspect.signature(Client.list).parameters)[1:]
    assert params == list(LIST_QUERY.fields)


def test_every_problem_type_has_its_class():
    for slug, title in TITLES.items():
        status = 500 if slug == "internal-error" else 400
        error = from_answer(
            status, {"type": f"/problems/{slug}", "title": title, "status": status, "detail": "x"}
        )
        assert (error.type, error.title, error.detail) == (slug, title, "x")
        if slug == "malformed-json":
            assert type(error) is MalformedRequest  # one class for both kinds of unreadable request
        else:
            assert type(error).slug == slug


def test_unknown_problem_types_and_statuses_fall_back_by_status():
    assert (
        type(from_answer(404, {"type": "https://example.com/gone", "title": "Gone"})).__name__ == "NotFound"
    )
    assert type(from_answer(418, {"type": "/problems/teapot", "title": "I'm a teapot"})) is QueuelogError
    odd = from_answer(599, "")
    assert type(odd) is ServerError and odd.title == "Unknown status" and odd.detail == "(an empty answer)"
