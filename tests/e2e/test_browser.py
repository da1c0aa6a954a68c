"""The main paths of the pages (docs/pages.md#the-tour) in a real browser."""

from __future__ import annotations

import re

import requests

from tests.e2e.conftest import log_in, screenshot


def test_submit_fail_redact_and_retry_across_producer_worker_and_admin(
    app, keys, live_server, new_page, console
):
    server = live_server(workers=1, threads=4)
    base = server.url
    keys.raw("producer", "alice")  # the user alice, password "password-alice"
    worker = requests.Session()
    worker.headers["Authorization"] = f"Bearer {keys.raw('worker', 'w-1')}"

    # A producer submits a job through the form, sees it listed and opens its page.
    producer = new_page()
    log_in(producer, base, "alice", "password-alice")
    producer.get_by_role("link", name="Submit").click()
    producer.get_by_label("Job type").select_option("email")
    producer.get_by_label("Payload (JSON object)").fill('{"to": "ada@example.com", "note": "<b>hi</b>"}')
    producer.get_by_label("Priority").select_option("medium")
    producer.get_by_label("Max retries").fill("0")
    producer.get_by_role("button", name="Submit").click()
    producer.wait_for_url(re.compile(r".*/queue/\d+$"))
    job_id = int(producer.url.rsplit("/", 1)[1])
    assert producer.locator("h1").inner_text().startswith(f"Job #{job_id}")
    assert "<b>hi</b>" in producer.locator("pre.json").inner_text()  # markup shown as text
    producer.get_by_role("link", name="Jobs").click()
    producer.get_by_role("link", name=f"#{job_id}").click()
    producer.wait_for_url(f"{base}/queue/{job_id}")

    # A worker fails it over the API with an error that holds a secret.
    held = worker.post(f"{base}/jobs/claim").json()
    assert held["id"] == job_id
    error = "SMTPAuthError: login failed for smtp://mailer:hunter2@mail.example password=hunter2"
    worker.post(f"{base}/jobs/{job_id}/fail", json={"lease_token": held["lease_token"], "error": error})

    # The producer's pages never show the error.
    for path in (f"/queue/{job_id}", "/queue", "/queue?status=failed", "/"):
        producer.goto(base + path)
        text = producer.locator("body").inner_text()
        assert "hunter2" not in text and "SMTPAuthError" not in text
    assert "failed" in producer.locator("body").inner_text()

    # An admin finds it on the errors page, redacted, retries it and sees it pending again.
    admin = new_page()
    log_in(admin, base)
    admin.wait_for_load_state()  # the picture of the whole page
    screenshot(admin, "dashboard")
    admin.get_by_role("link", name="Errors").click()
    group = admin.locator("section.error-group").filter(has_text="email")
    group.locator("summary").click()
    full = group.locator("pre.error-text").inner_text()
    assert "SMTPAuthError" in full and "hunter2" not in full and "[REDACTED]" in full
    screenshot(admin, "errors")
    group.get_by_role("link", name=f"#{job_id}").click()
    admin.wait_for_url(f"{base}/queue/{job_id}")
    assert "[REDACTED]" in admin.locator("pre.error-text").first.inner_text()
    admin.get_by_role("button", name="Retry job").click()
    admin.wait_for_url(f"{base}/queue/{job_id}")
    assert admin.locator("h1 .badge").inner_text() == "pending"
    assert f"Job {job_id} is pending again." in admin.locator(".flash").inner_text()
    assert console.problems == []


def test_bad_payload_shows_the_error_beside_the_field_and_creates_nothing(
    app, keys, live_server, new_page, console
):
    server = live_server(workers=1, threads=4)
    keys.raw("producer", "alice")
    page = new_page()
    log_in(page, server.url, "alice", "password-alice")
    page.goto(f"{server.url}/submit")
    page.get_by_label("Payload (JSON object)").fill('{"to": ')
    page.get_by_role("button", name="Submit").click()
    message = page.locator("#payload-error")
    assert message.inner_text().startswith("Not valid JSON")
    # beside the field: right after the textarea, inside the same field block
    assert page.locator(".field.has-error textarea#payload").count() == 1
    assert (
        page.get_by_label("Payload (JSON object)").input_value() == '{"to": '
    )  # nothing the person typed is lost
    page.get_by_label("Payload (JSON object)").fill('["not", "an object"]')
    page.get_by_role("button", name="Submit").click()
    assert (
        "must be a JSON object" in page.locator("#payload-error").inner_text()
    )  # "The payload must be a JSON object."
    assert app.extensions["queuelog"]["queue"].list_jobs() == []
    assert console.problems == []


def test_every_page_renders_without_console_errors_on_a_phone(
    app, keys, live_server, new_page, console, producer, worker
):
    server = live_server(workers=1, threads=4)
    job = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
    held = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "ValueError: 42"}
    )
    page = new_page(viewport=(390, 844))
    log_in(page, server.url)
    paths = [
        "/",
        "/submit",
        "/queue",
        f"/queue/{job['id']}",
        "/admin/errors",
        "/admin/users",
        "/admin/keys",
        "/admin/types",
        "/admin/types/email",
        "/admin/audit",
    ]
    for path in paths:
        response = page.goto(server.url + path)
        assert response.status == 200, path
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 400, f"{path} is {width}px wide on a 390px screen"
    confirm = page.goto(server.url + "/admin/errors")
    assert confirm.status == 200
    page.get_by_role("link", name=re.compile("Retry 1 failed job")).click()
    assert "This will put 1 failed job back in the queue." in page.locator("main").inner_text()
    assert page.locator("main button[type=submit]").inner_text() == "Yes, retry 1 job"
    assert console.problems == []
