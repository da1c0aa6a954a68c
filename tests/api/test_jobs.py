"""The JSON API's job lifecycle, as the README's "How it behaves" and "JSON API" describe it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest


@pytest.fixture
def app_settings():
    return {"RETRY_BACKOFF_BASE": 0}  # the seed retried at once


def enqueue(caller, **body):
    body.setdefault("type", "email")
    response = caller.post("/jobs", json=body)
    assert response.status_code == 201, response.json
    return response.json


def claim(worker, **body):
    return worker.post("/jobs/claim", json=body or None)


def test_enqueue_returns_the_job_with_location(producer):
    response = producer.post("/jobs", json={"type": "email", "payload": {"to": "a@example.com"}})
    assert response.status_code == 201
    job = response.json
    assert response.headers["Location"] == f"/jobs/{job['id']}"
    assert job["status"] == "pending"
    assert job["priority"] == "low"
    assert job["payload"] == {"to": "a@example.com"}
    assert job["owner"] == "alice"
    assert job["retry_count"] == 0 and job["max_retries"] == 3
    assert job["created_at"].endswith("Z")
    assert "error" not in job  # producers never see error text


def test_priority_labels_are_case_insensitive_and_output_lowercase(producer):
    assert enqueue(producer, priority="MeDiUm")["priority"] == "medium"


def test_claim_takes_highest_priority_then_oldest(producer, admin, worker):
    low1 = enqueue(producer, priority="low")
    low2 = enqueue(producer, priority="low")
    medium = enqueue(producer, priority="medium")
    critical = enqueue(admin, priority="critical")
    high = enqueue(admin, priority="high")
    order = [claim(worker).json["id"] for _ in range(5)]
    assert order == [critical["id"], high["id"], medium["id"], low1["id"], low2["id"]]
    assert claim(worker).status_code == 204


def test_claim_sets_lease_and_worker_from_the_key(producer, worker):
    job = enqueue(producer)
    claimed = claim(worker).json
    assert claimed["id"] == job["id"]
    assert claimed["status"] == "running"
    assert claimed["worker_id"] == "worker-1"
    assert len(claimed["lease_token"]) >= 32  # 128 bits, hex
    claimed_at = datetime.fromisoformat(claimed["claimed_at"])
    expires = datetime.fromisoformat(claimed["lease_expires_at"])
    assert expires - claimed_at == timedelta(seconds=300)


def test_claim_with_lease_seconds_and_types(producer, worker):
    enqueue(producer, type="email")
    pdf = enqueue(producer, type="pdf")
    claimed = claim(worker, types=["pdf"], lease_seconds=60).json
    assert claimed["id"] == pdf["id"]
    expires = datetime.fromisoformat(claimed["lease_expires_at"])
    assert expires - datetime.fromisoformat(claimed["claimed_at"]) == timedelta(seconds=60)
    assert claim(worker, types=["sync"]).status_code == 204


def test_claim_with_limit_answers_a_list(producer, worker):
    for _ in range(3):
        enqueue(producer)
    response = claim(worker, limit=2)
    assert response.status_code == 200
    assert len(response.json["jobs"]) == 2
    assert len({j["id"] for j in response.json["jobs"]}) == 2
    assert claim(worker, limit=5).json["jobs"][0]["status"] == "running"
    assert claim(worker, limit=5).json == {"jobs": []}


def test_complete_stores_result(producer, worker):
    enqueue(producer)
    job = claim(worker).json
    done = worker.post(
        f"/jobs/{job['id']}/complete", json={"lease_token": job["lease_token"], "result": {"ok": 1}}
    )
    assert done.status_code == 200
    assert done.json["status"] == "completed"
    assert done.json["result"] == {"ok": 1}
    assert done.json["finished_at"] is not None
    seen = producer.get(f"/jobs/{job['id']}").json
    assert seen["status"] == "completed" and seen["result"] == {"ok": 1}


def test_fail_retries_until_max_retries_then_failed(producer, worker, admin):
    job = enqueue(producer, max_retries=2)
    statuses = []
    for _ in range(3):
        held = claim(worker).json
        assert held["id"] == job["id"]
        failed = worker.post(
            f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "boom"}
        )
        assert failed.status_code == 200
        statuses.append((failed.json["status"], failed.json["retry_count"]))
    assert statuses == [("pending", 1), ("pending", 2), ("failed", 2)]
    assert claim(worker).status_code == 204
    assert admin.get(f"/jobs/{job['id']}").json["error"] == "boom"


def test_fail_not_retryable_fails_at_once(producer, worker):
    enqueue(producer)
    held = claim(worker).json
    failed = worker.post(
        f"/jobs/{held['id']}/fail",
        json={"lease_token": held["lease_token"], "error": "bad input", "retryable": False},
    )
    assert failed.json["status"] == "failed"
    assert failed.json["retry_count"] == 0


def test_completed_job_cannot_be_completed_again(producer, worker, keys):
    """The same complete sent again (its answer lost) answers as the first did and changes nothing; any
    other report with that token, or by another worker, is refused (docs/operations.md#outages)."""
    enqueue(producer)
    held = claim(worker).json
    body = {"lease_token": held["lease_token"]}
    first = worker.post(f"/jobs/{held['id']}/complete", json={**body, "result": {"n": 1}})
    assert first.status_code == 200
    again = worker.post(f"/jobs/{held['id']}/complete", json={**body, "result": {"n": 2}})
    assert again.status_code == 200 and again.json == first.json
    other = keys.worker("worker-2").post(f"/jobs/{held['id']}/complete", json=body)
    assert other.status_code == 409
    assert other.json["type"].endswith("/not-lease-holder")
    wrong = worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": "f" * 32})
    assert wrong.status_code == 409


def test_complete_unknown_job_is_404(worker):
    response = worker.post("/jobs/999999/complete", json={"lease_token": "x"})
    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/problem+json"


def test_claim_route_is_not_captured_by_job_id_route(producer, worker):
    enqueue(producer)
    assert worker.post("/jobs/claim").status_code == 200
    assert producer.get("/jobs/claim").status_code == 405  # /jobs/claim is POST only, never "job 'claim'"
    assert producer.get("/jobs/abc").status_code == 404
    assert producer.get("/jobs/99999999999999999999999").status_code == 404


def test_cancel_pending_job_by_owner_then_409(producer):
    job = enqueue(producer)
    cancelled = producer.post(f"/jobs/{job['id']}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json["status"] == "cancelled"
    again = producer.post(f"/jobs/{job['id']}/cancel")
    assert again.status_code == 409
    assert again.json["type"].endswith("/invalid-state")


def test_cancel_running_job_is_202_and_asks_its_worker(producer, worker):
    job = enqueue(producer)
    claim(worker)
    asked = producer.post(f"/jobs/{job['id']}/cancel")  # tests/api/test_running.py has the rest
    assert asked.status_code == 202 and asked.json["status"] == "running" and asked.json["cancel_requested"]


def test_admin_cancels_any_pending_job(producer, admin):
    job = enqueue(producer)
    assert admin.post(f"/jobs/{job['id']}/cancel").json["status"] == "cancelled"


def test_admin_retry_of_failed_and_cancelled_jobs(producer, worker, admin):
    job = enqueue(producer, max_retries=0)
    held = claim(worker).json
    worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "x"})
    retried = admin.post(f"/jobs/{job['id']}/retry")
    assert retried.status_code == 200
    assert retried.json["status"] == "pending" and retried.json["retry_count"] == 0
    assert admin.post(f"/jobs/{job['id']}/retry").status_code == 409  # pending now
    other = enqueue(producer)
    producer.post(f"/jobs/{other['id']}/cancel")
    assert admin.post(f"/jobs/{other['id']}/retry").json["status"] == "pending"
    assert admin.post("/jobs/424242/retry").status_code == 404


