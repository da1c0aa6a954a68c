"""/openapi.json and the API agree (docs/api.md#authentication-and-errors): every body the served schema of an endpoint
accepts is accepted (never 422; the state decides between 200, 201, 204, 404 and 409), and every body it
refuses in one place is 422 naming that place. Answers match their served schemas too.

The bodies are generated from the served document itself (``schema_strategies.py``), on a real app on
SQLite. Where the document describes a rule in words instead of keywords (the enabled job types, payload
text and depth, unique idempotency keys in a batch, unique ids in a batch completion), the valid bodies keep
to it; the long poll is held under 0.05 s to keep the test fast (its bounds are among the violations).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from queuelog import create_app
from tests.api.schema_strategies import Document, depth, size
from tests.conftest import ADMIN_PASSWORD, Keys

EXAMPLES = settings(max_examples=60, deadline=None, database=None)
REF = "#/components/schemas/"


class Contract:
    """One app for the whole module, its served document, an admin's and a worker's key."""

    def __init__(self, app):
        self.app = app
        client = app.test_client()
        keys = Keys(app, client)
        self.admin, self.worker = keys.admin(), keys.worker()
        self.doc = Document(client.get("/openapi.json").get_json())
        self.types = [t.name for t in app.extensions["queuelog"]["queue"].types.all() if t.enabled]

    def schema(self, name: str) -> dict[str, Any]:
        return {"$ref": REF + name}

    def job_body(self) -> dict[str, Any]:
        """JobBody with its type one of the enabled ones, as its description says."""
        body = self.doc.resolve(self.schema("JobBody"))
        return {**body, "properties": {**body["properties"], "type": {"enum": self.types}}}

    def wipe(self) -> None:
        """No jobs: an idempotency key drawn by an earlier example is free again."""
        with self.app.extensions["queuelog"]["db"].engine.begin() as conn:
            conn.execute(text("DELETE FROM job_events"))
            conn.execute(text("DELETE FROM jobs"))

    def held(self) -> dict[str, Any]:
        """A job the worker holds, with its lease_token."""
        assert self.admin.post("/jobs", json={"type": self.types[0]}).status_code == 201
        return self.worker.post("/jobs/claim", json={"types": [self.types[0]]}).get_json()

    def answers(self, path: str, status: int, value: Any) -> None:
        """``value`` matches the schema the document serves for this answer."""
        response = self.doc.document["paths"][path]["post"]["responses"][str(status)]
        schema = next(iter(response["content"].values()))["schema"]
        assert self.doc.validator(schema).is_valid(value), (path, status, value)


@pytest.fixture(scope="module")
def contract(sqlite_backend, tmp_path_factory):
    folder = tmp_path_factory.mktemp("contract")
    settings_ = {"DATABASE_URL": sqlite_backend.fresh_url(folder), "ADMIN_PASSWORD": ADMIN_PASSWORD}
    app = create_app({"TESTING": True, "QUEUELOG": {**settings_, "SECRET_KEY": "test-secret-key"}})
    yield Contract(app)
    app.extensions["queuelog"]["db"].dispose()


def within_described_rules(job: dict[str, Any]) -> bool:
    payload = job.get("payload")
    if job.get("depends_on"):  # "ids of jobs the caller may see": a drawn id names no job here
        return False
    return payload is None or (depth(payload) <= 32 and size(payload) < 60000)


# -- every body the document accepts is accepted --------------------------------------------------


@pytest.mark.slow  # many generated bodies
@EXAMPLES
@given(data=st.data())
def test_valid_job_bodies_are_accepted(contract, data):
    contract.wipe()
    body = data.draw(contract.doc.valid(contract.job_body()))
    assume(within_described_rules(body))
    response = contract.admin.post("/jobs", json=body)
    assert response.status_code == 201, (body, response.get_json())
    contract.answers("/jobs", 201, response.get_json())


@pytest.mark.slow  # many generated batches
@EXAMPLES
@given(data=st.data())
def test_valid_batches_are_accepted(contract, data):
    contract.wipe()
    schema = contract.doc.resolve(contract.schema("BatchBody"))
    jobs = {**schema["properties"]["jobs"], "items": contract.job_body()}
    body = data.draw(contract.doc.valid({**schema, "properties": {"jobs": jobs}}))
    keys = [job["idempotency_key"] for job in body["jobs"] if job.get("idempotency_key") is not None]
    assume(len(keys) == len(set(keys)) and all(map(within_described_rules, body["jobs"])))
    response = contract.admin.post("/jobs/batch", json=body)
    assert response.status_code == 201, (body, response.get_json())
    contract.answers("/jobs/batch", 201, response.get_json())


@EXAMPLES
@given(data=st.data())
def test_valid_claims_are_accepted(contract, data):
    contract.admin.post("/jobs", json={"type": data.draw(st.sampled_from(contract.types))})
    schema = contract.doc.resolve(contract.schema("ClaimBody"))
    wait = {"type": "number", "minimum": 0, "maximum": 0.05}
    body = data.draw(
        contract.doc.valid({**schema, "properties": {**schema["properties"], "wait_seconds": wait}})
    )
    response = contract.worker.post("/jobs/claim", json=body)
    assert response.status_code in (200, 204), (body, response.get_json())
    if body.get("limit") is not None:
        assert response.status_code == 200 and "jobs" in response.get_json()
    if response.status_code == 200:
        contract.answers("/jobs/claim", 200, response.get_json())


@EXAMPLES
@given(data=st.data())
def test_valid_failure_reports_are_accepted(contract, data):
    held = contract.held()
    body = data.draw(contract.doc.valid(contract.schema("FailBody")))
    case = data.draw(st.sampled_from(["holder", "guess", "unknown"]))
    job_id = 4242424242 if case == "unknown" else held["id"]
    if case == "holder":
        body["lease_token"] = held["lease_token"]
    response = contract.worker.post(f"/jobs/{job_id}/fail", json=body)
    assert response.status_code == {"holder": 200, "guess": 409, "unknown": 404}[case], response.get_json()
    if case == "holder":
        contract.answers("/jobs/{job_id}/fail", 200, response.get_json())


@EXAMPLES
@given(data=st.data())
def test_valid_heartbeats_snoozes_and_cancel_reports_are_accepted(contract, data):
    """The running jobs' reports (docs/running-jobs.md): progress on the heartbeat, snoozes, cancellations."""
    action, schema = data.draw(
        st.sampled_from(
            [("heartbeat", "HeartbeatBody"), ("snooze", "SnoozeBody"), ("cancelled", "CancelledBody")]
        )
    )
    held = contract.held()
    if action == "cancelled":
        assert contract.admin.post(f"/jobs/{held['id']}/cancel").status_code == 202
    body = data.draw(contract.doc.valid(contract.schema(schema)))
    case = data.draw(st.sampled_from(["holder", "guess", "unknown"]))
    job_id = 4242424242 if case == "unknown" else held["id"]
    if case == "holder":
        body["lease_token"] = held["lease_token"]
    response = contract.worker.post(f"/jobs/{job_id}/{action}", json=body)
    assert response.status_code == {"holder": 200, "guess": 409, "unknown": 404}[case], response.get_json()
    if case == "holder":
        contract.answers(f"/jobs/{{job_id}}/{action}", 200, response.get_json())


