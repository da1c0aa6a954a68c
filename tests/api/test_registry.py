"""Each operation of the JSON API is declared once (queuelog/api/registry.py): the route, the role check,
the request's parse and the /openapi.json entry all come from that declaration, so they agree."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from queuelog.api.registry import OPERATIONS, Operation

KEYED = [op for op in OPERATIONS if op.who is not None]
REFUSING = [op for op in KEYED if not {"producer", "worker"} <= set(op.who)]  # some kind of key gets 403
WITH_BODY = [op for op in OPERATIONS if op.body is not None]


def _url(op: Operation) -> str:
    """The operation's path with a value in each variable (a job id, a name)."""
    return re.sub(r"<(?:path:)?name>", "x", re.sub(r"<jobid:\w+>", "1", op.rule))


def _send(caller, op: Operation, **kw):
    return caller.client.open(_url(op), method=op.method, headers=caller.headers, **kw)


def test_each_route_has_exactly_one_operation_and_each_operation_a_route(app, client):
    document = client.get("/openapi.json").json
    documented = Counter(
        (path, method.upper()) for path, item in document["paths"].items() for method in item
    )
    served = Counter()
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("api."):
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            for method in rule.methods - {"HEAD", "OPTIONS"}:
                served[(path, method)] += 1
    assert served and set(served.values()) == {1}
    assert set(documented.values()) == {1}
    assert served.keys() - documented.keys() == set()  # every route is documented...
    assert documented.keys() - served.keys() == set()  # ...and every documented operation is served
    declared = Counter((op.path, op.method) for op in OPERATIONS)
    assert declared == served


@pytest.mark.parametrize("op", REFUSING, ids=lambda op: f"{op.method} {op.rule}")
def test_a_key_of_another_kind_gets_the_declared_403(client, keys, op):
    """A worker's key where workers may not call, else a (non-admin) producer's key."""
    stranger = keys.worker("stranger-worker") if "worker" not in op.who else keys.producer("stranger")
    answer = _send(stranger, op, json={})
    assert answer.status_code == 403
    assert answer.json["detail"] == f"this key may not {op.to}."
    documented = client.get("/openapi.json").json["paths"][op.path][op.method.lower()]["responses"]
    assert op.refusal in documented["403"]["description"]


@pytest.mark.parametrize("op", KEYED, ids=lambda op: f"{op.method} {op.rule}")
def test_a_keyed_operation_wants_a_key(client, op):
    answer = client.open(_url(op), method=op.method, json={})
    assert answer.status_code == 401


def _allowed(op: Operation, keys):
    if "worker" in op.who:
        return keys.worker()
    return keys.admin() if "admin" in op.who else keys.producer()


@pytest.mark.parametrize("op", WITH_BODY, ids=lambda op: f"{op.method} {op.rule}")
def test_each_declared_body_is_judged_before_the_view(client, keys, op):
    """An unknown field is 422 before the view looks anything up (no 404 for job 1 or name x), and the
    document declares that body. (A schedule's patch names what the queue layer refuses of it too, so
    it needs the schedule.)"""
    if op.rule.startswith("/schedules/<name>"):
        made = keys.admin().post("/schedules", json={"name": "x", "type": "email", "interval_seconds": 60})
        assert made.status_code == 201
    answer = _send(_allowed(op, keys), op, json={"no_such_field": 1})
    assert answer.status_code == 422, answer.json
    assert {"field": "no_such_field", "message": "unknown field"} in answer.json["errors"]
    entry = client.get("/openapi.json").json["paths"][op.path][op.method.lower()]
    schema = entry["requestBody"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": f"#/components/schemas/{op.body.name}"}


def test_only_operations_with_a_body_document_one(client):
    paths = client.get("/openapi.json").json["paths"]
    with_body = {(path, method.upper()) for path, item in paths.items() for method, entry in item.items()
                 if "requestBody" in entry}  # fmt: skip
    assert with_body == {(op.path, op.method) for op in WITH_BODY}


def test_prefer_is_documented_where_it_is_honoured(client, keys, app):
    paths = client.get("/openapi.json").json["paths"]
    preferring = {
        (path, method.upper())
        for path, item in paths.items()
        for method, entry in item.items()
        if any(p["name"] == "Prefer" for p in entry.get("parameters", ()))
    }
    assert preferring == {(op.path, op.method) for op in OPERATIONS if op.minimal}
    assert preferring  # and one of them answers compactly when asked, the others never say so
    keys.admin().post("/jobs", json={"type": "email"})
    claimed = keys.worker().post("/jobs/claim", headers={"Prefer": "return=minimal"})
    assert claimed.headers["Preference-Applied"] == "return=minimal"
    listed = keys.admin().get("/jobs", headers={"Prefer": "return=minimal"})
    assert listed.status_code == 200 and "Preference-Applied" not in listed.headers