def test_producer_may_not_retry(producer, worker):
    job = enqueue(producer)
    assert producer.post(f"/jobs/{job['id']}/retry").status_code == 403


def test_events_record_every_transition(producer, worker, admin):
    job = enqueue(producer, max_retries=1)
    held = claim(worker).json
    worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "token=abc123"})
    held = claim(worker).json
    worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": held["lease_token"]})
    events = producer.get(f"/jobs/{job['id']}/events").json["events"]
    assert [(e["event"], e["actor"], e["attempt"]) for e in events] == [
        ("enqueued", "alice", 0),
        ("claimed", "worker-1", 1),
        ("retry_scheduled", "worker-1", 1),
        ("claimed", "worker-1", 2),
        ("completed", "worker-1", 2),
    ]
    assert all("error" not in e for e in events)
    admin_events = admin.get(f"/jobs/{job['id']}/events").json["events"]
    assert admin_events[2]["error"] == "token=[REDACTED]"


def test_delayed_job_is_not_claimable_before_its_time(producer, worker):
    later = enqueue(producer, delay_seconds=3600)
    future = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    at = enqueue(producer, run_at=future)
    assert datetime.fromisoformat(at["available_at"]) > datetime.now(UTC) + timedelta(minutes=119)
    assert datetime.fromisoformat(later["available_at"]) > datetime.now(UTC) + timedelta(minutes=59)
    assert claim(worker).status_code == 204
    past = enqueue(producer, run_at="2001-01-01T00:00:00Z")
    assert claim(worker).json["id"] == past["id"]


