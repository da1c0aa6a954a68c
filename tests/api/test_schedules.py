"""The schedules' JSON API on both engines (admins only): create, list, read, change, pause and resume,
run now, delete; bad input is a 422 naming the field; answers match the served document."""

from __future__ import annotations

import pytest

from queuelog.api.openapi import document

BODY = {"name": "nightly", "type": "email", "cron": "30 2 * * *", "timezone": "America/New_York",
        "payload": {"to": "ops@example.com"}, "priority": "high"}  # fmt: skip


def patch(caller, path: str, body):
    return caller.client.patch(path, json=body, headers=caller.headers)


def delete(caller, path: str):
    return caller.client.delete(path, headers=caller.headers)


def test_create_read_list_change_run_delete(admin, served):
    created = admin.post("/schedules", json=BODY)
    assert created.status_code == 201, created.json
    assert created.headers["Location"].endswith("/schedules/nightly")
    body = created.json
    served("/schedules", "post", 201, body)
    assert (body["name"], body["priority"], body["missed"], body["paused"]) == (
        "nightly",
        "high",
        "fire_once",
        False,
    )
    assert len(body["upcoming"]) == 5 and body["next_fire_at"] == body["upcoming"][0]
    assert all(
        t.endswith(("06:30:00.000000Z", "07:30:00.000000Z")) for t in body["upcoming"]
    )  # 02:30 EST/EDT
    assert admin.get("/schedules/nightly").json == body
    listing = admin.get("/schedules").json
    served("/schedules", "get", 200, listing)
    assert [s["name"] for s in listing["schedules"]] == ["nightly"]

    paused = patch(admin, "/schedules/nightly", {"paused": True})
    assert paused.status_code == 200 and paused.json["paused"] is True
    assert paused.json["upcoming"] == [] and paused.json["next_fire_at"] is None
    every = patch(admin, "/schedules/nightly", {"interval_seconds": 600, "paused": False})
    served("/schedules/{name}", "patch", 200, every.json)
    assert (every.json["cron"], every.json["interval_seconds"], every.json["priority"]) == (None, 600, "high")
    assert every.json["upcoming"][0] == every.json["next_fire_at"]  # an interval counts from its next slot
    assert every.json["payload"] == {"to": "ops@example.com"}  # what was not given stays

    ran = admin.post("/schedules/nightly/run")
    assert ran.status_code == 201
    served("/schedules/{name}/run", "post", 201, ran.json)
    assert ran.json["owner"] == "schedule:nightly" and ran.json["priority"] == "high"
    events = admin.get(f"/jobs/{ran.json['id']}/events").json["events"]
    assert [(e["event"], e["actor"]) for e in events] == [("enqueued", "schedule:nightly")]

    assert delete(admin, "/schedules/nightly").status_code == 204
    assert delete(admin, "/schedules/nightly").status_code == 404
    assert admin.get("/schedules/nightly").json["type"] == "/problems/not-found"
    assert admin.post("/schedules/nightly/run").status_code == 404
    assert admin.get(f"/jobs/{ran.json['id']}").status_code == 200  # its jobs stay


