"""Report and claim in one request: ``next`` on POST /jobs/{id}/complete and /fail
(docs/api.md#report-and-claim-in-one-request). On both engines."""

from __future__ import annotations

import pytest

from tests.api.test_compact import MINIMAL, WORKER_JOB_KEYS, conforms, document, enqueue, parsed

__all__ = ["document"]  # the fixture


@pytest.fixture
def app_settings():
    return {"RETRY_BACKOFF_BASE": 0}


def claim_one(worker) -> dict:
    response = worker.post("/jobs/claim")
    assert response.status_code == 200, response.json
    return response.json


def history(queue, job_id) -> list[str]:
    return [event.event for event in queue.events(job_id)]


def test_complete_with_next_answers_the_job_and_the_next_ones(producer, worker, document, queue):
    first, second, third = (enqueue(producer, {"n": n}) for n in range(3))
    held = claim_one(worker)
    assert held["id"] == first["id"]
    response = worker.post(
        f"/jobs/{held['id']}/complete",
        json={"lease_token": held["lease_token"], "result": {"ok": 1}, "next": {"limit": 2}},
    )
    assert response.status_code == 200 and "Preference-Applied" not in response.headers
    body = parsed(response)
    assert (body["id"], body["status"], body["result"]) == (first["id"], "completed", {"ok": 1})
    assert [job["id"] for job in body["next"]["jobs"]] == [second["id"], third["id"]]
    assert all(job["status"] == "running" and len(job["lease_token"]) == 32 for job in body["next"]["jobs"])
    assert "error" not in body["next"]["jobs"][0] and "idempotency_key" not in body["next"]["jobs"][0]
    without_next = {key: value for key, value in body.items() if key != "next"}
    assert conforms(document, "Job", without_next) and conforms(document, "ClaimedJobs", body["next"])
    assert history(queue, first["id"]) == ["enqueued", "claimed", "completed"]
    # The jobs handed out are held: their tokens complete them, the old call answers as it always did.
    for job in body["next"]["jobs"]:
        done = worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": job["lease_token"]})
        assert done.status_code == 200 and "next" not in done.json and done.json["status"] == "completed"


def test_compact_answers_carry_worker_jobs(producer, worker, document):
    enqueue(producer, {"n": 0})
    second = enqueue(producer, {"n": 1})
    held = claim_one(worker)
    response = worker.post(
        f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"], "next": {}}, headers=MINIMAL
    )
    assert response.headers["Preference-Applied"] == "return=minimal"
    body = parsed(response)
    assert body["status"] == "completed" and conforms(document, "JobState", body)
    [job] = body["next"]["jobs"]
    assert list(job) == WORKER_JOB_KEYS and job["id"] == second["id"] and job["payload"] == {"n": 1}
    assert conforms(document, "WorkerJobs", body["next"])
    again = worker.post(
        f"/jobs/{job['id']}/complete", json={"lease_token": job["lease_token"], "next": {}}, headers=MINIMAL
    )
    assert parsed(again)["next"] == {"jobs": []}  # nothing left: an empty list, never a 204


def test_fail_with_next_retries_and_may_hand_the_job_out_again(producer, worker, queue):
    job = enqueue(producer, max_retries=1)
    held = claim_one(worker)
    response = worker.post(
        f"/jobs/{job['id']}/fail",
        json={"lease_token": held["lease_token"], "error": "boom", "next": {"types": ["email"]}},
    )
    body = parsed(response)
    assert body["status"] == "pending" and body["retry_count"] == 1
    [again] = body["next"]["jobs"]  # no backoff here (RETRY_BACKOFF_BASE=0): claimable at once
    assert again["id"] == job["id"] and again["lease_token"] != held["lease_token"]
    final = worker.post(
        f"/jobs/{job['id']}/fail",
        json={"lease_token": again["lease_token"], "error": "boom", "retryable": False, "next": {"limit": 3}},
        headers=MINIMAL,
    )
    assert parsed(final)["status"] == "failed" and parsed(final)["next"] == {"jobs": []}
    assert history(queue, job["id"]) == ["enqueued", "claimed", "retry_scheduled", "claimed", "failed"]


def test_a_refused_report_claims_nothing(producer, keys, worker, queue):
    job = enqueue(producer)
    other = enqueue(producer)
    held = claim_one(worker)
    intruder = keys.worker("intruder")
    for path, extra in (("complete", {}), ("fail", {"error": "x"})):
        response = intruder.post(
            f"/jobs/{job['id']}/{path}", json={"lease_token": held["lease_token"], "next": {}, **extra}
        )
        assert response.status_code == 409 and response.mimetype == "application/problem+json"
    missing = worker.post(f"/jobs/{other['id'] + 99}/complete", json={"lease_token": "x" * 32, "next": {}})
    assert missing.status_code == 404
    assert queue.get(other["id"]).status == "pending" and history(queue, other["id"]) == ["enqueued"]
    assert queue.get(job["id"]).status == "running"


