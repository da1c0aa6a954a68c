"""Running jobs through the JSON API (docs/running-jobs.md): cancelling one, progress reports, snoozes,
each report fenced by the worker and its lease token."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest


@pytest.fixture
def app_settings():
    return {"RETRY_BACKOFF_BASE": 0, "MAX_SNOOZES": 2}


def enqueue(caller, **body):
    body.setdefault("type", "email")
    response = caller.post("/jobs", json=body)
    assert response.status_code == 201, response.json
    return response.json


def held(producer, worker, **body):
    """A job ``worker`` holds, as the claim answered it (with its lease_token)."""
    job = enqueue(producer, **body)
    claimed = worker.post("/jobs/claim", json={}).json
    assert claimed["id"] == job["id"]
    return claimed


def report(worker, job, action, **body):
    return worker.post(f"/jobs/{job['id']}/{action}", json={"lease_token": job["lease_token"], **body})


def events(caller, job):
    return [
        (e["event"], e["actor"], e["attempt"]) for e in caller.get(f"/jobs/{job['id']}/events").json["events"]
    ]


# -- cancelling a running job ---------------------------------------------------------------------------


def test_the_worker_learns_of_a_cancel_request_and_stops_the_job(producer, worker, admin):
    job = held(producer, worker)
    assert job["cancel_requested"] is False and job["cancel_requested_by"] is None
    asked = admin.post(f"/jobs/{job['id']}/cancel")
    assert asked.status_code == 202
    assert (asked.json["status"], asked.json["cancel_requested"], asked.json["cancel_requested_by"]) == (
        "running",
        True,
        "admin",
    )
    assert asked.json["cancel_requested_at"].endswith("Z")
    again = admin.post(f"/jobs/{job['id']}/cancel")  # asking twice changes nothing
    assert again.status_code == 202 and again.json["cancel_requested_at"] == asked.json["cancel_requested_at"]
    beat = report(worker, job, "heartbeat")
    assert beat.status_code == 200 and beat.json["cancel_requested"] is True
    stopped = report(worker, job, "cancelled")
    assert stopped.status_code == 200
    assert (stopped.json["status"], stopped.json["cancel_requested"]) == ("cancelled", False)
    late = report(worker, job, "complete", result={"too": "late"})
    assert late.status_code == 409 and late.json["type"] == "/problems/not-lease-holder"
    assert events(producer, job) == [
        ("enqueued", "alice", 0),
        ("claimed", "worker-1", 1),
        ("cancel_requested", "admin", 1),
        ("cancelled", "worker-1", 1),
    ]
    assert producer.get(f"/jobs/{job['id']}").json["status"] == "cancelled"


def test_owners_ask_for_their_own_jobs_only(producer, worker, keys):
    job = held(producer, worker)
    bob = keys.producer("bob")
    assert bob.post(f"/jobs/{job['id']}/cancel").status_code == 404
    asked = producer.post(f"/jobs/{job['id']}/cancel")
    assert asked.status_code == 202 and asked.json["cancel_requested_by"] == "alice"
    assert worker.post(f"/jobs/{job['id']}/cancel").status_code == 403  # workers do not ask


def test_a_finished_job_cannot_be_cancelled(producer, worker):
    job = held(producer, worker)
    assert report(worker, job, "complete").status_code == 200
    refused = producer.post(f"/jobs/{job['id']}/cancel")
    assert refused.status_code == 409 and "pending or running" in refused.json["detail"]


def test_a_cancel_report_is_fenced_and_needs_a_request(producer, worker, keys):
    job = held(producer, worker)
    not_asked = report(worker, job, "cancelled")
    assert not_asked.status_code == 409 and not_asked.json["type"] == "/problems/invalid-state"
    producer.post(f"/jobs/{job['id']}/cancel")
    other = keys.worker("worker-2")
    for caller, token in ((other, job["lease_token"]), (worker, "f" * 32)):
        refused = caller.post(f"/jobs/{job['id']}/cancelled", json={"lease_token": token})
        assert refused.status_code == 409 and refused.json["type"] == "/problems/not-lease-holder"
    assert worker.post("/jobs/424242/cancelled", json={"lease_token": "x"}).status_code == 404
    missing = worker.post(f"/jobs/{job['id']}/cancelled", json={})
    assert missing.status_code == 422 and missing.json["errors"][0]["field"] == "lease_token"
    assert producer.get(f"/jobs/{job['id']}").json["status"] == "running"  # nothing changed


def test_a_failure_after_a_cancel_request_ends_the_job_cancelled(producer, worker, admin):
    job = held(producer, worker, max_retries=3)
    admin.post(f"/jobs/{job['id']}/cancel")
    failed = report(worker, job, "fail", error="interrupted")
    assert failed.status_code == 200 and failed.json["status"] == "cancelled"
    assert failed.json["retry_count"] == 0
    assert admin.get(f"/jobs/{job['id']}").json["error"] == "interrupted"
    assert worker.post("/jobs/claim", json={}).status_code == 204  # not retried


def test_a_job_completed_despite_the_request_stays_completed(producer, worker, admin):
    job = held(producer, worker)
    admin.post(f"/jobs/{job['id']}/cancel")
    done = report(worker, job, "complete", result={"n": 1})
    assert done.status_code == 200 and done.json["status"] == "completed"
    assert done.json["cancel_requested"] is False and done.json["cancel_requested_by"] == "admin"
    assert events(admin, job)[-2:] == [("cancel_requested", "admin", 1), ("completed", "worker-1", 1)]


def test_a_retried_cancelled_job_starts_without_the_old_request(producer, worker, admin):
    job = held(producer, worker)
    admin.post(f"/jobs/{job['id']}/cancel")
    report(worker, job, "cancelled")
    assert admin.post(f"/jobs/{job['id']}/retry").status_code == 200
    again = worker.post("/jobs/claim", json={}).json
    assert again["id"] == job["id"] and again["cancel_requested"] is False


# -- progress -------------------------------------------------------------------------------------------


def test_progress_rides_on_the_heartbeat_and_shows_on_the_job(producer, worker):
    job = held(producer, worker)
    assert (job["progress"], job["progress_message"], job["progress_updated_at"]) == (None, None, None)
    beat = report(worker, job, "heartbeat", progress=35, progress_message="page 7 of 20", lease_seconds=90)
    assert beat.status_code == 200
    assert (beat.json["progress"], beat.json["progress_message"]) == (35, "page 7 of 20")
    expires = datetime.fromisoformat(beat.json["lease_expires_at"])
    assert expires - datetime.fromisoformat(beat.json["progress_updated_at"]) == timedelta(seconds=90)
    seen = producer.get(f"/jobs/{job['id']}").json
    assert (seen["progress"], seen["progress_message"]) == (35, "page 7 of 20")
    plain = report(worker, job, "heartbeat")  # a heartbeat without progress keeps the last report
    assert plain.json["progress"] == 35


def test_progress_from_another_worker_or_a_stale_token_is_409(producer, worker, keys):
    job = held(producer, worker)
    other = keys.worker("worker-2")
    stolen = other.post(
        f"/jobs/{job['id']}/heartbeat", json={"lease_token": job["lease_token"], "progress": 99}
    )
    assert stolen.status_code == 409 and stolen.json["type"] == "/problems/not-lease-holder"
    assert report(worker, job, "fail", error="boom").json["status"] == "pending"
    again = worker.post("/jobs/claim", json={}).json  # a new attempt under a new token
    assert again["id"] == job["id"] and again["lease_token"] != job["lease_token"]
    stale = report(worker, job, "heartbeat", progress=50)
    assert stale.status_code == 409 and stale.json["type"] == "/problems/not-lease-holder"
    assert producer.get(f"/jobs/{job['id']}").json["progress"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"progress": 101}, "progress"),
        ({"progress": -1}, "progress"),
        ({"progress": 50.5}, "progress"),
        ({"progress": "50"}, "progress"),
        ({"progress_message": "x" * 201}, "progress_message"),
        ({"progress_message": "line\nbreak"}, "progress_message"),
        ({"progress_message": ""}, "progress_message"),
    ],
)
def test_bad_progress_is_422_naming_the_field(producer, worker, body, field):
    job = held(producer, worker)
    refused = report(worker, job, "heartbeat", **body)
    assert refused.status_code == 422 and refused.json["errors"][0]["field"] == field
    assert producer.get(f"/jobs/{job['id']}").json["progress"] is None


# -- snoozes --------------------------------------------------------------------------------------------


def test_a_snooze_hands_the_job_back_without_counting_a_failure(producer, worker):
    job = held(producer, worker, max_retries=0)
    snoozed = report(worker, job, "snooze", delay_seconds=600)
    assert snoozed.status_code == 200
    answer = snoozed.json
    assert (answer["status"], answer["retry_count"], answer["snooze_count"]) == ("pending", 0, 1)
    waited = datetime.fromisoformat(answer["available_at"]) - datetime.fromisoformat(answer["updated_at"])
    assert waited == timedelta(seconds=600)
    assert worker.post("/jobs/claim", json={}).status_code == 204  # not before its time
    assert events(producer, job)[-1] == ("snoozed", "worker-1", 1)
    late = report(worker, job, "complete")
    assert late.status_code == 409  # the old lease is gone


def test_snoozes_are_fenced(producer, worker, keys):
    job = held(producer, worker)
    other = keys.worker("worker-2")
    stolen = other.post(
        f"/jobs/{job['id']}/snooze", json={"lease_token": job["lease_token"], "delay_seconds": 5}
    )
    assert stolen.status_code == 409 and stolen.json["type"] == "/problems/not-lease-holder"
    report(worker, job, "fail", error="boom")
    worker.post("/jobs/claim", json={})
    stale = report(worker, job, "snooze", delay_seconds=5)
    assert stale.status_code == 409 and stale.json["type"] == "/problems/not-lease-holder"
    assert (
        worker.post("/jobs/424242/snooze", json={"lease_token": "x", "delay_seconds": 5}).status_code == 404
    )


def test_snoozes_are_capped(producer, worker, queue):
    job = held(producer, worker)
    for _ in range(2):  # MAX_SNOOZES is 2 here
        assert report(worker, job, "snooze", delay_seconds=1).status_code == 200
        with queue.db.cursor(write=True) as cur:  # due now rather than in a second
            cur.execute(f"UPDATE jobs SET available_at = created_at WHERE id = {int(job['id'])}")
        job = worker.post("/jobs/claim", json={}).json
    refused = report(worker, job, "snooze", delay_seconds=1)
    assert refused.status_code == 409 and refused.json["type"] == "/problems/invalid-state"
    assert "snoozed 2 times" in refused.json["detail"]
    assert report(worker, job, "complete").json["status"] == "completed"  # still held: it may finish


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "delay_seconds"),
        ({"delay_seconds": 0}, "delay_seconds"),
        ({"delay_seconds": 86401}, "delay_seconds"),
        ({"delay_seconds": "60"}, "delay_seconds"),
        ({"delay_seconds": 60, "retryable": False}, "retryable"),
    ],
)
def test_bad_snoozes_are_422_naming_the_field(producer, worker, body, field):
    job = held(producer, worker)
    refused = report(worker, job, "snooze", **body)
    assert refused.status_code == 422 and refused.json["errors"][0]["field"] == field
    assert producer.get(f"/jobs/{job['id']}").json["status"] == "running"


def test_the_document_describes_the_new_endpoints_and_fields(client):
    document = client.get("/openapi.json").json
    paths = document["paths"]
    assert "202" in paths["/jobs/{job_id}/cancel"]["post"]["responses"]
    assert {"/jobs/{job_id}/snooze", "/jobs/{job_id}/cancelled"} <= set(paths)
    job = document["components"]["schemas"]["Job"]["properties"]
    assert {"cancel_requested", "progress", "progress_message", "snooze_count"} <= set(job)
    assert document["components"]["schemas"]["HeartbeatBody"]["properties"]["progress"]["maximum"] == 100
    assert "snoozed 2 times" in paths["/jobs/{job_id}/snooze"]["post"]["responses"]["409"]["description"]


def test_a_progress_message_is_redacted_before_it_is_stored(producer, worker):
    job = held(producer, worker)
    secret = "page 3; retrying with password=hunter2 and Bearer abcdefghijklmnopqrstuvwxyz123456"
    beat = report(worker, job, "heartbeat", progress=30, progress_message=secret)
    assert beat.status_code == 200
    shown = producer.get(f"/jobs/{job['id']}").json["progress_message"]
    assert shown.startswith("page 3; retrying with password=[REDACTED]") and "hunter2" not in shown
    assert "abcdefghijklmnopqrstuvwxyz123456" not in shown
    # A marker longer than what it replaced never pushes the message past its limit.
    near_limit = "x" * 186 + " password=ab"
    assert len(near_limit) <= 200
    beat = report(worker, job, "heartbeat", progress_message=near_limit)
    assert beat.status_code == 200
    stored = producer.get(f"/jobs/{job['id']}").json["progress_message"]
    assert len(stored) == 200 and "password=[RED" in stored and " ab" not in stored[-3:]


@pytest.mark.parametrize(
    "message,secret",
    [
        ("sent {\\u0022password\\u0022: \\u0022hunter2\\u0022}", "hunter2"),
        ("sent password=\\x22hunter2\\x22", "hunter2"),
        ("form {&quot;token&quot;: &quot;hunter2&quot;}", "hunter2"),
        ("login senha: hunter2 ok", "hunter2"),
        ("登录 密码: hunter2", "hunter2"),
        ("InvalidPasswordError: hunter2", "hunter2"),
        ("connecting app:hunter2@db:5432/prod", "hunter2"),
        ("shop shpat_" + "ab12" * 8, "ab12" * 8),
        ("runner glrt-abcdefghij0123456789", "abcdefghij0123456789"),
    ],
)
def test_progress_messages_in_other_shapes_reach_the_producer_redacted(producer, worker, message, secret):
    job = held(producer, worker)
    assert report(worker, job, "heartbeat", progress_message=message).status_code == 200
    shown = producer.get(f"/jobs/{job['id']}").json["progress_message"]
    assert secret not in shown and "[REDACTED]" in shown
