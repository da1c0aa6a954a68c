"""The compact answers a worker asks for with ``Prefer: return=minimal`` (RFC 7240), and payloads and results
passed through as the JSON text the database keeps (docs/api.md#compact-answers-for-workers). On both engines."""

from __future__ import annotations

import json

import pytest

from queuelog.api.answers import JOB, JOB_STATE_FIELDS, WORKER_JOB, WORKER_JOB_FIELDS
from queuelog.api.base import _HIDDEN_FROM_ADMINS, _HIDDEN_FROM_OTHERS, _HIDDEN_FROM_OWNERS
from queuelog.api.render import render_json
from queuelog.factory import SECURITY_HEADERS, is_api_path
from tests.api.schema_strategies import Document

MINIMAL = {"Prefer": "return=minimal"}
WORKER_JOB_KEYS = [*WORKER_JOB_FIELDS, "lease_token"]
# Text and numbers that a serializer can get wrong, and that must come back as they went in.
ODD = {
    "text": 'ü ß 漢字 😀 e\u0301 \u2028\u2029 "quoted" back\\slash tab\t newline\n </script><script>alert(1)',
    "": "an empty key",
    "键": {"ключ": ["ü", "</script>"]},
    "numbers": [0, -1, 3.25, -0.5, 0.1, 12345678901234567890123, 1.5e-300, True, False, None],
    "nested": {"a": {"b": {"c": {"d": {"e": [[[[{"f": "deep"}]]]]}}}}},
    "empty": [{}, [], ""],
}


@pytest.fixture
def app_settings():
    return {"RETRY_BACKOFF_BASE": 0}


@pytest.fixture
def document(client) -> Document:
    return Document(client.get("/openapi.json").get_json())


def conforms(document: Document, component: str, value) -> bool:
    return document.validator({"$ref": f"#/components/schemas/{component}"}).is_valid(value)


def enqueue(caller, payload=None, **body):
    response = caller.post("/jobs", json={"type": "email", "payload": payload or {}, **body})
    assert response.status_code == 201, response.json
    return response.json


def parsed(response) -> dict:
    """The answer, read strictly: valid UTF-8 JSON with no NaN or Infinity, ending with a newline."""
    assert response.mimetype == "application/json"
    assert response.data.endswith(b"\n")

    def refuse(name):
        raise AssertionError(f"{name} in an answer")

    return json.loads(response.data.decode("utf-8"), parse_constant=refuse)


# -- claims -------------------------------------------------------------------------------------------


def test_a_minimal_claim_answers_what_a_worker_needs(producer, worker, document):
    job = enqueue(producer, {"to": "ada"}, priority="medium", max_retries=2)
    response = worker.post("/jobs/claim", headers=MINIMAL)
    assert response.status_code == 200 and response.headers["Preference-Applied"] == "return=minimal"
    claimed = parsed(response)
    assert list(claimed) == WORKER_JOB_KEYS
    assert conforms(document, "WorkerJob", claimed)
    whole = worker.get(f"/jobs/{job['id']}").json  # the holder may read it whole
    assert {key: whole[key] for key in WORKER_JOB_FIELDS} == {key: claimed[key] for key in WORKER_JOB_FIELDS}
    assert claimed["payload"] == {"to": "ada"} and claimed["priority"] == "medium"
    assert len(claimed["lease_token"]) == 32 and claimed["lease_expires_at"].endswith("Z")
    done = worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": claimed["lease_token"]})
    assert done.status_code == 200  # the token a minimal claim gave is the lease's


def test_a_minimal_batch_claim_lists_worker_jobs(producer, worker, document):
    for n in range(3):
        enqueue(producer, {"n": n})
    response = worker.post("/jobs/claim", json={"limit": 2}, headers=MINIMAL)
    body = parsed(response)
    assert response.headers["Preference-Applied"] == "return=minimal"
    assert conforms(document, "WorkerJobs", body)
    assert [j["payload"] for j in body["jobs"]] == [{"n": 0}, {"n": 1}]
    assert all(list(j) == WORKER_JOB_KEYS for j in body["jobs"])
    empty = worker.post("/jobs/claim", json={"limit": 5, "types": ["pdf"]}, headers=MINIMAL)
    assert parsed(empty) == {"jobs": []}
    assert worker.post("/jobs/claim", json={"types": ["pdf"]}, headers=MINIMAL).status_code == 204


