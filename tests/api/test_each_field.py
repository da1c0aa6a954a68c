"""A refused body names each bad field (docs/refusals.md), on both engines: schedules, job types, jobs and
batches, whether the schema, a check beyond it or the queue layer refuses the field; one bad field is
named once and alone; a body of a thousand bad fields gets at most MAX_ERRORS of them, quickly."""

from __future__ import annotations

import time

import pytest

from queuelog.api.problems import MAX_ERRORS

SCHEDULE = {"name": "nightly", "type": "email", "cron": "30 2 * * *"}


def send(caller, method: str, path: str, body):
    return caller.client.open(path, method=method, json=body, headers=caller.headers)


def named(response) -> list[str]:
    assert response.status_code == 422, (response.status_code, response.get_json())
    body = response.get_json()
    assert body["type"] == "/problems/validation-failed"
    fields = [error["field"] for error in body["errors"]]
    for field in fields:  # the detail says each of them too
        assert f"{field}:" in body["detail"] or field in body["detail"], body
    return fields


@pytest.mark.parametrize(
    ("bad", "fields"),
    [
        ({"cron": "61 * * * *", "missed": "never"}, ["cron", "missed"]),
        ({"cron": "61 * * * *", "timezone": "Mars/Olympus_Mons"}, ["cron", "timezone"]),
        ({"priority": "urgent", "cron": "61 * * * *", "timezone": "Nowhere/At_All"}, ["priority", "cron", "timezone"]),
        ({"type": "no-such-type", "max_retries": -1, "missed": 3}, ["type", "max_retries", "missed"]),
        ({"name": "-bad", "interval_seconds": 0, "cron": None, "paused": "yes"}, ["name", "interval_seconds", "paused"]),
        ({"cron": None, "timezone": "Nowhere/At_All", "payload": []}, ["cron", "timezone", "payload"]),
    ],
)  # fmt: skip
def test_a_new_schedule_names_each_bad_field(admin, bad, fields):
    response = send(admin, "POST", "/schedules", {**SCHEDULE, **bad})
    assert sorted(named(response)) == sorted(fields)
    assert admin.get("/schedules").json["schedules"] == []  # nothing was written


def test_a_schedule_change_names_each_bad_field(admin):
    assert send(admin, "POST", "/schedules", SCHEDULE).status_code == 201
    response = send(admin, "PATCH", "/schedules/nightly", {"cron": "61 * * * *", "missed": "never"})
    assert sorted(named(response)) == ["cron", "missed"]
    response = send(admin, "PATCH", "/schedules/nightly", {"timezone": "Nowhere/At_All", "priority": 7})
    assert sorted(named(response)) == ["priority", "timezone"]
    assert admin.get("/schedules/nightly").json["cron"] == "30 2 * * *"


def test_one_bad_field_is_named_alone(admin, producer):
    assert named(send(admin, "POST", "/schedules", {**SCHEDULE, "missed": "never"})) == ["missed"]
    assert named(send(admin, "POST", "/schedules", {**SCHEDULE, "cron": "61 * * * *"})) == ["cron"]
    assert named(send(admin, "PATCH", "/types/email", {"rate_limit": 0})) == ["rate_limit"]
    assert named(producer.post("/jobs", json={"type": "email", "priority": "urgent"})) == ["priority"]


def test_a_type_change_names_each_bad_field(admin):
    response = send(admin, "PATCH", "/types/email", {"concurrency_limit": 0, "rate_limit": 0})
    assert named(response) == ["concurrency_limit", "rate_limit"]
    # a check beyond the schema (3.0 is an integer to JSON Schema, not to the API) is named beside it
    response = send(admin, "PATCH", "/types/email", {"concurrency_limit": 0, "rate_limit": 3.0, "paused": 1})
    assert named(response) == ["paused", "concurrency_limit", "rate_limit"]
    response = send(admin, "PATCH", "/types/email", {"colour": 1, "rate_period": 0, "enabled": "no"})
    assert named(response) == ["colour", "enabled", "rate_period"]
    assert admin.get("/types/email").json["concurrency_limit"] is None