@pytest.mark.parametrize(
    "next_, fields",
    [
        ({"limit": 0}, ["next.limit"]),
        ({"limit": 101, "wait_seconds": 21}, ["next.limit", "next.wait_seconds"]),
        ({"wait_seconds": "soon"}, ["next.wait_seconds"]),
        ({"types": []}, ["next.types"]),
        ({"types": ["email", 7]}, ["next.types[1]"]),
        ({"lease_seconds": 1}, ["next.lease_seconds"]),
        ({"limit": 1, "colour": "red"}, ["next.colour"]),
        ([1], ["next"]),
        (None, ["next"]),
    ],
)
def test_bad_next_names_each_bad_field(producer, worker, queue, next_, fields):
    job = enqueue(producer)
    held = claim_one(worker)
    for path, extra in (("complete", {}), ("fail", {"error": "x"})):
        response = worker.post(
            f"/jobs/{job['id']}/{path}", json={"lease_token": held["lease_token"], "next": next_, **extra}
        )
        assert response.status_code == 422 and response.mimetype == "application/problem+json"
        assert [error["field"] for error in response.json["errors"]] == fields
    assert queue.get(job["id"]).status == "running"  # nothing reported, nothing claimed


def test_next_with_a_short_wait_commits_the_report_first(producer, worker, queue):
    job = enqueue(producer)
    held = claim_one(worker)
    response = worker.post(
        f"/jobs/{job['id']}/complete",
        json={"lease_token": held["lease_token"], "next": {"wait_seconds": 0.3}},
    )
    assert response.status_code == 200 and response.json["next"] == {"jobs": []}
    assert queue.get(job["id"]).status == "completed"