def test_without_the_preference_a_claim_answers_the_whole_job(producer, worker):
    job = enqueue(producer, {"to": "ada"})
    response = worker.post("/jobs/claim")
    assert "Preference-Applied" not in response.headers
    claimed = parsed(response)
    assert list(claimed) == [k for k in JOB.fields if k not in ("idempotency_key", "error")]
    assert claimed["id"] == job["id"] and claimed["status"] == "running" and claimed["owner"] == "alice"


@pytest.mark.parametrize(
    "headers, minimal",
    [
        ({"Prefer": "return=minimal"}, True),
        ({"Prefer": "RETURN = Minimal"}, True),
        ({"Prefer": 'return="minimal"'}, True),
        ({"Prefer": "respond-async, wait=5, return=minimal; x=y"}, True),
        ({"Prefer": "return=representation"}, False),
        ({"Prefer": "return=representation, return=minimal"}, False),  # the first counts (RFC 7240)
        ({"Prefer": "handling=lenient"}, False),
        ({"Prefer": "returns=minimal"}, False),
        ({}, False),
    ],
)
def test_how_the_preference_is_read(producer, worker, headers, minimal):
    enqueue(producer)
    response = worker.post("/jobs/claim", headers=headers)
    assert ("Preference-Applied" in response.headers) is minimal
    assert (set(parsed(response)) == set(WORKER_JOB_KEYS)) is minimal


def test_two_prefer_lines_count_as_one_list(producer, worker):
    """A server hands two ``Prefer`` lines to the app joined by a comma, as WSGI does."""
    enqueue(producer)
    environ = {"HTTP_PREFER": "respond-async,return=minimal"}
    response = worker.post("/jobs/claim", environ_overrides=environ)
    assert response.headers["Preference-Applied"] == "return=minimal"


# -- reports ------------------------------------------------------------------------------------------


def test_a_minimal_batch_completion_answers_ids_and_statuses(producer, worker, document):
    a, b = enqueue(producer), enqueue(producer)
    held = worker.post("/jobs/claim", json={"limit": 2}).json["jobs"]
    items = [
        {"id": held[0]["id"], "lease_token": held[0]["lease_token"], "result": {"ok": 1}},
        {"id": held[1]["id"], "lease_token": "0" * 32},
        {"id": 999999, "lease_token": "0" * 32},
    ]
    response = worker.post("/jobs/complete", json={"jobs": items}, headers=MINIMAL)
    assert response.headers["Preference-Applied"] == "return=minimal"
    body = parsed(response)
    assert conforms(document, "CompleteResults", body)
    assert body["results"][0] == {"id": a["id"], "status": 200}
    assert body["results"][1]["id"] == b["id"] and body["results"][1]["status"] == 409
    assert body["results"][1]["error"]["type"] == "/problems/not-lease-holder"
    assert body["results"][2]["status"] == 404
    assert producer.get(f"/jobs/{a['id']}").json["result"] == {"ok": 1}


def test_a_whole_batch_completion_carries_each_job(producer, worker):
    enqueue(producer)
    [held] = worker.post("/jobs/claim", json={"limit": 1}).json["jobs"]
    items = [{"id": held["id"], "lease_token": held["lease_token"], "result": {"ok": 1}}]
    [result] = parsed(worker.post("/jobs/complete", json={"jobs": items}))["results"]
    assert list(result) == ["id", "status", "job"]
    assert result["job"]["status"] == "completed" and result["job"]["result"] == {"ok": 1}


def test_minimal_reports_answer_where_the_job_stands(producer, worker, document):
    first, second = enqueue(producer, max_retries=1), enqueue(producer)
    held = {j["id"]: j["lease_token"] for j in worker.post("/jobs/claim", json={"limit": 2}).json["jobs"]}
    token = held[first["id"]]
    beat = worker.post(f"/jobs/{first['id']}/heartbeat", json={"lease_token": token}, headers=MINIMAL)
    state = parsed(beat)
    assert beat.headers["Preference-Applied"] == "return=minimal" and list(state) == list(JOB_STATE_FIELDS)
    assert conforms(document, "JobState", state)
    assert state["status"] == "running" and state["lease_expires_at"].endswith("Z")
    failed = worker.post(
        f"/jobs/{first['id']}/fail", json={"lease_token": token, "error": "smtp down"}, headers=MINIMAL
    )
    state = parsed(failed)
    assert (state["status"], state["retry_count"], state["max_retries"]) == ("pending", 1, 1)
    assert state["lease_expires_at"] is None and state["available_at"].endswith("Z")
    done = worker.post(
        f"/jobs/{second['id']}/complete", json={"lease_token": held[second["id"]]}, headers=MINIMAL
    )
    assert parsed(done) == {**parsed(done), "id": second["id"], "status": "completed"}
    assert list(parsed(done)) == list(JOB_STATE_FIELDS)
    refused = worker.post(f"/jobs/{second['id']}/complete", json={"lease_token": "0" * 32}, headers=MINIMAL)
    assert refused.status_code == 409 and refused.mimetype == "application/problem+json"


