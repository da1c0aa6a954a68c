"""GET /metrics shows batches by status and waiting jobs (docs/batches.md#metrics), on both engines."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(admin) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(admin.get("/metrics").get_data(as_text=True)):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def batches(admin) -> dict[str, float]:
    return {
        dict(labels)["status"]: v
        for (name, labels), v in samples(admin).items()
        if name == "queuelog_batches"
    }


def test_batches_by_status_and_waiting_jobs(admin, producer, worker):
    assert batches(admin) == {"running": 0, "succeeded": 0, "finished_with_failures": 0}
    chain = {"jobs": [{"type": "email", "ref": "a"}, {"type": "email", "depends_on": ["a"]}]}
    first = producer.post("/batches", json=chain).json
    second = producer.post("/batches", json=chain).json
    assert batches(admin) == {"running": 2, "succeeded": 0, "finished_with_failures": 0}
    assert samples(admin)[("queuelog_jobs", (("status", "waiting"), ("type", "email")))] == 2
    assert producer.post(f"/batches/{second['id']}/cancel").status_code == 202
    for _ in range(2):  # the first batch's two jobs, in order
        held = worker.post("/jobs/claim").json
        assert held["id"] in first["jobs"]
        worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    assert batches(admin) == {"running": 0, "succeeded": 1, "finished_with_failures": 1}
    assert samples(admin).get(("queuelog_jobs", (("status", "waiting"), ("type", "email"))), 0) == 0