def test_the_openapi_document_declares_next(client):
    document = client.get("/openapi.json").get_json()
    schemas = document["components"]["schemas"]
    for body in ("CompleteBody", "FailBody"):
        assert schemas[body]["properties"]["next"] == {"$ref": "#/components/schemas/NextClaim"}
    assert list(schemas["NextClaim"]["properties"]) == [
        "limit",
        "wait_seconds",
        "types",
        "lease_seconds",
        "request_id",
    ]
    for path in ("/jobs/{job_id}/complete", "/jobs/{job_id}/fail"):
        answer = document["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert {"$ref": "#/components/schemas/ReportNext"} in answer["allOf"]


# -- a batch completion that claims next: next on POST /jobs/complete ----------------------------------


def claim_some(worker, limit: int) -> list[dict]:
    response = worker.post("/jobs/claim", json={"limit": limit})
    assert response.status_code == 200, response.json
    return response.json["jobs"]


def items(jobs: list[dict]) -> list[dict]:
    return [{"id": job["id"], "lease_token": job["lease_token"]} for job in jobs]


def test_batch_completion_with_next_answers_each_result_and_the_next_jobs(producer, worker, document, queue):
    made = [enqueue(producer, {"n": n}) for n in range(5)]
    held = claim_some(worker, 2)
    response = worker.post(
        "/jobs/complete", json={"jobs": items(held), "next": {"limit": 2}}, headers=MINIMAL
    )
    assert response.status_code == 200 and response.headers["Preference-Applied"] == "return=minimal"
    body = parsed(response)
    assert body["results"] == [{"id": job["id"], "status": 200} for job in held]
    assert [job["id"] for job in body["next"]["jobs"]] == [made[2]["id"], made[3]["id"]]
    assert all(list(job) == WORKER_JOB_KEYS for job in body["next"]["jobs"])
    assert conforms(document, "CompleteResults", body) and conforms(document, "WorkerJobs", body["next"])
    for job in held:
        assert history(queue, job["id"]) == ["enqueued", "claimed", "completed"]
    for job in body["next"]["jobs"]:
        assert queue.get(job["id"]).status == "running" and history(queue, job["id"]) == [
            "enqueued",
            "claimed",
        ]
    # The jobs handed out complete with their tokens; the next batch claims what is left (one job), and
    # the one after finds nothing more: an empty list, never a 204.
    then = {"limit": 5}
    last = worker.post(
        "/jobs/complete", json={"jobs": items(body["next"]["jobs"]), "next": then}, headers=MINIMAL
    )
    assert [r["status"] for r in parsed(last)["results"]] == [200, 200]
    assert [job["id"] for job in parsed(last)["next"]["jobs"]] == [made[4]["id"]]
    empty = worker.post(
        "/jobs/complete", json={"jobs": items(parsed(last)["next"]["jobs"]), "next": then}, headers=MINIMAL
    )
    assert parsed(empty)["results"] == [{"id": made[4]["id"], "status": 200}] and parsed(empty)["next"] == {
        "jobs": []
    }


def test_batch_completion_with_next_and_whole_answers(producer, worker, document):
    first, second = enqueue(producer, {"n": 0}), enqueue(producer, {"n": 1})
    [held] = claim_some(worker, 1)
    assert held["id"] == first["id"]
    response = worker.post("/jobs/complete", json={"jobs": items([held]), "next": {}})
    assert response.status_code == 200 and "Preference-Applied" not in response.headers
    body = parsed(response)
    [result] = body["results"]
    assert (result["id"], result["status"], result["job"]["status"]) == (first["id"], 200, "completed")
    [job] = body["next"]["jobs"]
    assert job["id"] == second["id"] and job["status"] == "running" and "error" not in job
    assert conforms(document, "CompleteResults", body) and conforms(document, "ClaimedJobs", body["next"])
    without_next = worker.post("/jobs/complete", json={"jobs": items([job])})
    assert "next" not in parsed(without_next)  # the old call answers as it always did


def test_batch_completion_claims_next_whatever_each_items_outcome(producer, keys, worker, queue):
    made = [enqueue(producer, {"n": n}) for n in range(4)]
    held = claim_some(worker, 2)
    sent = [
        {"id": held[0]["id"], "lease_token": held[0]["lease_token"]},
        {"id": held[1]["id"], "lease_token": "0" * 32},
        {"id": made[-1]["id"] + 99, "lease_token": "1" * 32},
    ]
    body = parsed(worker.post("/jobs/complete", json={"jobs": sent, "next": {"limit": 5}}, headers=MINIMAL))
    assert [r["status"] for r in body["results"]] == [200, 409, 404]
    assert body["results"][1]["error"]["type"] == "/problems/not-lease-holder"
    assert [job["id"] for job in body["next"]["jobs"]] == [made[2]["id"], made[3]["id"]]
    assert queue.get(held[1]["id"]).status == "running"  # refused: unchanged, still the worker's
    assert history(queue, held[1]["id"]) == ["enqueued", "claimed"]


@pytest.mark.parametrize(
    "next_, fields",
    [
        ({"limit": 101, "wait_seconds": 21}, ["next.limit", "next.wait_seconds"]),
        ({"types": ["email", 7], "colour": "red"}, ["next.colour", "next.types[1]"]),
        ([1], ["next"]),
    ],
)
def test_bad_next_on_a_batch_completion_names_each_bad_field(producer, worker, queue, next_, fields):
    enqueue(producer)
    other = enqueue(producer)
    [held] = claim_some(worker, 1)
    response = worker.post("/jobs/complete", json={"jobs": items([held]), "next": next_}, headers=MINIMAL)
    assert response.status_code == 422 and response.mimetype == "application/problem+json"
    assert [error["field"] for error in response.json["errors"]] == fields
    assert queue.get(held["id"]).status == "running"  # nothing completed, nothing claimed
    assert queue.get(other["id"]).status == "pending"


def test_batch_next_with_a_short_wait_for_nothing_answers_no_jobs(producer, worker, queue):
    """(The order, completions committed before the wait, is shown over a live server: test_long_poll.)"""
    enqueue(producer)
    [held] = claim_some(worker, 1)
    for headers in (MINIMAL, {}):
        response = worker.post(
            "/jobs/complete", json={"jobs": items([held]), "next": {"wait_seconds": 0.3}}, headers=headers
        )
        assert response.status_code == 200 and parsed(response)["next"] == {"jobs": []}
        assert queue.get(held["id"]).status == "completed"  # the second time: a repeated report


def test_the_openapi_document_declares_next_on_batch_completions(client):
    document = client.get("/openapi.json").get_json()
    body = document["components"]["schemas"]["BatchCompleteBody"]
    assert body["properties"]["next"] == {"$ref": "#/components/schemas/NextClaim"}
    answer = document["paths"]["/jobs/complete"]["post"]["responses"]["200"]["content"]["application/json"]
    assert {"$ref": "#/components/schemas/ReportNext"} in answer["schema"]["allOf"]


def test_a_report_sent_again_with_its_request_id_answers_the_jobs_it_claimed(producer, worker, queue):
    """A worker whose answer was lost sends the report again with the same next.request_id: the report
    answers as the first did, and next answers the jobs the first one leased, for a batch and for one
    job, with whole and compact answers alike."""
    made = [enqueue(producer, {"n": n}) for n in range(8)]
    held = claim_some(worker, 2)
    for headers in (MINIMAL, {}):
        body = {"jobs": items(held), "next": {"limit": 2, "request_id": f"batch-{bool(headers)}"}}
        first, again = (parsed(worker.post("/jobs/complete", json=body, headers=headers)) for _ in range(2))
        assert (
            [r["status"] for r in first["results"]] == [r["status"] for r in again["results"]] == [200, 200]
        )
        ids = [(j["id"], j["lease_token"]) for j in first["next"]["jobs"]]
        assert len(ids) == 2 and [(j["id"], j["lease_token"]) for j in again["next"]["jobs"]] == ids
        held = first["next"]["jobs"]
    [job, other] = held
    body = {"lease_token": job["lease_token"], "next": {"request_id": "one"}}
    first, again = (parsed(worker.post(f"/jobs/{job['id']}/complete", json=body)) for _ in range(2))
    assert first["status"] == again["status"] == "completed"
    assert first["next"]["jobs"] == again["next"]["jobs"] and len(first["next"]["jobs"]) == 1
    leased = {j["id"] for j in first["next"]["jobs"]} | {other["id"]}
    assert {j["id"] for j in made if queue.get(j["id"]).status == "running"} == leased  # none leased twice