# -- stored JSON, passed through ---------------------------------------------------------------------


def test_odd_json_comes_back_as_it_went_in_from_every_answer(producer, admin, worker, app):
    job = enqueue(producer, ODD)
    assert job["payload"] == ODD
    assert parsed(producer.get(f"/jobs/{job['id']}"))["payload"] == ODD
    assert parsed(producer.get("/jobs"))["jobs"][0]["payload"] == ODD
    batch = producer.post("/jobs/batch", json={"jobs": [{"type": "email", "payload": ODD}]})
    assert parsed(batch)["jobs"][0]["payload"] == ODD
    minimal = parsed(worker.post("/jobs/claim", headers=MINIMAL))
    assert minimal["payload"] == ODD
    whole = parsed(worker.post("/jobs/claim", json={"limit": 1}))["jobs"][0]
    assert whole["payload"] == ODD
    body = {"lease_token": minimal["lease_token"], "result": ODD}
    assert parsed(worker.post(f"/jobs/{minimal['id']}/complete", json=body))["result"] == ODD
    items = [{"id": whole["id"], "lease_token": whole["lease_token"], "result": ODD}]
    assert parsed(worker.post("/jobs/complete", json={"jobs": items}))["results"][0]["job"]["result"] == ODD
    assert parsed(admin.get(f"/jobs/{minimal['id']}"))["result"] == ODD
    text = producer.get(f"/jobs/{job['id']}").data.decode()
    assert "</script>" in text and "😀" in text  # as JSON has them: no escapes needed, none added


def test_a_job_answer_reads_as_its_declared_shape(producer, admin, worker, queue):
    """The text written field by field (render.py) is, as JSON, ``Shape.render``'s dict: the same keys in
    the same order, the same values, for each kind of caller."""
    job = enqueue(producer, ODD, idempotency_key="k-1")
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": 'a "b" \\ ü'})
    record = queue.get(job["id"])
    in_a_batch = record._replace(batch_id=2**40 + 1, progress_percent=40)  # the nullable numbers, set
    for shape, each in ((JOB, record), (JOB, in_a_batch), (WORKER_JOB, record), (WORKER_JOB, in_a_batch)):
        for omit in (_HIDDEN_FROM_ADMINS, _HIDDEN_FROM_OWNERS, _HIDDEN_FROM_OTHERS, frozenset()):
            text = render_json(shape, each, omit)
            assert list(json.loads(text).items()) == list(shape.render(each, omit).items())
    assert json.loads(render_json(WORKER_JOB, in_a_batch))["batch_id"] == 2**40 + 1
    assert json.loads(render_json(WORKER_JOB, record))["batch_id"] is None
    assert parsed(admin.get(f"/jobs/{job['id']}")) == JOB.render(record, _HIDDEN_FROM_ADMINS)
    assert parsed(producer.get(f"/jobs/{job['id']}")) == JOB.render(record, _HIDDEN_FROM_OWNERS)


# -- the rest of a request -----------------------------------------------------------------------------


def test_the_api_opens_no_cookie_session_and_the_pages_still_do(app, client, producer):
    api_routes = [rule.rule for rule in app.url_map.iter_rules() if rule.endpoint.startswith("api.")]
    assert api_routes and all(is_api_path(app, route) for route in api_routes)
    page = client.get("/login")
    assert page.status_code == 200 and "session=" in page.headers.get("Set-Cookie", "")
    cookie = page.headers["Set-Cookie"].split(";")[0]
    for response in (
        producer.get("/jobs", headers={"Cookie": cookie}),
        producer.post("/jobs", json={"type": "nope"}, headers={"Cookie": cookie}),
        client.get("/healthz", headers={"Cookie": cookie}),
    ):
        assert "Set-Cookie" not in response.headers, response.status_code


def test_every_answer_still_carries_the_security_headers(client, producer):
    expected = {name: value for name, value in SECURITY_HEADERS}
    for response in (producer.get("/jobs"), client.get("/jobs"), client.get("/login")):
        assert {name: response.headers.get(name) for name in expected} == expected
    static = client.get("/static/style.css")
    static.close()  # a file response: let go of the file
    assert static.status_code == 200 and static.headers.get("Cache-Control") != "no-store"
    assert static.headers["X-Content-Type-Options"] == "nosniff"
