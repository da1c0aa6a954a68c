"""README, "Security": each of the seed's ten vulnerabilities, attacked, and shown closed."""

from __future__ import annotations

import threading

import pytest

from queuelog.redact import redact_error


def enqueue(caller, **body):
    body.setdefault("type", "email")
    response = caller.post("/jobs", json=body)
    assert response.status_code == 201, response.json
    return response.json


def test_v01_anonymous_callers_are_refused_everywhere_but_healthz(client, producer, worker):
    job = enqueue(producer)
    held = worker.post("/jobs/claim").json
    attempts = [
        ("post", "/jobs", {"type": "email"}),
        ("get", "/jobs", None),
        ("get", f"/jobs/{job['id']}", None),
        ("get", f"/jobs/{job['id']}/events", None),
        ("post", "/jobs/claim", None),
        ("post", f"/jobs/{job['id']}/complete", {"lease_token": held["lease_token"]}),
        ("post", f"/jobs/{job['id']}/fail", {"lease_token": held["lease_token"], "error": "x"}),
        ("post", f"/jobs/{job['id']}/cancel", None),
        ("post", f"/jobs/{job['id']}/retry", None),
    ]
    for method, path, body in attempts:
        for headers in (
            {},
            {"Authorization": "Bearer ql_not-a-real-key-at-all-000000"},
            {"Authorization": "Basic YTpi"},
        ):
            response = getattr(client, method)(path, json=body, headers=headers)
            assert response.status_code == 401, (method, path, headers)
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
            assert response.headers["Content-Type"] == "application/problem+json"
    assert client.get("/healthz").status_code == 200
    assert worker.get(f"/jobs/{job['id']}").json["status"] == "running"  # nothing happened


def test_v01_revoked_key_is_401(app, client, keys):
    from queuelog.queue.admin import AdminStore

    caller = keys.producer("bob")
    assert caller.get("/jobs").status_code == 200
    key_name = next(iter(_key_names(app, "bob")))
    AdminStore(app.extensions["queuelog"]["db"]).revoke_key(key_name)
    assert caller.get("/jobs").status_code == 401


def _key_names(app, username):
    from sqlalchemy import select

    from queuelog.models import ApiKey, User

    with app.extensions["queuelog"]["db"].session() as session:
        return set(session.scalars(select(ApiKey.name).join(User).where(User.username == username)))


def test_v02_arbitrary_job_type_is_422(producer, admin):
    for caller in (producer, admin):
        response = caller.post("/jobs", json={"type": "../../bin/sh"})
        assert response.status_code == 422
        assert response.json["errors"][0]["field"] == "type"
    assert admin.get("/jobs").json["jobs"] == []


@pytest.mark.parametrize("priority", ["high", "critical", "CRITICAL"])
def test_v03_producer_cannot_enqueue_above_medium(producer, admin, priority):
    response = producer.post("/jobs", json={"type": "email", "priority": priority})
    assert response.status_code == 403
    assert response.json["type"].endswith("/forbidden")
    assert admin.get("/jobs").json["jobs"] == []
    assert admin.post("/jobs", json={"type": "email", "priority": priority}).status_code == 201


def test_v04_worker_id_cannot_be_spoofed(producer, worker, keys):
    job = enqueue(producer)
    spoof = worker.post("/jobs/claim", json={"worker_id": "worker-2"})
    assert spoof.status_code == 422
    assert spoof.json["errors"][0]["field"] == "worker_id"
    held = worker.post("/jobs/claim").json
    assert held["id"] == job["id"]
    assert held["worker_id"] == "worker-1"  # from the key, always
    other = keys.worker("worker-2")
    assert (
        other.post(f"/jobs/{job['id']}/complete", json={"lease_token": held["lease_token"]}).status_code
        == 409
    )


