"""The admin console's pages (docs/console.md), request by request: workers, revoking a worker's key from
there, figures by job type, the dashboard's busiest types, and the markup live refresh works on."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select

from queuelog.models import AuditLog, utcnow
from tests.conftest import csrf_token


def test_workers_page_lists_a_worker_with_the_jobs_it_holds_and_what_it_did(admin_browser, producer, keys):
    busy, idle = keys.worker("w-busy"), keys.worker("w-idle")  # w-idle's key is never used
    for _ in range(3):
        producer.post("/jobs", json={"type": "email", "max_retries": 0})
    first = busy.post("/jobs/claim").json
    busy.post(f"/jobs/{first['id']}/complete", json={"lease_token": first["lease_token"]})
    second = busy.post("/jobs/claim").json
    busy.post(f"/jobs/{second['id']}/fail", json={"lease_token": second["lease_token"], "error": "x"})
    held = busy.post("/jobs/claim").json
    page = admin_browser.get("/admin/workers")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="worker-w-busy"' in html and idle.name not in html
    section = html[html.index('id="worker-w-busy"') :]
    assert "1 job</dd>" in section  # holds one now
    assert f'href="/queue/{held["id"]}">#{held["id"]}</a>' in section
    assert re.search(r"Completed, last hour</dt><dd>1</dd>", section)
    assert re.search(r"Failed, last hour</dt><dd>1</dd>", section)
    assert "50%" in section  # failure rate
    assert 'href="/admin/workers/w-busy/revoke"' in section
    busy.post(
        f"/jobs/{held['id']}/heartbeat",
        json={"lease_token": held["lease_token"], "progress": 40, "progress_message": "page 4 of 10"},
    )
    section = admin_browser.get("/admin/workers").get_data(as_text=True)
    section = section[section.index('id="worker-w-busy"') :]
    assert re.search(r'data-label="Progress"><span class="percent">40\s?%</span>', section)
    assert '<span class="progress-message data">page 4 of 10</span>' in section


def test_revoking_a_worker_key_from_the_workers_page_confirms_then_revokes(
    app, admin_browser, producer, worker
):
    producer.post("/jobs", json={"type": "email"})
    worker.post("/jobs/claim")
    confirm = admin_browser.get(f"/admin/workers/{worker.name}/revoke")
    assert confirm.status_code == 200
    text = confirm.get_data(as_text=True)
    assert "It holds 1 job now" in text and "Yes, revoke the key" in text
    # without its CSRF token the form changes nothing
    refused = admin_browser.client.post(f"/admin/workers/{worker.name}/revoke", data={})
    assert refused.status_code == 400 and worker.post("/jobs/claim").status_code == 204
    done = admin_browser.client.post(
        f"/admin/workers/{worker.name}/revoke", data={"csrf_token": csrf_token(text)}
    )
    assert done.status_code == 302 and done.headers["Location"] == "/admin/workers"
    assert worker.post("/jobs/claim").status_code == 401
    assert f"Key {worker.name} revoked." in admin_browser.get("/admin/workers").get_data(as_text=True)
    with app.extensions["queuelog"]["db"].session() as s:
        actions = [(row.actor, row.action, row.target) for row in s.scalars(select(AuditLog))]
    assert ("admin", "key.revoke", worker.name) in actions
    assert admin_browser.get(f"/admin/workers/{worker.name}/revoke").status_code == 404  # revoked already
    assert admin_browser.get("/admin/workers/nobody/revoke").status_code == 404


def test_a_producer_key_cannot_be_revoked_from_the_workers_page(admin_browser, keys):
    keys.raw("producer", "alice")
    with admin_browser.client.application.extensions["queuelog"]["db"].session() as s:
        from queuelog.models import ApiKey

        name = s.scalar(select(ApiKey.name).where(ApiKey.kind == "producer"))
    assert admin_browser.get(f"/admin/workers/{name}/revoke").status_code == 404


def test_console_pages_are_for_admins(producer_browser, client):
    for path in ("/admin/workers", "/admin/figures", "/admin/workers/w/revoke"):
        assert producer_browser.get(path).status_code == 403
        assert client.get(path).status_code == 302  # to the login page


def test_figures_page_shows_each_type_with_counts_rates_and_a_chart(admin_browser, producer, worker):
    for _ in range(2):
        producer.post("/jobs", json={"type": "pdf", "max_retries": 0})
    for failing in (False, True):
        held = worker.post("/jobs/claim").json
        if failing:
            worker.post(f"/jobs/{held['id']}/fail", json={"lease_token": held["lease_token"], "error": "x"})
        else:
            worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    page = admin_browser.get("/admin/figures")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    for name in ("email", "pdf", "sync"):
        assert f'id="type-{name}"' in html
    pdf = html[html.index('id="type-pdf"') : html.index('id="type-sync"')]
    assert pdf.count('class="bar-done"') == 1 and pdf.count('class="bar-failed"') == 1
    rows = re.findall(r'<td data-label="Failure rate" class="num">([^<]*)</td>', pdf)
    assert rows == ["50%", "50%"]  # last hour, last day
    assert re.search(r'data-label="Run time p50 / p95" class="num">\d+ ms / \d+ ms<', pdf)
    assert "<script" not in html.split("</head>")[1]  # no script in the page itself


def test_dashboard_shows_the_busiest_types_to_admins_only(admin_browser, producer_browser, producer):
    for job_type in ("pdf", "pdf", "email"):
        producer.post("/jobs", json={"type": job_type})
    html = admin_browser.get("/").get_data(as_text=True)
    busiest = html[html.index("Busiest job types") :]
    assert busiest.index(">pdf</a>") < busiest.index(">email</a>")
    assert 'href="/admin/figures#type-pdf"' in busiest
    assert "Busiest job types" not in producer_browser.get("/").get_data(as_text=True)


def test_live_pages_carry_regions_the_control_and_their_age(admin_browser, producer):
    job = producer.post("/jobs", json={"type": "email"}).json
    for path in ("/", "/queue", f"/queue/{job['id']}", "/admin/errors", "/admin/workers", "/admin/figures"):
        response = admin_browser.get(path)
        html = response.get_data(as_text=True)
        assert re.search(r'<p class="as-of muted" id="live-as-of" data-live>As of \d{1,2}:\d\d:\d\d', html), (
            path
        )
        assert "data-live-control" in html and " hidden>" in html, path  # shown by the script only
        assert len(re.findall(r' id="live-[a-z-]+" data-live>', html)) >= 2, path
        assert '<script src="/static/live.js" defer></script>' in html
        policy = response.headers["Content-Security-Policy"]
        assert "script-src 'self';" in policy and "unsafe-inline" not in policy
    # A pending job's page reloads itself without script only; with script the poll defaults to 5 s.
    html = admin_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in html
    assert 'data-live-default="5"' in html


def test_live_polls_do_not_keep_an_idle_login_alive(admin_browser):
    assert "Set-Cookie" in admin_browser.get("/").headers  # a page asked for: the session is renewed
    polled = admin_browser.get("/", headers={"X-Queuelog-Live": "1"})
    assert polled.status_code == 200 and "Set-Cookie" not in polled.headers


def test_the_as_of_time_follows_the_language(admin_browser):
    admin_browser.submit("/", "/language", locale="de", next="/")
    html = admin_browser.get("/").get_data(as_text=True)
    assert re.search(r"Stand: \d\d:\d\d:\d\d", html)


def test_figures_page_shows_waits_and_run_times_of_minutes_in_every_language(
    admin_browser, producer, worker, queue
):
    """A job that waited 180 s and ran 240 s: the page (500 before: Flask-Babel 4's format_timedelta takes no
    ``format``) shows both in each language's short units."""
    start = utcnow() - timedelta(minutes=10)
    now = [start]
    queue.clock = lambda: now[0]
    producer.post("/jobs", json={"type": "pdf", "max_retries": 0})
    now[0] = start + timedelta(seconds=180)
    held = worker.post("/jobs/claim").json
    now[0] = start + timedelta(seconds=420)
    worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    now[0] = start + timedelta(minutes=10)
    expected = {"en": ("4 min", "3 min"), "de": ("4 Min.", "3 Min."), "pt_BR": ("4 min", "3 min"),
                "zh_Hans": ("4分钟", "3分钟")}  # fmt: skip
    for locale, (run, wait) in expected.items():
        admin_browser.submit("/", "/language", locale=locale, next="/")
        page = admin_browser.get("/admin/figures")
        assert page.status_code == 200, locale
        html = page.get_data(as_text=True)
        pdf = html[html.index('id="type-pdf"') : html.index('id="type-sync"')]
        cells = re.findall(r'<td data-label="[^"]*" class="num">([^<]*/[^<]*)</td>', pdf)
        assert cells[:2] == [f"{run} / {run}", f"{wait} / {wait}"], (locale, cells)
