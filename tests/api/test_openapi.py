"""/openapi.json describes every route the JSON API serves, with the methods it answers, the limits the
API keeps (the configured ones as configured), and refuses what the API refuses."""

from __future__ import annotations

import json
import re
from datetime import datetime

import jsonschema_rs
import pytest
from openapi_spec_validator import validate

from queuelog import create_app
from queuelog.queue.admin import AdminStore
from tests.conftest import ADMIN_PASSWORD, Keys


def test_every_api_route_is_documented(app, client):
    document = client.get("/openapi.json").json
    validate(document)
    documented = {(path, method.upper()) for path, item in document["paths"].items() for method in item}
    served = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("api."):
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            served |= {(path, m) for m in rule.methods - {"HEAD", "OPTIONS"}}
    assert served == documented


def _judge(document: dict, name: str) -> jsonschema_rs.Validator:
    """A validator of one served schema, compiled from the served text."""
    root = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema_rs.Draft202012Validator(root)


@pytest.mark.parametrize(
    ("schema", "path", "body", "field"),
    [
        ("JobBody", "/jobs", {"type": ""}, "type"),
        ("JobBody", "/jobs", {"type": "email\n"}, "type"),
        ("JobBody", "/jobs", {"type": "email", "idempotency_key": "key\u200b"}, "idempotency_key"),
        ("JobBody", "/jobs", {"type": "email", "run_at": "2030-01-31 12:00:00Z"}, "run_at"),
        ("JobBody", "/jobs", {"type": "email", "run_at": "1999-12-31T23:00:00Z"}, "run_at"),
        ("ClaimBody", "/jobs/claim", {"types": ["email", "x" * 65]}, "types[1]"),
        ("ClaimBody", "/jobs/claim", {"types": ["pdf\t"]}, "types[0]"),
        ("CompleteBody", "/jobs/1/complete", {"lease_token": "t" * 65}, "lease_token"),
        ("FailBody", "/jobs/1/fail", {"lease_token": "t\n", "error": "x"}, "lease_token"),
    ],
)
def test_the_document_refuses_what_the_api_refuses(client, admin, worker, schema, path, body, field):
    document = client.get("/openapi.json").json
    assert not _judge(document, schema).is_valid(body)
    caller = admin if path == "/jobs" else worker
    response = caller.post(path, json=body)
    assert response.status_code == 422
    assert response.json["errors"][0]["field"] == field


def test_the_list_query_is_described_with_its_limits(client, producer):
    parameters = {
        p["name"]: p["schema"]
        for p in client.get("/openapi.json").json["paths"]["/jobs"]["get"]["parameters"]
    }
    assert parameters["limit"]["maximum"] == 200
    assert parameters["type"]["maxLength"] == 64
    cursor = re.compile(parameters["cursor"]["pattern"])
    first = producer.get("/jobs?limit=1")
    assert first.status_code == 200
    for _ in range(3):
        producer.post("/jobs", json={"type": "email"})
    cursor_value = producer.get("/jobs?limit=1").json["next_cursor"]
    assert cursor.fullmatch(cursor_value)
    assert producer.get(f"/jobs?cursor={cursor_value}").status_code == 200
    assert producer.get("/jobs?cursor=aWQ6M!!").status_code == 422  # outside the pattern: refused


def test_the_document_carries_the_configured_limits(database_url):
    settings = {
        "MAX_PAYLOAD_BYTES": 1000,
        "MAX_PAYLOAD_DEPTH": 8,
        "MAX_REQUEST_BYTES": 5000,
        "LEASE_SECONDS": 120,
    }
    base = {"DATABASE_URL": database_url, "SECRET_KEY": "k", "ADMIN_PASSWORD": ADMIN_PASSWORD}
    app = create_app({"TESTING": True, "QUEUELOG": {**base, **settings}})
    try:
        document = app.test_client().get("/openapi.json").json
        schemas = document["components"]["schemas"]
        payload = schemas["JobBody"]["properties"]["payload"]["description"]
        assert "At most 1,000 bytes serialized" in payload and "at most 8 levels deep" in payload
        assert "65,536" not in json.dumps(document)
        assert schemas["ClaimBody"]["properties"]["lease_seconds"]["default"] == 120
        assert "5,000 bytes" in document["paths"]["/jobs"]["post"]["responses"]["413"]["description"]
        assert "5,000 bytes" in document["info"]["description"]
        # ...and the API keeps to them.
        producer = Keys(app, app.test_client()).admin()
        too_big = producer.post("/jobs", json={"type": "email", "payload": {"x": "y" * 1000}})
        assert too_big.status_code == 422 and too_big.json["errors"][0]["field"] == "payload"
        assert producer.post("/jobs", json={"type": "email", "payload": {"x": "y" * 900}}).status_code == 201
        key = AdminStore(app.extensions["queuelog"]["db"]).create_key("w", "worker")
        held = app.test_client().post("/jobs/claim", headers={"Authorization": f"Bearer {key}"}).json
        lease = datetime.fromisoformat(held["lease_expires_at"]) - datetime.fromisoformat(held["claimed_at"])
        assert lease.total_seconds() == 120
    finally:
        app.extensions["queuelog"]["db"].dispose()