def test_v05_completing_or_failing_another_workers_job_is_409(producer, worker, keys, admin):
    job = enqueue(producer)
    held = worker.post("/jobs/claim").json
    thief = keys.worker("thief")
    for action, body in (("complete", {}), ("fail", {"error": "stolen"})):
        for token in (held["lease_token"], "0" * 32):
            response = thief.post(f"/jobs/{job['id']}/{action}", json={"lease_token": token, **body})
            assert response.status_code == 409
            assert response.json["type"].endswith("/not-lease-holder")
    # the holder with a wrong token is refused too
    wrong = worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": "f" * 32})
    assert wrong.status_code == 409
    seen = admin.get(f"/jobs/{job['id']}").json
    assert seen["status"] == "running" and seen["worker_id"] == "worker-1" and seen["error"] is None
    assert (
        worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": held["lease_token"]}).status_code
        == 200
    )


def test_v06_concurrent_claims_never_share_a_job(app, producer, keys):
    """Many threads claim at once through the app (the HTTP version is in tests/test_concurrency.py)."""
    total = 120
    for i in range(total):
        enqueue(producer, payload={"n": i})
    workers = [keys.worker(f"w{i}") for i in range(8)]
    claimed: list[int] = []
    errors: list[int] = []
    lock = threading.Lock()

    def run(caller):
        client = app.test_client()
        while True:
            response = client.post("/jobs/claim", headers=caller.headers)
            if response.status_code == 204:
                return
            if response.status_code != 200:
                with lock:
                    errors.append(response.status_code)
                return
            with lock:
                claimed.append(response.json["id"])

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(claimed) == total
    assert len(set(claimed)) == total


@pytest.mark.parametrize("size", [65537, 3 * 1024 * 1024])
def test_v07_huge_payloads_are_refused(producer, admin, size):
    response = producer.post("/jobs", json={"type": "email", "payload": {"x": "a" * size}})
    assert response.status_code == (422 if size < 1024 * 1024 else 413)
    assert admin.get("/jobs").json["jobs"] == []


def test_v07_deep_nesting_is_refused(producer):
    payload: dict = {}
    node = payload
    for _ in range(40):
        node["n"] = {}
        node = node["n"]
    assert producer.post("/jobs", json={"type": "email", "payload": payload}).status_code == 422


SQL_INJECTIONS = [
    "'; DROP TABLE jobs; --",
    "1 OR 1=1",
    '" OR ""="',
    "email' --",
    "%' OR '1'='1",
    "x\\'; SELECT 1; --",
]


@pytest.mark.parametrize("evil", SQL_INJECTIONS)
def test_v08_sql_metacharacters_are_stored_and_returned_literally(producer, worker, admin, evil):
    job = producer.post(
        "/jobs", json={"type": "email", "payload": {"q": evil, evil: evil}, "idempotency_key": evil}
    ).json
    assert job["payload"] == {"q": evil, evil: evil}
    assert job["idempotency_key"] == evil
    assert producer.get(f"/jobs?type={evil}").json["jobs"] == []
    assert producer.get("/jobs?status=" + evil).status_code == 422
    held = worker.post("/jobs/claim", json={"types": [evil, "email"]}).json
    assert held["id"] == job["id"]
    worker.post(
        f"/jobs/{job['id']}/fail",
        json={"lease_token": held["lease_token"], "error": evil, "retryable": False},
    )
    assert admin.get(f"/jobs/{job['id']}").json["error"] == redact_error(evil)
    assert len(admin.get("/jobs").json["jobs"]) == 1  # the table is still there, with one row


