"""Who may do what (docs/api.md#authentication-and-errors), written once on the principal (queuelog/queue/principal.py) and asked
by both faces: each rule is checked on the principal alone, through the JSON API and through the pages."""

from __future__ import annotations

import re

import pytest

from queuelog.queue import Code, NotAllowed
from queuelog.queue.principal import Principal
from tests.conftest import Browser

ADMIN = Principal("user", "root", "admin")
ALICE = Principal("user", "alice", "producer")
BOB = Principal("user", "bob", "producer")
WORKER = Principal("worker", "worker-1")
OTHER_WORKER = Principal("worker", "worker-2")


def _job(
    status: str = "pending",
    owner: str = "alice",
    worker_id: str | None = None,
    cancel_requested: bool = False,
) -> dict:
    return {"owner": owner, "status": status, "worker_id": worker_id, "cancel_requested": cancel_requested}


@pytest.mark.parametrize(
    ("who", "sees", "held", "ceiling", "errors", "scope"),
    [
        (ADMIN, True, False, 30, True, None),
        (ALICE, True, False, 10, False, "alice"),
        (BOB, False, False, 10, False, "bob"),
        (WORKER, True, True, 10, False, "worker-1"),
        (OTHER_WORKER, False, False, 10, False, "worker-2"),
    ],
)
def test_the_rules_on_the_principal(who, sees, held, ceiling, errors, scope):
    running = _job("running", worker_id="worker-1")
    assert who.may_see(running) is sees
    assert who.holds(running) is held
    assert who.priority_ceiling == ceiling and who.sees_errors is errors and who.owner_scope == scope
    assert who.may_see(None) is False


def test_cancel_and_retry_on_the_principal():
    assert ALICE.may_cancel(_job()) and ADMIN.may_cancel(_job())
    assert not BOB.may_cancel(_job()) and not WORKER.may_cancel(_job())
    # A running job's cancellation is asked for once (docs/running-jobs.md); finished jobs stay as they are.
    assert ALICE.may_cancel(_job("running")) and not BOB.may_cancel(_job("running"))
    assert not ALICE.may_cancel(_job("running", cancel_requested=True))
    assert not ADMIN.may_cancel(_job("completed")) and not ADMIN.may_cancel(_job("cancelled"))
    assert ADMIN.may_retry(_job("failed")) and ADMIN.may_retry(_job("cancelled"))
    assert not ADMIN.may_retry(_job("completed")) and not ALICE.may_retry(_job("failed"))
    assert ALICE.sees_idempotency_key(_job()) and not BOB.sees_idempotency_key(_job())


def test_the_priority_ceiling_is_a_refusal_with_a_code():
    ALICE.check_priority(10)
    ADMIN.check_priority(30)
    with pytest.raises(NotAllowed) as info:
        ALICE.check_priority(20, "jobs[2].priority")
    assert info.value.code is Code.PRIORITY_NOT_ALLOWED and info.value.field == "jobs[2].priority"
    assert info.value.params == {"ceiling": 10}


# -- through the faces --------------------------------------------------------------------------------


def _browser(app, keys, name: str) -> Browser:
    keys.raw("producer", name)  # makes the user with password "password-<name>"
    b = Browser(app.test_client())
    assert b.login(name, f"password-{name}").status_code == 302
    return b


def test_others_jobs_are_hidden_on_both_faces(app, keys, producer, producer_browser):
    job = producer.post("/jobs", json={"type": "email"}).json
    bob = keys.producer("bob")
    bob_browser = _browser(app, keys, "bob")
    assert bob.get(f"/jobs/{job['id']}").status_code == 404
    assert bob.get(f"/jobs/{job['id']}/events").status_code == 404
    assert bob_browser.get(f"/queue/{job['id']}").status_code == 404
    assert bob.get("/jobs").json["jobs"] == []
    assert f'href="/queue/{job["id"]}"' not in bob_browser.get("/queue").get_data(as_text=True)
    assert producer.get(f"/jobs/{job['id']}").status_code == 200
    assert f'href="/queue/{job["id"]}"' in producer_browser.get("/queue").get_data(as_text=True)