def test_a_new_type_names_each_bad_field(admin):
    response = send(admin, "POST", "/types", {"name": "-bad", "description": 5, "payload_schema": 3})
    assert named(response) == ["name", "description", "payload_schema"]


def test_a_job_names_each_bad_field(producer):
    body = {"type": 5, "priority": "urgent", "max_retries": -1, "colour": 1, "payload": {"a": "\x00"}}
    assert named(producer.post("/jobs", json=body)) == [
        "colour",
        "type",
        "payload",
        "priority",
        "max_retries",
    ]
    # checks beyond the schema: a NUL in the payload and a fractional retry count, together
    body = {"type": "email", "max_retries": 2.0, "payload": {"to": "a\x00b"}}
    assert sorted(named(producer.post("/jobs", json=body))) == ["max_retries", "payload"]


def test_a_batch_names_each_bad_item_and_field(producer):
    jobs = [{"type": "email"}, {"type": "email", "priority": "urgent", "max_retries": -1}, {"type": "email"}]
    jobs.append({"type": 7})
    fields = named(producer.post("/jobs/batch", json={"jobs": jobs}))
    assert fields == ["jobs[1].priority", "jobs[1].max_retries", "jobs[3].type"]
    jobs = [
        {"type": "email", "max_retries": 1.0},
        {"type": "email"},
        {"type": "email", "payload": {"x": "\x00"}},
    ]
    fields = named(producer.post("/jobs/batch", json={"jobs": jobs}))
    assert fields == ["jobs[0].max_retries", "jobs[2].payload"]
    assert producer.get("/jobs").json["jobs"] == []


def test_a_thousand_bad_fields_get_a_short_answer_quickly(admin, producer):
    unknown = {f"field{i}": i for i in range(1000)}
    bad_jobs = [{"type": 1, "priority": 2, "max_retries": "x"} for _ in range(500)]
    fractional = [{"type": "email", "max_retries": 1.5 - 0.5} for _ in range(500)]
    for method, path, caller, body in (
        ("POST", "/jobs", producer, {"type": "email", **unknown}),
        ("POST", "/jobs/batch", producer, {"jobs": bad_jobs}),
        ("POST", "/jobs/batch", producer, {"jobs": fractional}),
        ("POST", "/schedules", admin, {**SCHEDULE, **unknown}),
        ("POST", "/types", admin, {"name": "x", **unknown}),
        ("PATCH", "/types/email", admin, unknown),
    ):
        started = time.perf_counter()
        response = send(caller, method, path, body)
        took = time.perf_counter() - started
        fields = named(response)
        assert len(fields) == MAX_ERRORS, (path, len(fields))
        assert took < 1.0, (path, took)
        assert len(response.data) < 4000, (path, len(response.data))


def test_the_queue_layers_refusals_of_a_job_are_named_beside_the_schemas(admin, producer):
    schema = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
    assert send(admin, "POST", "/types", {"name": "mail", "payload_schema": schema}).status_code == 201
    assert named(producer.post("/jobs", json={"type": "nope", "priority": "urgent"})) == ["priority", "type"]
    body = {"type": "mail", "payload": {"to": 5}, "max_retries": -1}
    assert named(producer.post("/jobs", json=body)) == ["max_retries", "payload.to"]
    body = {"type": "mail", "payload": {"to": "\x00"}, "max_retries": -1}  # the payload's own refusal only
    assert named(producer.post("/jobs", json=body)) == ["payload", "max_retries"]
    jobs = [{"type": "nope"}, {"type": "mail", "priority": "urgent", "payload": {}}, {"type": "email"}]
    fields = named(producer.post("/jobs/batch", json={"jobs": jobs}))
    assert fields == ["jobs[1].priority", "jobs[0].type", "jobs[1].payload"]
    assert producer.get("/jobs").json["jobs"] == []