def test_v09_idempotency_keys_are_scoped_to_their_owner(producer, keys):
    mine = producer.post(
        "/jobs", json={"type": "email", "payload": {"secret": "alice's"}, "idempotency_key": "invoice-1"}
    )
    mallory = keys.producer("mallory")
    probe_same = mallory.post(
        "/jobs", json={"type": "email", "payload": {"secret": "alice's"}, "idempotency_key": "invoice-1"}
    )
    probe_other = mallory.post(
        "/jobs", json={"type": "email", "payload": {"x": 1}, "idempotency_key": "invoice-1"}
    )
    # Mallory gets a new job of her own, then her own replay; never Alice's job nor a hint it exists.
    assert probe_same.status_code == 201
    assert probe_same.json["id"] != mine.json["id"]
    assert probe_same.json["owner"] == "mallory"
    assert probe_other.status_code == 422  # her own key, reused with other parameters
    assert f"job {probe_same.json['id']} " in probe_other.json["detail"]  # names her job, not Alice's
    assert f"job {mine.json['id']} " not in probe_other.json["detail"]
    assert mallory.get(f"/jobs/{mine.json['id']}").status_code == 404


def test_v10_secrets_in_worker_errors_are_redacted_and_shown_to_admins_only(producer, worker, admin):
    job = enqueue(producer, max_retries=0)
    held = worker.post("/jobs/claim").json
    secret_key = held["lease_token"]
    error = (
        "Traceback: connect postgres://app:hunter2@db.internal/prod failed\n"
        "password=tr0ub4dor token=abc.def.ghi secret=shh api_key=AKxyz\n"
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig\n"
        f"key ql_{secret_key}{secret_key} and AWS AKIAIOSFODNN7EXAMPLE\n"
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
        "ValueError: the real problem"
    )
    worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": error})
    stored = admin.get(f"/jobs/{job['id']}").json["error"]
    for leaked in (
        "hunter2",
        "tr0ub4dor",
        "abc.def.ghi",
        "shh",
        "AKxyz",
        "eyJhbGciOiJIUzI1NiJ9",
        secret_key,
        "AKIAIOSFODNN7EXAMPLE",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    ):
        assert leaked not in stored, leaked
    assert "ValueError: the real problem" in stored
    assert "[REDACTED]" in stored
    # producers and workers never see error text
    assert "error" not in producer.get(f"/jobs/{job['id']}").json
    assert all("error" not in e for e in producer.get(f"/jobs/{job['id']}/events").json["events"])
    assert "error" not in producer.get("/jobs").json["jobs"][0]


def test_another_producers_job_is_404(producer, keys):
    job = enqueue(producer)
    bob = keys.producer("bob")
    assert bob.get(f"/jobs/{job['id']}").status_code == 404
    assert bob.get(f"/jobs/{job['id']}/events").status_code == 404
    assert bob.post(f"/jobs/{job['id']}/cancel").status_code == 404
    assert bob.get("/jobs").json["jobs"] == []
    assert producer.get(f"/jobs/{job['id']}").json["status"] == "pending"


def test_wrong_key_kinds_are_403(producer, worker, admin):
    job = enqueue(producer)
    worker_refused = [
        worker.post("/jobs", json={"type": "email"}),
        worker.get("/jobs"),
        worker.get(f"/jobs/{job['id']}/events"),
        worker.post(f"/jobs/{job['id']}/cancel"),
        worker.post(f"/jobs/{job['id']}/retry"),
    ]
    user_refused = [
        producer.post("/jobs/claim"),
        admin.post("/jobs/claim"),
        producer.post(f"/jobs/{job['id']}/complete", json={"lease_token": "x"}),
        admin.post(f"/jobs/{job['id']}/fail", json={"lease_token": "x", "error": "e"}),
        producer.post(f"/jobs/{job['id']}/retry"),
    ]
    for response in worker_refused + user_refused:
        assert response.status_code == 403
        assert response.json["type"].endswith("/forbidden")


def test_api_ignores_session_cookies(app, client, producer):
    """The API authenticates with keys only: a browser session (if one existed) is not a credential."""
    with client.session_transaction() as session:
        session["_user_id"] = "1"  # flask-login's key for the admin user
        session["_fresh"] = True
    assert client.get("/jobs").status_code == 401