def test_only_the_holding_worker_sees_a_job(keys, producer, worker):
    job = producer.post("/jobs", json={"type": "email"}).json
    other = keys.worker("worker-2")
    assert worker.get(f"/jobs/{job['id']}").status_code == 404  # not held yet
    claimed = worker.post("/jobs/claim").json
    assert worker.get(f"/jobs/{job['id']}").status_code == 200
    assert other.get(f"/jobs/{job['id']}").status_code == 404
    worker.post(f"/jobs/{job['id']}/complete", json={"lease_token": claimed["lease_token"]})
    assert worker.get(f"/jobs/{job['id']}").status_code == 404  # held no more


def test_only_admins_see_error_text_on_both_faces(producer, worker, admin, admin_browser, producer_browser):
    job = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
    claimed = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{job['id']}/fail", json={"lease_token": claimed["lease_token"], "error": "disk-full-42"}
    )
    assert admin.get(f"/jobs/{job['id']}").json["error"] == "disk-full-42"
    assert "error" not in producer.get(f"/jobs/{job['id']}").json
    assert "error" not in producer.get(f"/jobs/{job['id']}/events").json["events"][-1]
    assert "disk-full-42" in admin_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    assert "disk-full-42" not in producer_browser.get(f"/queue/{job['id']}").get_data(as_text=True)


def test_the_priority_ceiling_on_both_faces(producer, admin, producer_browser, admin_browser):
    refused = producer.post("/jobs", json={"type": "email", "priority": "high"})
    assert refused.status_code == 403 and refused.json["type"].endswith("/forbidden")
    assert refused.json["detail"] == "producers may enqueue low and medium priority only"
    batch = producer.post(
        "/jobs/batch", json={"jobs": [{"type": "email"}, {"type": "email", "priority": "high"}]}
    )
    assert batch.status_code == 403 and batch.json["detail"].startswith("jobs[1]: producers may")
    assert producer.post("/jobs", json={"type": "email", "priority": "medium"}).status_code == 201
    assert admin.post("/jobs", json={"type": "email", "priority": "critical"}).status_code == 201
    page = producer_browser.submit("/submit", type="email", payload="{}", priority="high", max_retries="3")
    assert page.status_code == 422
    assert re.search(
        r'id="priority-error">Producers may use the priorities low and medium only\.<',
        page.get_data(as_text=True),
    )
    offered = re.findall(r'<option[^>]*value="(\w+)"', producer_browser.get("/submit").get_data(as_text=True))
    assert {"high", "critical"}.isdisjoint(offered) and {"low", "medium"} <= set(offered)
    assert (
        admin_browser.submit(
            "/submit", type="email", payload="{}", priority="high", max_retries="3"
        ).status_code
        == 302
    )


def test_cancelling_anothers_job_is_404_on_both_faces(app, keys, producer, producer_browser):
    first = producer.post("/jobs", json={"type": "email"}).json
    second = producer.post("/jobs", json={"type": "email"}).json
    bob = keys.producer("bob")
    bob_browser = _browser(app, keys, "bob")
    assert bob.post(f"/jobs/{first['id']}/cancel").status_code == 404
    page = bob_browser.submit("/queue", f"/queue/{first['id']}/cancel")
    assert page.status_code == 404
    assert producer.get(f"/jobs/{first['id']}").json["status"] == "pending"
    assert producer.post(f"/jobs/{first['id']}/cancel").json["status"] == "cancelled"
    assert (
        producer_browser.submit(f"/queue/{second['id']}", f"/queue/{second['id']}/cancel").status_code == 302
    )
    assert producer.get(f"/jobs/{second['id']}").json["status"] == "cancelled"
    assert 'action="/queue/' not in producer_browser.get(f"/queue/{second['id']}").get_data(as_text=True)


def test_only_admins_retry_on_both_faces(producer, admin, producer_browser, admin_browser):
    job = producer.post("/jobs", json={"type": "email"}).json
    producer.post(f"/jobs/{job['id']}/cancel")
    assert producer.post(f"/jobs/{job['id']}/retry").status_code == 403
    assert producer_browser.submit(f"/queue/{job['id']}", f"/queue/{job['id']}/retry").status_code == 403
    assert "/retry" not in producer_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    assert f"/queue/{job['id']}/retry" in admin_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    assert admin_browser.submit(f"/queue/{job['id']}", f"/queue/{job['id']}/retry").status_code == 302
    assert admin.get(f"/jobs/{job['id']}").json["status"] == "pending"
    assert admin.post(f"/jobs/{job['id']}/cancel").json["status"] == "cancelled"
    assert admin.post(f"/jobs/{job['id']}/retry").json["status"] == "pending"
