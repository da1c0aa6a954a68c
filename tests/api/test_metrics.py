"""GET /metrics: Prometheus text that agrees with the database, under several gunicorn processes."""

from __future__ import annotations

import requests
from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str, key: str) -> dict[tuple[str, tuple], float]:
    response = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_agree_with_the_database_across_processes(app, keys, live_server):
    server = live_server(
        workers=2, threads=4, env={"QUEUELOG_METRICS_TOKEN": "scrape-me", "QUEUELOG_RETRY_BACKOFF_BASE": "0"}
    )
    url = server.url
    producer = requests.Session()
    producer.headers["Authorization"] = f"Bearer {keys.raw('producer', 'alice')}"
    worker = requests.Session()
    worker.headers["Authorization"] = f"Bearer {keys.raw('worker', 'w')}"
    admin_key = keys.raw("producer", "admin")

    for i in range(10):
        assert (
            producer.post(
                f"{url}/jobs", json={"type": "email", "payload": {"i": i}, "max_retries": 1}
            ).status_code
            == 201
        )
    assert (
        producer.post(
            f"{url}/jobs",
            json={"type": "email", "payload": {"i": 0}, "max_retries": 1, "idempotency_key": "k"},
        ).status_code
        == 201
    )
    assert (
        producer.post(
            f"{url}/jobs",
            json={"type": "email", "payload": {"i": 0}, "max_retries": 1, "idempotency_key": "k"},
        ).status_code
        == 200
    )  # a replay: not counted
    held = worker.post(f"{url}/jobs/claim", json={"limit": 6}).json()["jobs"]
    for job in held[:4]:
        worker.post(f"{url}/jobs/{job['id']}/complete", json={"lease_token": job["lease_token"]})
    worker.post(
        f"{url}/jobs/{held[4]['id']}/fail", json={"lease_token": held[4]["lease_token"], "error": "x"}
    )
    worker.post(
        f"{url}/jobs/{held[5]['id']}/fail",
        json={"lease_token": held[5]["lease_token"], "error": "x", "retryable": False},
    )
    admin = requests.Session()
    admin.headers["Authorization"] = f"Bearer {admin_key}"
    assert admin.post(f"{url}/jobs/{held[5]['id']}/retry").status_code == 200

    expected = {
        ("queuelog_jobs_enqueued_total", ()): 11,
        ("queuelog_jobs_claimed_total", ()): 6,
        ("queuelog_jobs_completed_total", ()): 4,
        ("queuelog_jobs_failed_total", ()): 1,
        ("queuelog_jobs_retried_total", ()): 2,
        ("queuelog_leases_expired_total", ()): 0,
        ("queuelog_jobs", (("status", "completed"), ("type", "email"))): 4,
        ("queuelog_jobs", (("status", "pending"), ("type", "email"))): 7,
        ("queuelog_jobs_pending", (("priority", "low"),)): 7,
        ("queuelog_claim_duration_seconds_count", ()): 1,
    }
    # Several scrapes land on different worker processes: each must see everyone's counts.
    for credential in ("scrape-me", admin_key, "scrape-me", admin_key):
        samples = scrape(url, credential)
        for key, value in expected.items():
            assert samples.get(key, 0) == value, (key, samples.get(key))
        assert 0 <= samples[("queuelog_oldest_pending_age_seconds", ())] < 60

    queue = app.extensions["queuelog"]["queue"]
    statuses = [job["status"] for job in queue.list_jobs(limit=100)]
    assert statuses.count("pending") == 7 and statuses.count("completed") == 4


def test_metrics_need_the_token_or_an_admin_key(client, producer, worker, admin):
    assert client.get("/metrics").status_code == 401
    assert producer.get("/metrics").status_code == 403
    assert worker.get("/metrics").status_code == 403
    response = admin.get("/metrics")
    assert response.status_code == 200
    families = {f.name for f in text_string_to_metric_families(response.get_data(as_text=True))}
    assert {"queuelog_jobs_enqueued", "queuelog_jobs", "queuelog_claim_duration_seconds"} <= families


def test_metrics_show_each_types_limits_beside_its_running_jobs(app, admin, producer, worker):
    types = app.extensions["queuelog"]["queue"].types
    types.update("email", concurrency_limit=2, rate_limit=100, rate_period=60)
    types.update("pdf", paused=True)
    for _ in range(3):
        assert producer.post("/jobs", json={"type": "email"}).status_code == 201
    assert len(worker.post("/jobs/claim", json={"limit": 10}).get_json()["jobs"]) == 2
    samples = {}
    for family in text_string_to_metric_families(admin.get("/metrics").get_data(as_text=True)):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    email, pdf, sync = (("type", "email"),), (("type", "pdf"),), (("type", "sync"),)
    assert samples[("queuelog_type_concurrency_limit", email)] == 2
    assert samples[("queuelog_jobs", (("status", "running"), *email))] == 2
    assert samples[("queuelog_type_rate_limit", email)] == 100
    assert samples[("queuelog_type_rate_period_seconds", email)] == 60
    assert (samples[("queuelog_type_paused", pdf)], samples[("queuelog_type_paused", email)]) == (1, 0)
    assert ("queuelog_type_concurrency_limit", pdf) not in samples
    assert ("queuelog_type_rate_limit", sync) not in samples
