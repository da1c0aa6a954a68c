"""The job types' JSON API on both engines (admins only; docs/flow-control.md): list, read, add, change
settings and limits; each status the API answers, and answers that match the served document."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from queuelog.models import AuditLog, JobType

LIMITED = {"concurrency_limit": 3, "rate_limit": 100, "rate_period": 60}


def patch(caller, path: str, body, **kw):
    return caller.client.patch(path, json=body, headers=caller.headers, **kw)


def audit_rows(app) -> list[tuple[str, str, str, str]]:
    with app.extensions["queuelog"]["db"].session() as session:
        rows = session.scalars(select(AuditLog).where(AuditLog.action.like("type.%")).order_by(AuditLog.id))
        return [(r.actor, r.action, r.target, r.detail) for r in rows]


def test_list_read_and_change_limits(app, admin, producer, worker, served):
    listing = admin.get("/types")
    assert listing.status_code == 200
    served("/types", "get", 200, listing.json)
    assert [t["name"] for t in listing.json["types"]] == ["email", "pdf", "sync"]
    email = listing.json["types"][0]
    assert {k: email[k] for k in (*LIMITED, "running", "enabled", "paused")} == {
        "concurrency_limit": None, "rate_limit": None, "rate_period": None, "running": 0,
        "enabled": True, "paused": False,
    }  # fmt: skip
    assert email["created_at"].endswith("Z") and email["payload_schema"] is None

    for _ in range(2):
        producer.post("/jobs", json={"type": "email"})
    worker.post("/jobs/claim", json={"types": ["email"], "limit": 2})
    changed = patch(admin, "/types/email", {"concurrency_limit": 3, "rate_limit": 100})
    assert changed.status_code == 200, changed.json
    served("/types/{name}", "patch", 200, changed.json)
    assert {k: changed.json[k] for k in (*LIMITED, "running")} == {**LIMITED, "running": 2}
    assert admin.get("/types/email").json == changed.json
    served("/types/{name}", "get", 200, changed.json)

    paused = patch(
        admin, "/types/email", {"paused": True, "description": "Mail\nto people", "rate_period": 30}
    )
    assert (paused.json["paused"], paused.json["description"], paused.json["rate_period"]) == (
        True, "Mail\nto people", 30,
    )  # fmt: skip
    assert paused.json["concurrency_limit"] == 3  # what was not given stays
    removed = patch(admin, "/types/email", {"concurrency_limit": None, "rate_limit": None, "paused": False})
    assert {k: removed.json[k] for k in LIMITED} == dict.fromkeys(LIMITED)
    assert patch(admin, "/types/email", {}).json == removed.json  # nothing given: nothing changes

    assert audit_rows(app) == [
        ("admin", "type.update", "email",
         "concurrency_limit: none -> 3; rate_limit: none -> 100; rate_period: none -> 60"),
        ("admin", "type.update", "email", "description changed; paused: false -> true; rate_period: 60 -> 30"),
        ("admin", "type.update", "email",
         "paused: true -> false; concurrency_limit: 3 -> none; rate_limit: 100 -> none; rate_period: 30 -> none"),
    ]  # fmt: skip


def test_a_changed_rate_starts_with_a_full_bucket(app, admin, queue):
    assert patch(admin, "/types/pdf", {"rate_limit": 10, "rate_period": 60}).status_code == 200
    moment = datetime(2030, 1, 1, tzinfo=UTC)
    queue.engine.update_job_type("pdf", {"rate_tokens": 4.0, "rate_checked_at": moment})  # as a claim does
    patch(admin, "/types/pdf", {"concurrency_limit": 2, "rate_limit": 10})  # the same rate: the bucket stays
    assert (queue.types.get("pdf").rate_tokens, queue.types.get("pdf").rate_checked_at) == (4.0, moment)
    patch(admin, "/types/pdf", {"rate_limit": 20})
    assert (queue.types.get("pdf").rate_tokens, queue.types.get("pdf").rate_checked_at) == (None, None)


@pytest.mark.parametrize(
    ("field", "value"),
    [("concurrency_limit", v) for v in (0, -1, 1.5, 1.0, True, "2", 10_001, [3], {"n": 3})]
    + [("rate_limit", v) for v in (0, 1_000_001, False, "100/m")]
    + [("rate_period", v) for v in (0, 86_401, 0.5)],
)
def test_a_bad_limit_is_a_422_naming_the_field(admin, field, value):
    patch(admin, "/types/email", {"concurrency_limit": 7, "rate_limit": 5})
    before = admin.get("/types/email").json
    refused = patch(admin, "/types/email", {"paused": True, field: value})
    assert refused.status_code == 422, refused.json
    assert refused.json["type"] == "/problems/validation-failed"
    assert [e["field"] for e in refused.json["errors"]] == [field]
    assert refused.json["errors"][0]["message"].startswith("must be an integer from 1 to ")
    assert admin.get("/types/email").json == before  # nothing saved, the pause neither


def test_unknown_fields_and_bodies_that_are_no_objects_are_422(admin):
    unknown = patch(admin, "/types/email", {"concurrency": 3, "colour": "red", "paused": True})
    assert unknown.status_code == 422
    assert sorted(e["field"] for e in unknown.json["errors"]) == ["colour", "concurrency"]
    assert unknown.json["errors"][0]["message"] == "unknown field"
    assert patch(admin, "/types/email", [1]).status_code == 422
    assert patch(admin, "/types/email", {"paused": None}).json["errors"][0]["field"] == "paused"
    assert admin.get("/types/email").json["paused"] is False


def test_an_unknown_type_is_404(admin):
    for response in (admin.get("/types/nope"), patch(admin, "/types/nope", {"concurrency_limit": 1})):
        assert response.status_code == 404
        assert response.json["type"] == "/problems/not-found"
        assert response.json["detail"] == "job type 'nope' does not exist"
    long = admin.get("/types/" + "x" * 3000)  # the detail quotes 64 characters, not the whole path
    assert long.status_code == 404 and long.json["detail"] == f"job type '{'x' * 64}…' does not exist"


@pytest.mark.parametrize("name", ["email%00", "%00", "a%00b", "email%ED%A0%80"])
def test_a_name_no_type_can_have_is_404_on_every_method(admin, name):
    """A NUL (or a lone surrogate) in the path: PostgreSQL cannot compare such a string, so the name must
    not reach the database as one to look up."""
    for response in (admin.get(f"/types/{name}"), patch(admin, f"/types/{name}", {"concurrency_limit": 1})):
        assert response.status_code == 404, response.json
        assert response.json["type"] == "/problems/not-found"
    for response in (patch(admin, f"/types/{name}", {}), patch(admin, f"/types/{name}", {"paused": True})):
        assert response.status_code == 404, response.json


@pytest.mark.parametrize("method", ["get list", "get one", "patch", "post"])
def test_only_admins_may_manage_types(app, client, keys, producer, worker, method):
    def send(headers):
        if method == "get list":
            return client.get("/types", headers=headers)
        if method == "get one":
            return client.get("/types/email", headers=headers)
        if method == "patch":
            return client.patch("/types/email", json={"concurrency_limit": 1}, headers=headers)
        return client.post("/types", json={"name": "report"}, headers=headers)

    anonymous = send({})
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"].startswith("Bearer")
    assert send({"Authorization": "Bearer ql_not-a-key"}).status_code == 401
    for caller in (producer, worker):
        refused = send(caller.headers)
        assert refused.status_code == 403, caller.name
        assert refused.json["detail"] == "this key may not manage job types."
    assert app.extensions["queuelog"]["queue"].types.get("email").concurrency_limit is None
    assert [t.name for t in app.extensions["queuelog"]["queue"].types.all()] == ["email", "pdf", "sync"]


def test_add_a_type(app, admin, producer, served):
    body = {"name": "invoice.monthly:v2", "description": "Statements", "payload_schema": {"type": "object"}}
    created = admin.post("/types", json=body)
    assert created.status_code == 201, created.json
    served("/types", "post", 201, created.json)
    assert created.headers["Location"].endswith("/types/invoice.monthly:v2")
    assert created.json["payload_schema"] == {"type": "object"} and created.json["running"] == 0
    assert admin.get("/types/invoice.monthly:v2").json == created.json
    assert producer.post("/jobs", json={"type": "invoice.monthly:v2"}).status_code == 201
    assert ("admin", "type.create", "invoice.monthly:v2", None) in audit_rows(app)

    for bad, field in (
        ({"name": "invoice.monthly:v2"}, "name"),  # taken
        ({"name": "-dash"}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"name": "two\nlines"}, "name"),
        ({"name": "report", "payload_schema": {"$ref": "https://example.com/s.json"}}, "payload_schema"),
        ({"name": "report", "payload_schema": {"type": 5}}, "payload_schema"),
        ({"name": "report", "payload_schema": []}, "payload_schema"),
        ({"name": "report", "description": "a\u0000b"}, "description"),
        ({"name": "report", "concurrency_limit": 3}, "concurrency_limit"),
        ({}, "name"),
    ):
        refused = admin.post("/types", json=bad)
        assert refused.status_code == 422, bad
        assert refused.json["errors"][0]["field"] == field, (bad, refused.json)
    # each bad field in one answer: a name no type can have, a description, and a schema the queue refuses
    every = {"name": "-dash", "description": "a\u0000b", "payload_schema": {"$ref": "https://example.com/s"}}
    refused = admin.post("/types", json=every)
    assert [e["field"] for e in refused.json["errors"]] == ["name", "description", "payload_schema"]
    assert refused.json["errors"][2]["message"].startswith("refers to 'https://example.com/s'")
    assert "report" not in [t["name"] for t in admin.get("/types").json["types"]]


def test_two_admins_patching_the_rate_at_once_lose_neither_change(app, keys):
    """One admin raises the rate limit while another shortens its period: both changes are kept, and each
    audit row tells what its own change did. The type's row is held locked by another writer until both
    requests have read the type, so that their writes come one after the other on what each had read."""
    first, second = keys.admin("admin"), keys.admin("other-admin")
    assert patch(first, "/types/email", {"rate_limit": 100, "rate_period": 60}).status_code == 200
    db = app.extensions["queuelog"]["db"]
    answers: dict[str, int] = {}

    def send(caller, body):
        answers[caller.name] = patch(caller, "/types/email", body).status_code

    with db.session(write=True) as session, session.begin():
        session.scalar(select(JobType).where(JobType.name == "email").with_for_update())
        threads = [
            threading.Thread(target=send, args=(first, {"rate_limit": 200})),
            threading.Thread(target=send, args=(second, {"rate_period": 30})),
        ]
        for thread in threads:
            thread.start()
        time.sleep(1.5)  # both requests read the type, then wait for the row
    for thread in threads:
        thread.join(30)
    assert answers == {"admin": 200, "other-admin": 200}
    email = first.get("/types/email").json
    assert (email["rate_limit"], email["rate_period"]) == (200, 30)
    # In either order, each on what it found: the rate_limit change saw period 60 or 30, and the other way.
    details = sorted(row[3] for row in audit_rows(app)[1:])
    assert details == ["rate_limit: 100 -> 200", "rate_period: 60 -> 30"]
