"""What people do in the pages, request by request (the browser tests drive the main paths in Chromium)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from queuelog.models import AuditLog
from queuelog.queue.admin import AdminStore
from queuelog.web.templating import attempts, error_headline


def _jobs(app):
    return app.extensions["queuelog"]["queue"].list_jobs(limit=100)


def test_dashboard_counts_and_chart(admin_browser, producer, worker):
    for _ in range(3):
        producer.post("/jobs", json={"type": "email"})
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    html = admin_browser.get("/").get_data(as_text=True)
    assert re.search(r'tile-count">2</span>\s*<span class="badge badge-pending"', html)
    assert re.search(r'tile-count">1</span>\s*<span class="badge badge-completed"', html)
    assert "1 completions, 0 failures" in html
    assert html.count('class="bar-done"') == 1
    assert "<svg" in html and not re.search(r"<script(?![^>]*\bsrc=)", html)  # no inline script


def test_dashboard_chart_says_it_counts_failures_not_failed_jobs(admin_browser, producer, worker, admin):
    """One job that fails, is retried and fails again is two failures: the chart's title and summary say
    "failures" (each time a job fails), not "failed jobs", so its series and its words agree."""
    job = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
    for attempt in range(2):
        held = worker.post("/jobs/claim").json
        worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "x"})
        if attempt == 0:
            assert admin.post(f"/jobs/{job['id']}/retry").status_code == 200
    html = admin_browser.get("/").get_data(as_text=True)
    assert re.search(r'tile-count">1</span>\s*<span class="badge badge-failed"', html)  # one failed job
    assert "Last hour: completions and failures per minute" in html
    assert "Completions: 0 · failures: 2." in html
    assert "0 completions, 2 failures" in html  # the bar's own words count the same
    assert "failed jobs per minute" not in html.lower()


def test_submit_form_creates_a_job_and_shows_it(app, producer_browser):
    response = producer_browser.submit(
        "/submit",
        type="email",
        payload='{"to": "ada@example.com"}',
        priority="medium",
        max_retries="2",
        idempotency_key="form-1",
    )
    assert response.status_code == 302
    job_path = response.headers["Location"]
    page = producer_browser.get(job_path).get_data(as_text=True)
    assert "ada@example.com" in page and "Job #1" in page and "medium" in page
    listing = producer_browser.get("/queue").get_data(as_text=True)
    assert 'href="/queue/1"' in listing
    assert _jobs(app)[0]["max_retries"] == 2 and _jobs(app)[0]["idempotency_key"] == "form-1"


def test_submit_form_errors_are_shown_beside_the_field_and_nothing_is_created(app, producer_browser, queue):
    bad_json = producer_browser.submit(
        "/submit", type="email", payload="{oops", priority="low", max_retries="3"
    )
    assert bad_json.status_code == 422
    assert re.search(r'id="payload-error">Not valid JSON', bad_json.get_data(as_text=True))
    queue.types.add("invoice", schema={"type": "object", "required": ["amount"]})
    schema = producer_browser.submit("/submit", type="invoice", payload="{}", priority="low", max_retries="3")
    assert re.search(
        r"id=\"payload-error\">payload does not match the job type&#39;s schema: &#34;amount&#34; is a required property",
        schema.get_data(as_text=True),
    )
    too_high = producer_browser.submit(
        "/submit", type="email", payload="{}", priority="critical", max_retries="3"
    )
    assert too_high.status_code == 422 and 'id="priority-error"' in too_high.get_data(as_text=True)
    retries = producer_browser.submit("/submit", type="email", payload="{}", priority="low", max_retries="99")
    assert 'id="max_retries-error"' in retries.get_data(as_text=True)
    assert _jobs(app) == []


def test_producer_priority_menu_offers_only_low_and_medium(producer_browser, admin_browser):
    options = re.findall(r'<option[^>]*value="(\w+)"', producer_browser.get("/submit").get_data(as_text=True))
    assert "medium" in options and "high" not in options and "critical" not in options
    admin_options = re.findall(
        r'<option[^>]*value="(\w+)"', admin_browser.get("/submit").get_data(as_text=True)
    )
    assert "critical" in admin_options


def test_job_list_filters_and_pages(producer_browser, producer):
    ids = [producer.post("/jobs", json={"type": "pdf" if i % 2 else "email"}).json["id"] for i in range(60)]
    first = producer_browser.get("/queue").get_data(as_text=True)
    shown = [int(i) for i in re.findall(r'href="/queue/(\d+)"', first)]
    assert shown == ids[::-1][:50]
    older = re.search(r'href="(/queue\?before=\d+)"', first).group(1)
    second = producer_browser.get(older).get_data(as_text=True)
    assert [int(i) for i in re.findall(r'href="/queue/(\d+)"', second)] == ids[::-1][50:]
    pdf_only = producer_browser.get("/queue?type=pdf").get_data(as_text=True)
    assert {int(i) for i in re.findall(r'href="/queue/(\d+)"', pdf_only)} == set(ids[1::2])


def test_cancel_from_the_job_page(producer_browser, producer):
    job = producer.post("/jobs", json={"type": "email"}).json
    response = producer_browser.submit(f"/queue/{job['id']}", f"/queue/{job['id']}/cancel")
    assert response.status_code == 302
    page = producer_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    assert "cancelled" in page and "Cancel job" not in page


def test_errors_page_groups_alike_failures_and_retries_a_group_after_confirmation(
    admin_browser, producer, worker
):
    ids = []
    for seconds in (31, 45, 12):
        job = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
        held = worker.post("/jobs/claim").json
        worker.post(
            f"/jobs/{held['id']}/fail",
            json={
                "lease_token": held["lease_token"],
                "error": f"Traceback (most recent call last):\nTimeoutError: gave up after {seconds}s on job {job['id']}",
            },
        )
        ids.append(job["id"])
    other = producer.post("/jobs", json={"type": "pdf", "max_retries": 0}).json
    held = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{held['id']}/fail", json={"lease_token": held["lease_token"], "error": "KeyError: 'font'"}
    )
    html = admin_browser.get("/admin/errors").get_data(as_text=True)
    assert html.count('class="card error-group"') == 2
    assert "TimeoutError: gave up after &lt;n&gt;s on job &lt;n&gt;" in html
    assert "3 failures" in html and "3 jobs" in html
    confirm_url = re.search(
        r'href="(/admin/errors/[0-9a-f]{16}/retry)"[^>]*>Retry 3 failed jobs', html
    ).group(1)
    confirm = admin_browser.get(confirm_url).get_data(as_text=True)
    assert "This will put 3 failed jobs back in the queue." in confirm
    assert re.search(r'<button type="submit" class="primary">Yes, retry 3 jobs</button>', confirm)
    done = admin_browser.submit(confirm_url)
    assert done.status_code == 302
    assert "3 jobs retried." in admin_browser.get("/admin/errors").get_data(as_text=True)
    statuses = {i: producer.get(f"/jobs/{i}").json["status"] for i in ids}
    assert set(statuses.values()) == {"pending"}
    assert producer.get(f"/jobs/{other['id']}").json["status"] == "failed"
    events = producer.get(f"/jobs/{ids[0]}/events").json["events"]
    assert events[-1]["event"] == "retried" and events[-1]["actor"] == "admin"


def test_admin_manages_users(app, admin_browser):
    assert (
        admin_browser.submit(
            "/admin/users", username="carol", role="producer", password="carol-password"
        ).status_code
        == 302
    )
    admin_browser.submit("/admin/users", "/admin/users/carol/role", role="admin")
    admin_browser.submit("/admin/users", "/admin/users/carol/password", password="new-password-1")
    admin_browser.submit("/admin/users", "/admin/users/carol/deactivate")
    page = admin_browser.get("/admin/users").get_data(as_text=True)
    assert re.search(
        r'<td data-label="Username" class="data">carol</td>\s*<td data-label="Role">admin</td>\s*'
        r'<td data-label="State"><span class="badge badge-cancelled">deactivated',
        page,
    )
    short = admin_browser.submit("/admin/users", username="dave", role="producer", password="short")
    assert short.status_code == 422
    last_admin = admin_browser.submit("/admin/users", "/admin/users/admin/deactivate")
    assert "There must be at least one active admin." in admin_browser.get("/admin/users").get_data(
        as_text=True
    )
    assert last_admin.status_code == 302
    with app.extensions["queuelog"]["db"].session() as s:
        actions = [(a.actor, a.action, a.target) for a in s.scalars(select(AuditLog).order_by(AuditLog.id))]
    assert ("admin", "user.create", "carol") in actions
    assert sum(1 for a in actions if a[1] == "user.update" and a[2] == "carol") == 3


def test_admin_creates_and_revokes_keys(app, admin_browser):
    page = admin_browser.submit("/admin/keys", name="builder-1", kind="worker", user="")
    assert page.status_code == 200
    key = re.search(r'<pre class="secret" id="new-key">(ql_[^<]+)</pre>', page.get_data(as_text=True)).group(
        1
    )
    db = app.extensions["queuelog"]["db"]
    assert AdminStore(db).authenticate(key).name == "builder-1"
    listing = admin_browser.get("/admin/keys").get_data(as_text=True)
    assert "builder-1" in listing and key not in listing  # shown once only
    admin_browser.submit("/admin/keys", "/admin/keys/builder-1/revoke")
    assert AdminStore(db).authenticate(key) is None
    producer_key = admin_browser.submit("/admin/keys", name="admin-laptop", kind="producer", user="admin")
    assert "ql_" in producer_key.get_data(as_text=True)
    missing_user = admin_browser.submit("/admin/keys", name="orphan", kind="producer", user="")
    assert missing_user.status_code == 422


def test_admin_manages_job_types(admin_browser, producer, worker):
    created = admin_browser.submit(
        "/admin/types",
        name="report",
        description="Monthly report",
        payload_schema='{"type": "object", "required": ["month"]}',
    )
    assert created.status_code == 302
    assert producer.post("/jobs", json={"type": "report", "payload": {}}).status_code == 422
    bad_schema = admin_browser.submit("/admin/types", name="other", payload_schema='{"type": 5}')
    assert bad_schema.status_code == 422 and "Not a valid JSON Schema: 5 is not valid" in bad_schema.get_data(
        as_text=True
    )
    admin_browser.submit("/admin/types/report", description="Quarterly report", payload_schema="")
    assert producer.post("/jobs", json={"type": "report", "payload": {}}).status_code == 201
    admin_browser.submit("/admin/types", "/admin/types/report/pause")
    assert worker.post("/jobs/claim").status_code == 204
    admin_browser.submit("/admin/types", "/admin/types/report/resume")
    assert worker.post("/jobs/claim").status_code == 200
    admin_browser.submit("/admin/types", "/admin/types/report/disable")
    assert producer.post("/jobs", json={"type": "report"}).status_code == 422
    audit = admin_browser.get("/admin/audit").get_data(as_text=True)
    for action in ("type.create", "type.update", "type.pause", "type.resume", "type.disable"):
        assert action in audit


@pytest.mark.parametrize(
    "status,retry_count,made",
    [("pending", 0, 0), ("pending", 2, 2), ("running", 0, 1), ("running", 2, 3), ("completed", 1, 2)]
    + [("failed", 3, 4), ("cancelled", 1, 1)],
)
def test_attempts_made_and_allowed(status, retry_count, made):
    assert attempts({"status": status, "retry_count": retry_count, "max_retries": 3}) == (made, 4)


def test_job_page_and_list_show_attempts_made_of_allowed(admin_browser, producer, worker):
    def shown(job_id: int) -> tuple[str, str]:
        page = admin_browser.get(f"/queue/{job_id}").get_data(as_text=True)
        detail = re.search(r"<dt>Attempts</dt><dd>([^<]*)</dd>", page).group(1)
        listing = admin_browser.get("/queue").get_data(as_text=True)
        row = re.search(
            rf'href="/queue/{job_id}".*?<td data-label="Attempts" class="num">([^<]*)</td>', listing, re.S
        ).group(1)
        return detail, row

    once = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
    assert shown(once["id"]) == ("0 / 1", "0 / 1")
    held = worker.post("/jobs/claim").json
    assert shown(once["id"]) == ("1 / 1", "1 / 1")
    worker.post(f"/jobs/{once['id']}/complete", json={"lease_token": held["lease_token"]})
    assert shown(once["id"]) == ("1 / 1", "1 / 1")  # ran once: not "0 / 0"
    twice = producer.post("/jobs", json={"type": "email", "max_retries": 2}).json
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{twice['id']}/fail", json={"lease_token": held["lease_token"], "error": "x"})
    assert shown(twice["id"]) == ("1 / 3", "1 / 3")  # one failed attempt, waiting for the second


def test_submit_page_lists_types_with_their_descriptions_and_no_placeholder(producer_browser, queue):
    queue.types.add("invoice", "Monthly invoice as a PDF")
    page = producer_browser.get("/submit").get_data(as_text=True)
    listed = re.search(r'<ul class="types">(.*?)</ul>', page, re.S).group(1)
    names = re.findall(r'<span class="type-name data">([^<]+)</span>', listed)
    assert sorted(names) == ["email", "invoice", "pdf", "sync"]
    assert '<p class="data">Monthly invoice as a PDF</p>' in listed
    assert listed.count("<p") == 1 and "—" not in listed  # types without a description: the name only


def test_error_headline_is_the_last_line_of_a_long_error_only():
    traceback = (
        "Traceback (most recent call last):\n" + '  File "x.py", line 1, in f\n' * 10 + "KeyError: 'to'\n\n"
    )
    assert error_headline(traceback) == "KeyError: 'to'"
    assert error_headline("ValueError: 42") is None  # short: shown whole
    assert error_headline("x" * 500) == "x" * 500
    assert error_headline(None) is None and error_headline("") is None


def test_the_page_of_an_unfinished_job_reloads_itself_until_it_finishes(producer, worker, producer_browser):
    job = producer.post("/jobs", json={"type": "email"}).get_json()
    refresh = '<meta http-equiv="refresh" content="5">'
    assert refresh in producer_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    held = worker.post("/jobs/claim", json={}).get_json()
    assert refresh in producer_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    assert refresh not in producer_browser.get(f"/queue/{job['id']}").get_data(as_text=True)


def test_history_events_are_words_not_identifiers(producer, worker, producer_browser):
    job = producer.post("/jobs", json={"type": "email"}).json
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "x"})
    page = producer_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    events = re.findall(r'class="event">([^<]*)</td>', page)
    assert events == ["enqueued", "claimed", "retry scheduled"]  # oldest first
    german = producer_browser.get(f"/queue/{job['id']}", headers={"Accept-Language": "de"}).get_data(
        as_text=True
    )
    assert "Wiederholung geplant" in german and "retry_scheduled" not in german


@pytest.mark.parametrize("retries, accepted", [(-1, False), (0, True), (25, True), (26, False)])
def test_every_face_holds_max_retries_to_the_same_range(app, producer, producer_browser, retries, accepted):
    """The submit page, the API and the schedules' command line take max_retries from one range
    (queuelog.queue.inputs.MAX_RETRIES_LIMIT): both ends accepted, one past either end refused."""
    from queuelog.queue.inputs import MAX_RETRIES_LIMIT

    assert MAX_RETRIES_LIMIT == 25
    page = producer_browser.submit(
        "/submit", type="email", payload="{}", priority="low", max_retries=str(retries)
    )
    api = producer.post("/jobs", json={"type": "email", "max_retries": retries})
    cli = app.test_cli_runner().invoke(
        args=[
            "schedules",
            "add",
            f"s{retries + 1}",
            "--type",
            "email",
            "--every",
            "60",
            "--max-retries",
            str(retries),
        ]  # fmt: skip
    )
    assert (page.status_code == 302) is accepted
    assert ('id="max_retries-error">Enter a whole number from 0 to 25.' in page.get_data(as_text=True)) is (
        not accepted
    )
    assert api.status_code == (201 if accepted else 422)
    assert (cli.exit_code == 0) is accepted, cli.output
    assert len(_jobs(app)) == (2 if accepted else 0)