def test_list_jobs_newest_first_with_cursor(producer):
    ids = [enqueue(producer)["id"] for _ in range(5)]
    page1 = producer.get("/jobs?limit=2").json
    assert [j["id"] for j in page1["jobs"]] == ids[::-1][:2]
    page2 = producer.get(f"/jobs?limit=2&cursor={page1['next_cursor']}").json
    assert [j["id"] for j in page2["jobs"]] == ids[::-1][2:4]
    page3 = producer.get(f"/jobs?limit=2&cursor={page2['next_cursor']}").json
    assert [j["id"] for j in page3["jobs"]] == ids[:1]
    assert page3["next_cursor"] is None


def test_list_jobs_filters(producer, admin, worker):
    enqueue(producer, type="email", priority="low")
    pdf = enqueue(producer, type="pdf", priority="medium")
    enqueue(admin, type="email", priority="high")
    assert [j["id"] for j in producer.get("/jobs?type=pdf").json["jobs"]] == [pdf["id"]]
    assert [j["id"] for j in producer.get("/jobs?priority=MEDIUM").json["jobs"]] == [pdf["id"]]
    assert len(producer.get("/jobs").json["jobs"]) == 2  # only their own
    assert len(admin.get("/jobs").json["jobs"]) == 3
    claim(worker, types=["pdf"])
    assert [j["id"] for j in producer.get("/jobs?status=running").json["jobs"]] == [pdf["id"]]


@pytest.mark.parametrize(
    "query",
    [
        "status=done",
        "priority=urgent",
        "limit=0",
        "limit=201",
        "limit=abc",
        "cursor=!!!",
        "cursor=aWQ6eA",
        "sort=id",
    ],
)
def test_list_jobs_rejects_bad_filters(producer, query):
    response = producer.get(f"/jobs?{query}")
    assert response.status_code == 422
    assert response.json["errors"]


def test_worker_reads_only_the_job_it_holds(producer, worker, keys):
    job = enqueue(producer, idempotency_key="k-1")
    assert worker.get(f"/jobs/{job['id']}").status_code == 404
    claim(worker)
    seen = worker.get(f"/jobs/{job['id']}")
    assert seen.status_code == 200
    assert "idempotency_key" not in seen.json  # owner and admins only
    assert keys.worker("worker-2").get(f"/jobs/{job['id']}").status_code == 404
    assert worker.get("/jobs").status_code == 403


def test_idempotent_enqueue_returns_the_same_job(producer):
    first = producer.post("/jobs", json={"type": "email", "payload": {"a": 1}, "idempotency_key": "order-7"})
    second = producer.post("/jobs", json={"type": "email", "payload": {"a": 1}, "idempotency_key": "order-7"})
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json["id"] == second.json["id"]
    assert first.json["idempotency_key"] == "order-7"


def test_idempotency_key_header_counts_like_the_field(producer):
    first = producer.post("/jobs", json={"type": "email"}, headers={"Idempotency-Key": "h-1"})
    second = producer.post("/jobs", json={"type": "email", "idempotency_key": "h-1"})
    assert first.json["id"] == second.json["id"] and second.status_code == 200
    clash = producer.post(
        "/jobs", json={"type": "email", "idempotency_key": "a"}, headers={"Idempotency-Key": "b"}
    )
    assert clash.status_code == 422


