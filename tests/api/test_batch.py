"""POST /jobs/batch (all or nothing) and POST /jobs/complete (each item alone)."""

from __future__ import annotations


def test_batch_enqueue_in_order(producer):
    response = producer.post(
        "/jobs/batch", json={"jobs": [{"type": "email", "payload": {"n": i}} for i in range(5)]}
    )
    assert response.status_code == 201
    jobs = response.json["jobs"]
    assert [j["payload"]["n"] for j in jobs] == list(range(5))
    assert [j["id"] for j in jobs] == sorted(j["id"] for j in jobs)


def test_batch_enqueue_is_all_or_nothing(producer, admin):
    bodies = [{"type": "email"}, {"type": "email"}, {"type": "nope"}, {"type": "email"}]
    response = producer.post("/jobs/batch", json={"jobs": bodies})
    assert response.status_code == 422
    assert response.json["errors"][0]["field"] == "jobs[2].type"
    bad_shape = producer.post(
        "/jobs/batch", json={"jobs": [{"type": "email"}, {"type": "email", "max_retries": 99}]}
    )
    assert bad_shape.json["errors"][0]["field"] == "jobs[1].max_retries"
    assert admin.get("/jobs").json["jobs"] == []


def test_a_batch_names_each_refused_item_and_an_item_of_a_batch_of_one_by_its_index(producer, admin):
    bodies = [{"type": "nope"}, {"type": "email"}, {"type": "nope2"}]
    response = producer.post("/jobs/batch", json={"jobs": bodies})
    assert response.status_code == 422
    assert [e["field"] for e in response.json["errors"]] == ["jobs[0].type", "jobs[2].type"]
    alone = producer.post("/jobs/batch", json={"jobs": [{"type": "nope"}]})
    assert [e["field"] for e in alone.json["errors"]] == ["jobs[0].type"]
    both = producer.post(
        "/batches",
        json={
            "jobs": [{"type": "nope"}, {"type": "email"}],
            "on_success": {"type": "x"},
            "on_finish": {"type": "y"},
        },
    )
    assert [e["field"] for e in both.json["errors"]] == ["jobs[0].type", "on_success.type", "on_finish.type"]
    assert producer.post("/jobs", json={"type": "nope"}).json["errors"][0]["field"] == "type"  # one job alone
    assert admin.get("/jobs").json["jobs"] == [] and admin.get("/batches").json["batches"] == []


def test_batch_enqueue_idempotency_conflict_rolls_back_everything(producer, admin):
    producer.post("/jobs", json={"type": "email", "idempotency_key": "k", "payload": {"a": 1}})
    response = producer.post(
        "/jobs/batch",
        json={"jobs": [{"type": "email"}, {"type": "email", "idempotency_key": "k", "payload": {"a": 2}}]},
    )
    assert response.status_code == 422
    assert response.json["type"].endswith("/idempotency-key-reused")
    assert "jobs[1]" in response.json["detail"]
    assert len(admin.get("/jobs").json["jobs"]) == 1


def test_batch_enqueue_limits_and_permissions(producer, worker, admin):
    assert producer.post("/jobs/batch", json={"jobs": []}).status_code == 422
    assert producer.post("/jobs/batch", json={"jobs": [{"type": "email"}] * 501}).status_code == 422
    assert producer.post("/jobs/batch", json={"jobs": [{"type": "email"}] * 500}).status_code == 201
    too_high = producer.post(
        "/jobs/batch", json={"jobs": [{"type": "email"}, {"type": "email", "priority": "high"}]}
    )
    assert too_high.status_code == 403 and "jobs[1]" in too_high.json["detail"]
    assert worker.post("/jobs/batch", json={"jobs": [{"type": "email"}]}).status_code == 403
    assert (
        admin.post("/jobs/batch", json={"jobs": [{"type": "email", "priority": "critical"}]}).status_code
        == 201
    )
    assert producer.post("/jobs/batch", json={"jobs": [{"type": "email"}], "extra": 1}).status_code == 422


def test_batch_complete_judges_each_item(producer, worker, keys):
    producer.post("/jobs/batch", json={"jobs": [{"type": "email"}] * 4})
    held = worker.post("/jobs/claim", json={"limit": 3}).json["jobs"]
    other = keys.worker("other").post("/jobs/claim").json
    items = [
        {"id": held[0]["id"], "lease_token": held[0]["lease_token"], "result": {"n": 0}},
        {"id": held[1]["id"], "lease_token": "wrong"},
        {"id": other["id"], "lease_token": other["lease_token"]},  # held by another worker
        {"id": 999999, "lease_token": "x"},
        {"id": held[2]["id"], "lease_token": held[2]["lease_token"]},
    ]
    response = worker.post("/jobs/complete", json={"jobs": items})
    assert response.status_code == 200
    results = response.json["results"]
    assert [(r["id"], r["status"]) for r in results] == [
        (held[0]["id"], 200),
        (held[1]["id"], 409),
        (other["id"], 409),
        (999999, 404),
        (held[2]["id"], 200),
    ]
    assert results[0]["job"]["status"] == "completed" and results[0]["job"]["result"] == {"n": 0}
    assert results[1]["error"]["type"].endswith("/not-lease-holder")
    assert results[3]["error"]["type"].endswith("/not-found")
    assert worker.get(f"/jobs/{held[1]['id']}").json["status"] == "running"
    events = producer.get(f"/jobs/{held[0]['id']}/events").json["events"]
    assert [e["event"] for e in events] == ["enqueued", "claimed", "completed"]


def test_batch_complete_limits_and_permissions(worker, producer):
    assert worker.post("/jobs/complete", json={"jobs": []}).status_code == 422
    assert (
        worker.post(
            "/jobs/complete", json={"jobs": [{"id": i, "lease_token": "x"} for i in range(1, 102)]}
        ).status_code
        == 422
    )
    dup = worker.post(
        "/jobs/complete", json={"jobs": [{"id": 1, "lease_token": "x"}, {"id": 1, "lease_token": "y"}]}
    )
    assert dup.status_code == 422
    assert worker.post("/jobs/complete", json={"jobs": [{"id": True, "lease_token": "x"}]}).status_code == 422
    assert (
        worker.post("/jobs/complete", json={"jobs": [{"id": 1, "lease_token": "x", "x": 1}]}).status_code
        == 422
    )
    assert (
        worker.post(
            "/jobs/complete", json={"jobs": [{"id": 1, "lease_token": "x", "result": [1]}]}
        ).status_code
        == 422
    )
    assert producer.post("/jobs/complete", json={"jobs": [{"id": 1, "lease_token": "x"}]}).status_code == 403
