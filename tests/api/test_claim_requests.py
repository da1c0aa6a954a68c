"""Claims and reports sent again over HTTP (docs/operations.md#outages): a claim repeated with its
``request_id`` by the same worker key answers the same jobs and leases; a report repeated with its lease
token answers as the first did."""

from __future__ import annotations

import pytest


def enqueue(producer, n=1):
    for _ in range(n):
        assert producer.post("/jobs", json={"type": "email"}).status_code == 201


def test_a_claim_sent_again_with_its_request_id_answers_the_same_jobs(producer, worker, keys):
    enqueue(producer, 4)
    first = worker.post("/jobs/claim", json={"limit": 2, "request_id": "claim-1"})
    assert first.status_code == 200 and len(first.json["jobs"]) == 2
    again = worker.post("/jobs/claim", json={"limit": 2, "request_id": "claim-1"})
    assert again.json == first.json  # the same jobs, lease tokens and lease ends
    compact = worker.post("/jobs/claim", json={"request_id": "claim-1"}, headers={"Prefer": "return=minimal"})
    assert compact.json["lease_token"] == first.json["jobs"][0]["lease_token"]
    # Another id claims new jobs; the same id from another worker key is that worker's own claim.
    other = worker.post("/jobs/claim", json={"limit": 2, "request_id": "claim-2"}).json["jobs"]
    assert {j["id"] for j in other}.isdisjoint(j["id"] for j in first.json["jobs"])
    assert keys.worker("worker-2").post("/jobs/claim", json={"request_id": "claim-1"}).status_code == 204
    # Each job was claimed once: its history says so.
    for job in first.json["jobs"]:
        events = producer.get(f"/jobs/{job['id']}/events").json["events"]
        assert [e["event"] for e in events].count("claimed") == 1


@pytest.mark.parametrize(
    "value, message",
    [("", "must be 1 to 64 characters"), ("x" * 65, "must be 1 to 64 characters"), (7, "must be a string")],
)
def test_a_bad_request_id_is_named(worker, value, message):
    answer = worker.post("/jobs/claim", json={"request_id": value})
    assert answer.status_code == 422
    assert answer.json["errors"] == [{"field": "request_id", "message": message}]


def test_a_fail_sent_again_answers_as_the_first_did(producer, worker):
    enqueue(producer)
    held = worker.post("/jobs/claim", json={"request_id": "r"}).json
    body = {"lease_token": held["lease_token"], "error": "boom", "retryable": False}
    first = worker.post(f"/jobs/{held['id']}/fail", json=body)
    assert first.status_code == 200 and first.json["status"] == "failed"
    again = worker.post(f"/jobs/{held['id']}/fail", json=body)
    assert (again.status_code, again.json) == (200, first.json)
    events = producer.get(f"/jobs/{held['id']}/events").json["events"]
    assert [e["event"] for e in events].count("failed") == 1