def test_idempotency_key_with_other_parameters_is_422(producer):
    producer.post("/jobs", json={"type": "email", "payload": {"a": 1}, "idempotency_key": "k"})
    response = producer.post("/jobs", json={"type": "email", "payload": {"a": 2}, "idempotency_key": "k"})
    assert response.status_code == 422
    assert response.json["type"].endswith("/idempotency-key-reused")


def test_unknown_type_lists_allowed_names(producer):
    response = producer.post("/jobs", json={"type": "rm-rf"})
    assert response.status_code == 422
    assert response.json["errors"][0]["field"] == "type"
    assert "email, pdf, sync" in response.json["errors"][0]["message"]


def test_disabled_type_is_refused_and_paused_type_is_not_claimed(producer, worker, queue):
    queue.types.update("pdf", enabled=False)
    assert producer.post("/jobs", json={"type": "pdf"}).status_code == 422
    queue.types.update("sync", paused=True)
    job = enqueue(producer, type="sync")
    assert claim(worker).status_code == 204
    queue.types.update("sync", paused=False)
    assert claim(worker).json["id"] == job["id"]


def test_payload_schema_failure_names_the_path(producer, queue):
    queue.types.add(
        "invoice",
        schema={
            "type": "object",
            "required": ["lines"],
            "properties": {"lines": {"type": "array", "items": {"type": "integer"}}},
        },
    )
    assert producer.post("/jobs", json={"type": "invoice", "payload": {"lines": [1, 2]}}).status_code == 201
    response = producer.post("/jobs", json={"type": "invoice", "payload": {"lines": [1, "two"]}})
    assert response.status_code == 422
    assert response.json["errors"][0]["field"] == "payload.lines[1]"
    missing = producer.post("/jobs", json={"type": "invoice", "payload": {}})
    assert missing.json["errors"][0]["field"] == "payload"


def test_healthz_needs_no_key(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json == {"status": "ok"}


def test_json_answers_end_with_a_newline(producer, client):
    """JSON and problem bodies end with one newline, so that curl's output ends on a line of its own."""
    created = producer.post("/jobs", json={"type": "email"})
    problem = producer.post("/jobs", json={"type": "no-such-type"})
    unauthorized = client.get("/jobs")
    for response in (created, problem, unauthorized, client.get("/openapi.json")):
        body = response.get_data(as_text=True)
        assert body.endswith("}\n") and not body.endswith("\n\n"), body[-20:]
    assert problem.mimetype == "application/problem+json"
    assert created.json["type"] == "email"  # still parses


def test_healthz_503_when_database_file_is_gone(app, client, backend, tmp_path):
    if backend.name != "sqlite":
        pytest.skip("SQLite-only: makes the database file unreadable")
    db = app.extensions["queuelog"]["db"]
    db.dispose()
    path = tmp_path / "queuelog.sqlite3"
    path.unlink()
    path.mkdir()  # a folder where the file was: sqlite cannot open it
    response = client.get("/healthz")
    assert response.status_code == 503 and response.headers["Retry-After"] == "1"
    assert response.json == {"status": "unavailable", "detail": "the database is unreachable"}


def test_heartbeat_extends_the_lease_for_the_holder_only(producer, worker, keys):
    enqueue(producer)
    held = claim(worker, lease_seconds=30).json
    url = f"/jobs/{held['id']}/heartbeat"
    beat = worker.post(url, json={"lease_token": held["lease_token"], "lease_seconds": 600})
    assert beat.status_code == 200
    expires = datetime.fromisoformat(beat.json["lease_expires_at"])
    assert expires > datetime.now(UTC) + timedelta(seconds=590)
    assert keys.worker("other").post(url, json={"lease_token": held["lease_token"]}).status_code == 409
    assert worker.post(url, json={"lease_token": "nope"}).status_code == 409
    assert worker.post(url, json={"lease_token": held["lease_token"], "lease_seconds": 1}).status_code == 422
    assert worker.post("/jobs/777777/heartbeat", json={"lease_token": "x"}).status_code == 404


def test_fail_unknown_job_is_404(worker):
    response = worker.post("/jobs/888888/fail", json={"lease_token": "x", "error": "e"})
    assert response.status_code == 404
    assert response.json["type"].endswith("/not-found")