def test_only_admins(producer, worker):
    for caller in (producer, worker):
        assert caller.get("/schedules").status_code == 403
        assert caller.post("/schedules", json=BODY).status_code == 403


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "every day"}, "cron"),
        ({"cron": None, "interval_seconds": 0}, "interval_seconds"),
        ({"cron": None, "interval_seconds": -60}, "interval_seconds"),
        ({"cron": None}, "cron"),  # neither kind of timing
        ({"interval_seconds": 60}, "cron"),  # both
        ({"timezone": "America/Gotham"}, "timezone"),
        ({"type": "nope"}, "type"),
        ({"type": "retired"}, "type"),
        ({"type": "report", "payload": {"day": 3}}, "payload.day"),
        ({"name": "two words"}, "name"),
        ({"missed": "sometimes"}, "missed"),
        ({"priority": "urgent"}, "priority"),
        ({"payload": [1]}, "payload"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_input_is_422_naming_the_field(admin, queue, change, field):
    queue.types.add("report", "", {"type": "object", "properties": {"day": {"type": "string"}}})
    queue.types.add("retired", "")
    queue.types.update("retired", enabled=False)
    answer = admin.post("/schedules", json={**BODY, **change})
    assert answer.status_code == 422, answer.json
    assert answer.headers["Content-Type"] == "application/problem+json"
    assert field in [e["field"] for e in answer.json["errors"]]
    assert admin.get("/schedules").json == {"schedules": []}  # nothing half-written


def test_every_bad_field_is_named_at_once(admin):
    bad = {**BODY, "name": "two words", "cron": "61 * * * *", "timezone": "Nowhere/Land", "type": "nope"}
    answer = admin.post("/schedules", json=bad)
    assert answer.status_code == 422
    errors = answer.json["errors"]
    assert [e["field"] for e in errors] == ["name", "cron", "timezone", "type"]
    assert errors[1]["message"] == "is not a valid cron expression: Bad minute"
    assert errors[2]["message"] == "is not an IANA time zone (e.g. Europe/Berlin)"
    assert errors[3]["allowed"] == ["email", "pdf", "sync"]
    assert (
        answer.json["detail"].startswith("name: must be 1 to 55 letters")
        and "; cron: " in answer.json["detail"]
    )
    assert admin.get("/schedules").json == {"schedules": []}


def test_zones_that_are_no_place_are_422_and_places_201(admin):
    """One check of the zone (queuelog/queue/cron.py place_zone) for the API, the page and the CLI."""
    for name in ("localtime", "Factory", "posixrules", "right/UTC", "EST", "Etc/UTC", "Etc/GMT+5"):
        answer = admin.post("/schedules", json={**BODY, "timezone": name})
        assert answer.status_code == 422, (name, answer.json)
        assert [e["field"] for e in answer.json["errors"]] == ["timezone"], name
    assert admin.get("/schedules").json == {"schedules": []}
    for name, utc in [("Europe/Berlin", "01:30"), ("America/New_York", "07:30"), ("UTC", "02:30")]:
        created = admin.post("/schedules", json={**BODY, "name": name.replace("/", "-"), "timezone": name})
        assert created.status_code == 201, (name, created.json)
        assert created.json["timezone"] == name and created.json["upcoming"][0][11:16] == utc, name
    changed = patch(admin, "/schedules/UTC", {"timezone": "localtime"})
    assert changed.status_code == 422 and [e["field"] for e in changed.json["errors"]] == ["timezone"]
    assert admin.get("/schedules/UTC").json["timezone"] == "UTC"


def test_a_cron_that_can_never_fire_is_422_naming_cron(admin):
    never = {**BODY, "cron": "30 2 * 3 SUN#2", "timezone": "America/New_York"}  # always in the DST gap
    answer = admin.post("/schedules", json=never)
    assert answer.status_code == 422, answer.json
    assert [(e["field"], e["message"]) for e in answer.json["errors"]] == [("cron", "never matches a date")]
    assert admin.get("/schedules").json == {"schedules": []}
    assert admin.post("/schedules", json={**never, "timezone": "Europe/Berlin"}).status_code == 201
    changed = patch(admin, "/schedules/nightly", {"timezone": "America/New_York"})
    assert changed.status_code == 422 and [e["field"] for e in changed.json["errors"]] == ["cron"]
    assert admin.get("/schedules/nightly").json["timezone"] == "Europe/Berlin"


def test_unknown_schedules_are_404(admin):
    for answer in (
        admin.get("/schedules/nope"),
        delete(admin, "/schedules/nope"),
        admin.post("/schedules/nope/run"),
    ):
        assert answer.status_code == 404
        assert answer.json["type"] == "/problems/not-found"
        assert answer.json["detail"] == "schedule 'nope' does not exist"


def test_bad_changes_are_422_and_change_nothing(admin):
    before = admin.post("/schedules", json=BODY).json
    for change, field in [({"cron": "0 0 31 2 *"}, "cron"), ({"interval_seconds": 0}, "interval_seconds"),
                          ({"timezone": "Nowhere/Land"}, "timezone"), ({"type": "nope"}, "type")]:  # fmt: skip
        answer = patch(admin, "/schedules/nightly", change)
        assert answer.status_code == 422 and [e["field"] for e in answer.json["errors"]][0] == field
    assert admin.get("/schedules/nightly").json == before
    assert patch(admin, "/schedules/nope", {"paused": True}).status_code == 404
    taken = admin.post("/schedules", json=BODY)
    assert taken.status_code == 422 and taken.json["errors"][0]["field"] == "name"


def test_the_document_declares_the_shapes(app):
    doc = document(app.config["QUEUELOG"])
    assert {"ScheduleBody", "SchedulePatch", "Schedule", "ScheduleList"} <= set(doc["components"]["schemas"])
    assert set(doc["paths"]["/schedules/{name}"]) == {"get", "patch", "delete"}
