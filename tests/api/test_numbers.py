"""Numbers in payloads and results: what a round trip through the JSON API gives, the same on SQLite and on
PostgreSQL (whose jsonb keeps no negative zero), and a number that would silently read as 0 (``1e-400``)
refused by name. Every test runs on both engines when PostgreSQL's URL is set (the ``backend`` fixture)."""

from __future__ import annotations

import json
import math
import re

import pytest

# Sent as text, so that the test decides exactly what goes on the wire.
SENT = '{"neg_zero": -0.0, "neg_zero_exp": -0e5, "int_neg_zero": -0, "tiny_but_kept": 5e-324, "half": 0.5, "big_int": 123456789012345678901234567890, "small": -2.5e-300, "zero": 0e-400, "list": [-0.0, 1.0]}'
EXPECTED = {
    "neg_zero": 0.0,
    "neg_zero_exp": 0.0,
    "int_neg_zero": 0,
    "tiny_but_kept": 5e-324,
    "half": 0.5,
    "big_int": 123456789012345678901234567890,
    "small": -2.5e-300,
    "zero": 0.0,
    "list": [0.0, 1.0],
}


def post_raw(caller, url: str, text: str):
    return caller.post(url, data=text, headers={"Content-Type": "application/json"})


def no_negative_zero(value) -> bool:
    if isinstance(value, dict):
        return all(no_negative_zero(v) for v in value.values())
    if isinstance(value, list):
        return all(no_negative_zero(v) for v in value)
    return not (isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0)


def test_a_payload_and_a_result_come_back_with_the_same_numbers_on_every_engine(producer, worker):
    created = post_raw(producer, "/jobs", f'{{"type": "email", "payload": {SENT}}}')
    assert created.status_code == 201, created.get_json()
    job_id = created.get_json()["id"]
    held = worker.post("/jobs/claim").get_json()
    assert held["id"] == job_id
    done = post_raw(
        worker, f"/jobs/{job_id}/complete", f'{{"lease_token": "{held["lease_token"]}", "result": {SENT}}}'
    )
    assert done.status_code == 200, done.get_json()
    answer = producer.get(f"/jobs/{job_id}")
    for value in (answer.get_json()["payload"], answer.get_json()["result"], held["payload"]):
        assert value == EXPECTED and no_negative_zero(value)
    assert not re.search(r"-0(\.0+)?\b(?!\.?[0-9])", answer.get_data(as_text=True))  # no "-0.0" on the wire


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ('{"a": 1e-400}', "payload.a"),
        ('{"a": [1, -1.5E-400]}', "payload.a[1]"),
        ('{"deep": {"x": [{"y": 0.1e-399}]}}', "payload.deep.x[0].y"),
    ],
)
def test_a_number_that_would_read_as_zero_is_refused_by_name(producer, payload, field):
    before = producer.get("/jobs").get_json()["jobs"]
    refused = post_raw(producer, "/jobs", f'{{"type": "email", "payload": {payload}}}')
    assert refused.status_code == 422
    assert refused.get_json()["errors"] == [
        {
            "field": field,
            "message": "is a number too close to 0 for a 64-bit float (such as 1e-400); write 0 if 0 is meant",
        }
    ]
    assert producer.get("/jobs").get_json()["jobs"] == before


def test_a_batch_and_a_result_name_their_own_place(producer, worker):
    refused = post_raw(
        producer, "/jobs/batch", '{"jobs": [{"type": "email"}, {"type": "email", "payload": {"n": 1e-999}}]}'
    )
    assert refused.status_code == 422 and refused.get_json()["errors"][0]["field"] == "jobs[1].payload.n"
    producer.post("/jobs", json={"type": "email"})
    held = worker.post("/jobs/claim").get_json()
    url = f"/jobs/{held['id']}/complete"
    body = f'{{"lease_token": "{held["lease_token"]}", "result": {{"mean": 3e-500}}}}'
    refused = post_raw(worker, url, body)
    assert refused.status_code == 422 and refused.get_json()["errors"][0]["field"] == "result.mean"
    assert worker.get(f"/jobs/{held['id']}").get_json()["status"] == "running"


def test_the_submit_page_says_it_beside_the_payload(producer_browser, queue):
    page = producer_browser.submit(
        "/submit", type="email", payload='{"rate": 1e-400}', priority="low", max_retries="3"
    )
    assert page.status_code == 422
    assert (
        'id="payload-error">payload.rate is a number too close to 0 to be kept (such as 1e-400); write 0 if 0 is meant.<'
        in page.get_data(as_text=True)
    )
    ok = producer_browser.submit(
        "/submit", type="email", payload='{"rate": -0.0}', priority="low", max_retries="3"
    )
    assert ok.status_code == 302
    [job] = queue.engine.list_jobs()
    assert json.loads(job.payload) == {"rate": 0.0} and "-" not in job.payload
