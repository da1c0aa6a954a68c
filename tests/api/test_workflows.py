"""Workflows through the JSON API (docs/workflows.md): depends_on on POST /jobs and /jobs/batch, the
batches' endpoints, who may do what, and the 422s that name each field."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest


def claim(worker, n=1):
    answer = worker.post("/jobs/claim", json={"limit": n})
    assert answer.status_code == 200
    return answer.json["jobs"]


def complete(worker, job):
    answer = worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": job["lease_token"]})
    assert answer.status_code == 200, answer.json
    return answer.json


def test_a_plain_job_shows_no_dependencies(producer, served):
    job = producer.post("/jobs", json={"type": "email"}).json
    assert (job["depends_on"], job["waiting_on"], job["batch_id"]) == ([], [], None)
    served("/jobs", "post", 201, job)


def test_depends_on_makes_a_waiting_job_released_by_its_last_dependency(producer, worker, served):
    a = producer.post("/jobs", json={"type": "email"}).json
    b = producer.post("/jobs", json={"type": "email"}).json
    c = producer.post("/jobs", json={"type": "email", "depends_on": [a["id"], b["id"]]})
    assert c.status_code == 201
    c = c.json
    served("/jobs", "post", 201, c)
    assert (c["status"], c["depends_on"], c["waiting_on"]) == (
        "waiting",
        [a["id"], b["id"]],
        [a["id"], b["id"]],
    )
    held = claim(worker, 5)
    assert sorted(j["id"] for j in held) == [a["id"], b["id"]]
    complete(worker, held[0])
    assert producer.get(f"/jobs/{c['id']}").json["waiting_on"] == [held[1]["id"]]
    complete(worker, held[1])
    now = producer.get(f"/jobs/{c['id']}").json
    assert (now["status"], now["waiting_on"]) == ("pending", [])
    assert [e["event"] for e in producer.get(f"/jobs/{c['id']}/events").json["events"]] == [
        "enqueued",
        "released",
    ]
    assert [j["id"] for j in producer.get("/jobs?status=pending").json["jobs"]] == [c["id"]]


def test_waiting_appears_in_filters_and_a_waiting_job_can_be_cancelled(producer, admin):
    a = producer.post("/jobs", json={"type": "email"}).json
    c = producer.post("/jobs", json={"type": "email", "depends_on": [a["id"]]}).json
    assert [j["id"] for j in producer.get("/jobs?status=waiting").json["jobs"]] == [c["id"]]
    cancelled = producer.post(f"/jobs/{c['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json["status"] == "cancelled"
    doc = admin.get("/openapi.json").json
    assert "waiting" in doc["components"]["schemas"]["Job"]["properties"]["status"]["enum"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"depends_on": [1, 2, 3, 999999]}, "depends_on[3]"),
        ({"depends_on": ["x"]}, "depends_on[0]"),
        ({"depends_on": list(range(1, 102))}, "depends_on"),
        ({"depends_on": []}, "depends_on"),
        ({"on_dependency_failure": "maybe"}, "on_dependency_failure"),
    ],
)
def test_bad_dependencies_are_422_naming_the_field_and_write_nothing(producer, admin, body, field):
    for _ in range(3):
        producer.post("/jobs", json={"type": "email"})
    before = len(admin.get("/jobs").json["jobs"])
    answer = producer.post("/jobs", json={"type": "email", **body})
    assert answer.status_code == 422, answer.json
    assert answer.json["errors"][0]["field"] == field
    assert len(admin.get("/jobs").json["jobs"]) == before


def test_duplicate_dependencies_and_another_users_job_are_refused(producer, keys):
    bob = keys.producer("bob")
    mine = producer.post("/jobs", json={"type": "email"}).json["id"]
    theirs = bob.post("/jobs", json={"type": "email"}).json["id"]
    twice = producer.post("/jobs", json={"type": "email", "depends_on": [mine, mine]})
    assert twice.status_code == 422 and twice.json["errors"][0]["field"] == "depends_on[1]"
    other = producer.post("/jobs", json={"type": "email", "depends_on": [mine, theirs]})
    assert other.status_code == 422 and other.json["errors"][0]["field"] == "depends_on[1]"
    in_batch = producer.post(
        "/jobs/batch", json={"jobs": [{"type": "email"}, {"type": "email", "depends_on": [theirs]}]}
    )
    assert in_batch.status_code == 422 and in_batch.json["errors"][0]["field"] == "jobs[1].depends_on[0]"


def test_each_missing_dependency_is_named_and_nothing_is_written(producer, keys, admin):
    """Every dependency that does not exist or is another's is named, in each job of the request, not the
    first alone; the request writes nothing (neither jobs nor the found dependency's dependents)."""
    theirs = keys.producer("bob").post("/jobs", json={"type": "email"}).json["id"]
    mine = producer.post("/jobs", json={"type": "email"}).json["id"]
    before = admin.get("/jobs", query_string={"limit": 200}).json["jobs"]
    one = producer.post("/jobs", json={"type": "email", "depends_on": [999999, mine, theirs]})
    assert one.status_code == 422
    assert [(e["field"], e["message"]) for e in one.json["errors"]] == [
        ("depends_on[0]", "job 999999 does not exist"),
        ("depends_on[2]", f"job {theirs} does not exist"),
    ]
    jobs = [
        {"type": "email", "depends_on": [999999]},
        {"type": "email", "ref": "a"},
        {"type": "email", "depends_on": [mine, 999998, "a"]},
    ]
    expected = ["jobs[0].depends_on[0]", "jobs[2].depends_on[1]"]
    plain = [{k: v for k, v in job.items() if k != "ref"} for job in jobs]
    plain[2]["depends_on"] = [mine, 999998]
    for path, body in (("/jobs/batch", {"jobs": plain}), ("/batches", {"jobs": jobs})):
        answer = producer.post(path, json=body)
        assert answer.status_code == 422, answer.json
        assert [e["field"] for e in answer.json["errors"]] == expected, path
    keyed = [{**job, "idempotency_key": f"k{i}"} for i, job in enumerate(plain)]  # one job at a time
    answer = producer.post("/jobs/batch", json={"jobs": keyed})
    assert [e["field"] for e in answer.json["errors"]] == expected
    assert admin.get("/jobs", query_string={"limit": 200}).json["jobs"] == before
    claimed = keys.worker("w").post("/jobs/claim", json={"limit": 10}).json["jobs"]
    assert sorted(job["id"] for job in claimed) == sorted([theirs, mine])  # no job of the refused requests


def test_admin_depends_on_anyones_job(keys, admin):
    bob = keys.producer("bob")
    theirs = bob.post("/jobs", json={"type": "email"}).json["id"]
    assert admin.post("/jobs", json={"type": "email", "depends_on": [theirs]}).json["status"] == "waiting"


# -- batches ----------------------------------------------------------------------------------------------


def chain(n):
    return [
        {"type": "email", "ref": f"s{i}", **({"depends_on": [f"s{i - 1}"]} if i else {})} for i in range(n)
    ]


def test_post_batches_makes_the_batch_with_refs_and_answers_it(producer, served):
    answer = producer.post(
        "/batches",
        json={
            "description": "import",
            "jobs": chain(3),
            "on_success": {"type": "email", "payload": {"ok": 1}},
        },
    )
    assert answer.status_code == 201, answer.json
    batch = answer.json
    served("/batches", "post", 201, batch)
    assert answer.headers["Location"].endswith(f"/batches/{batch['id']}")
    assert (batch["status"], batch["total"], batch["owner"], batch["description"]) == (
        "running",
        3,
        "alice",
        "import",
    )
    assert batch["counts"]["pending"] == 1 and batch["counts"]["waiting"] == 2
    jobs = [producer.get(f"/jobs/{i}").json for i in batch["jobs"]]
    assert [j["batch_id"] for j in jobs] == [batch["id"]] * 3
    assert jobs[2]["depends_on"] == [jobs[1]["id"]]
    assert producer.get(f"/batches/{batch['id']}").json == batch
    assert [j["id"] for j in producer.get(f"/jobs?batch_id={batch['id']}").json["jobs"]] == batch["jobs"][
        ::-1
    ]


def test_a_batch_runs_to_success_and_its_callbacks_come_once(producer, worker):
    body = {"jobs": chain(2), "on_success": {"type": "email"}, "on_finish": {"type": "pdf"}}
    batch = producer.post("/batches", json=body).json
    for _ in range(2):
        [job] = claim(worker)
        complete(worker, job)
    done = producer.get(f"/batches/{batch['id']}").json
    assert done["status"] == "succeeded" and done["finished_at"] is not None
    success = producer.get(f"/jobs/{done['on_success_job']}").json
    assert (
        success["status"] == "pending" and success["batch_id"] == batch["id"] and success["owner"] == "alice"
    )
    assert batch["id"] not in [
        j["id"] for j in producer.get(f"/jobs?batch_id={batch['id']}&status=pending").json["jobs"]
    ]


@pytest.mark.parametrize(
    ("jobs", "field"),
    [
        ([{"type": "email"}, {"type": "nope"}], "jobs[1].type"),
        ([{"type": "email", "ref": "a"}, {"type": "email", "ref": "a"}], "jobs[1].ref"),
        (
            [{"type": "email", "depends_on": ["later"]}, {"type": "email", "ref": "later"}],
            "jobs[0].depends_on[0]",
        ),
        ([{"type": "email", "depends_on": ["ghost"]}], "jobs[0].depends_on[0]"),
        ([{"type": "email", "depends_on": [999999]}], "jobs[0].depends_on[0]"),
        ([{"type": "email", "ref": ""}], "jobs[0].ref"),
        ([{"type": "email", "idempotency_key": "k"}], "jobs[0].idempotency_key"),
        ([{"type": "email", "depends_on": list(range(1, 102))}], "jobs[0].depends_on"),
    ],
)
def test_a_bad_batch_is_422_naming_the_item_and_saves_nothing(producer, admin, jobs, field):
    answer = producer.post("/batches", json={"jobs": jobs})
    assert answer.status_code == 422, answer.json
    assert answer.json["errors"][0]["field"] == field
    assert admin.get("/jobs").json["jobs"] == [] and admin.get("/batches").json["batches"] == []


def test_batch_limits_and_callback_fields(producer, admin):
    assert (
        producer.post("/batches", json={"jobs": [{"type": "email"}] * 1001}).json["errors"][0]["field"]
        == "jobs"
    )
    assert producer.post("/batches", json={"jobs": []}).status_code == 422
    bad = producer.post("/batches", json={"jobs": [{"type": "email"}], "on_success": {"type": "nope"}})
    assert bad.status_code == 422 and bad.json["errors"][0]["field"] == "on_success.type"
    assert admin.get("/batches").json["batches"] == []
    high = producer.post(
        "/batches", json={"jobs": [{"type": "email"}, {"type": "email", "priority": "high"}]}
    )
    assert high.status_code == 403 and "jobs[1]" in high.json["detail"]
    assert producer.post("/batches", json={"jobs": [{"type": "email"}] * 1000}).status_code == 201


def test_batch_idempotency_key_replays_and_conflicts(producer):
    body = {"jobs": [{"type": "email"}]}
    first = producer.post("/batches", json=body, headers={"Idempotency-Key": "nightly"})
    again = producer.post("/batches", json=body, headers={"Idempotency-Key": "nightly"})
    assert (first.status_code, again.status_code) == (201, 200) and again.json == first.json
    other = producer.post(
        "/batches", json={"jobs": [{"type": "pdf"}]}, headers={"Idempotency-Key": "nightly"}
    )
    assert other.status_code == 422 and other.json["type"].endswith("/idempotency-key-reused")


def test_a_chunked_batch_replays_only_for_the_same_body(producer):
    """A body without a Content-Length (chunked) is read once: the key's fingerprint is of that body,
    not of nothing."""

    def send(body: dict) -> Any:
        return producer.post(
            "/batches",
            input_stream=io.BytesIO(json.dumps(body).encode()),
            content_type="application/json",
            headers={"Idempotency-Key": "chunked", "Transfer-Encoding": "chunked"},
            environ_overrides={"wsgi.input_terminated": True},  # as a server says of a chunked body
        )

    first = send({"jobs": [{"type": "email", "payload": {"v": 1}}]})
    assert first.status_code == 201, first.json
    assert send({"jobs": [{"type": "email", "payload": {"v": 1}}]}).json == first.json  # the same: a replay
    other = send({"jobs": [{"type": "pdf", "payload": {"v": 2}}, {"type": "pdf"}]})
    assert other.status_code == 422 and other.json["type"].endswith("/idempotency-key-reused")
    assert producer.get("/batches").json["batches"][0]["id"] == first.json["id"]  # no second batch


def test_owners_see_only_their_batches_and_lists_page_newest_first(producer, keys, admin):
    bob = keys.producer("bob")
    mine = [producer.post("/batches", json={"jobs": [{"type": "email"}]}).json["id"] for _ in range(3)]
    theirs = bob.post("/batches", json={"jobs": [{"type": "email"}]}).json["id"]
    assert bob.get(f"/batches/{mine[0]}").status_code == 404
    assert bob.post(f"/batches/{mine[0]}/cancel").status_code == 404
    page = producer.get("/batches?limit=2").json
    assert [b["id"] for b in page["batches"]] == mine[:0:-1] and page["next_cursor"]
    rest = producer.get(f"/batches?limit=2&cursor={page['next_cursor']}").json
    assert [b["id"] for b in rest["batches"]] == [mine[0]] and rest["next_cursor"] is None
    assert [b["id"] for b in admin.get("/batches?owner=bob").json["batches"]] == [theirs]
    assert producer.get("/batches?owner=bob").status_code == 422
    assert producer.get("/batches?status=succeeded").json["batches"] == []
    assert producer.get("/batches/999999").status_code == 404


def test_cancel_and_admin_retry_of_a_batch(producer, worker, admin):
    batch = producer.post("/batches", json={"jobs": chain(3), "on_finish": {"type": "email"}}).json
    [running] = claim(worker)
    cancelled = producer.post(f"/batches/{batch['id']}/cancel")
    assert cancelled.status_code == 202 and cancelled.json["counts"]["cancelled"] == 2
    assert producer.get(f"/jobs/{running['id']}").json["cancel_requested"] is True
    assert producer.post(f"/batches/{batch['id']}/retry").status_code == 403
    worker.post(f"/jobs/{running['id']}/cancelled", json={"lease_token": running["lease_token"]})
    ended = producer.get(f"/batches/{batch['id']}").json
    assert ended["status"] == "finished_with_failures" and ended["on_finish_job"] is not None
    retried = admin.post(f"/batches/{batch['id']}/retry")
    assert retried.status_code == 200 and retried.json["status"] == "running"
    assert retried.json["counts"]["pending"] == 1 and retried.json["counts"]["waiting"] == 2
    for _ in range(3):  # the chain, one link at a time (and the first callback, made before the retry)
        for job in claim(worker, 5):
            complete(worker, job)
    final = producer.get(f"/batches/{batch['id']}").json
    assert final["status"] == "succeeded" and final["on_finish_job"] == ended["on_finish_job"]


def test_only_a_worker_holding_a_running_member_adds_jobs(producer, worker, keys):
    batch = producer.post("/batches", json={"jobs": [{"type": "email"}]}).json
    [held] = claim(worker)
    other = keys.worker("worker-2")
    body = {
        "lease_token": held["lease_token"],
        "jobs": [{"type": "email", "ref": "a"}, {"type": "pdf", "depends_on": ["a"]}],
    }
    assert other.post(f"/batches/{batch['id']}/jobs", json=body).json["type"].endswith("/not-lease-holder")
    assert producer.post(f"/batches/{batch['id']}/jobs", json=body).status_code == 403
    stale = worker.post(f"/batches/{batch['id']}/jobs", json={**body, "lease_token": "0" * 32})
    assert stale.status_code == 409
    added = worker.post(f"/batches/{batch['id']}/jobs", json=body)
    assert added.status_code == 201 and len(added.json["jobs"]) == 2
    complete(worker, held)
    now = producer.get(f"/batches/{batch['id']}").json
    assert now["status"] == "running" and now["total"] == 3 and now["jobs"][1:] == added.json["jobs"]
    for _ in range(2):
        [job] = claim(worker)
        complete(worker, job)
    assert producer.get(f"/batches/{batch['id']}").json["status"] == "succeeded"
    late = worker.post(f"/batches/{batch['id']}/jobs", json=body)
    assert late.status_code == 409