@EXAMPLES
@given(data=st.data())
def test_valid_batch_completions_are_accepted(contract, data):
    held = contract.held()
    body = data.draw(contract.doc.valid(contract.schema("BatchCompleteBody")))
    if data.draw(st.booleans()):
        body["jobs"][0].update(id=held["id"], lease_token=held["lease_token"])
    assume(len({item["id"] for item in body["jobs"]}) == len(body["jobs"]))
    response = contract.worker.post("/jobs/complete", json=body)
    assert response.status_code == 200, (body, response.get_json())
    contract.answers("/jobs/complete", 200, response.get_json())


# -- every body the document refuses is 422, naming the place -------------------------------------


@pytest.mark.parametrize(
    ("path", "schema", "who"),
    [
        ("/jobs", "JobBody", "admin"),
        ("/jobs/batch", "BatchBody", "admin"),
        ("/jobs/claim", "ClaimBody", "worker"),
        ("/jobs/1/fail", "FailBody", "worker"),
        ("/jobs/1/heartbeat", "HeartbeatBody", "worker"),
        ("/jobs/1/complete", "CompleteBody", "worker"),
        ("/jobs/1/snooze", "SnoozeBody", "worker"),
        ("/jobs/1/cancelled", "CancelledBody", "worker"),
        ("/jobs/complete", "BatchCompleteBody", "worker"),
    ],
)
@EXAMPLES
@given(data=st.data())
def test_bodies_the_document_refuses_are_422_naming_the_field(contract, path, schema, who, data):
    ref = contract.schema(schema)
    body = data.draw(contract.doc.valid(ref))
    bad, field = data.draw(contract.doc.violation(ref, body))
    assert not contract.doc.validator(ref).is_valid(bad)  # the document itself refuses it
    caller = getattr(contract, who)
    response = caller.post(path, data=json.dumps(bad), headers={"Content-Type": "application/json"})
    problem = response.get_json()
    assert response.status_code == 422, (bad, problem)
    assert problem["errors"][0]["field"] == (field or "body"), (bad, problem)
    assert contract.doc.validator(contract.schema("Problem")).is_valid(problem)
