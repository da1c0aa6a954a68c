"""Live refresh and the console's pages in Chromium (docs/console.md): pages update by themselves without a
reload, the poll rests while the tab is hidden, and the workers page shows a worker holding a job and
revokes its key."""

from __future__ import annotations

import requests
from playwright.sync_api import expect

from tests.e2e.conftest import log_in, screenshot

LIVE = 12_000  # ms: a 5 s poll, with room for a busy machine
HIDE = """state => {
  Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => state});
  document.dispatchEvent(new Event('visibilitychange'));
}"""


def api(keys, kind: str, name: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {keys.raw(kind, name)}"
    return session


def test_pages_update_by_themselves_without_a_reload(app, keys, live_server, new_page, console):
    base = live_server(workers=1, threads=4).url
    producer, worker = api(keys, "producer", "alice"), api(keys, "worker", "w-1")
    page = new_page()
    log_in(page, base)
    page.goto(f"{base}/queue")
    control = page.get_by_label("Update by itself")
    expect(control).to_be_visible()  # the script shows it; without script it stays hidden
    assert control.input_value() == "0"  # off until chosen
    control.select_option("5")
    page.evaluate("window.notReloaded = true")
    job = producer.post(f"{base}/jobs", json={"type": "email"}).json()
    expect(page.locator(f'#live-jobs a[href="/queue/{job["id"]}"]')).to_be_visible(timeout=LIVE)
    assert page.evaluate("window.notReloaded") is True
    as_of = page.locator("#live-as-of").inner_text()
    expect(page.locator("#live-as-of")).not_to_have_text(as_of, timeout=LIVE)

    # The choice is remembered: the dashboard polls too, and counts a new job.
    page.goto(f"{base}/")
    assert page.get_by_label("Update by itself").input_value() == "5"
    pending = page.locator('a.tile[href="/queue?status=pending"] .tile-count')
    expect(pending).to_have_text("1")
    page.evaluate("window.notReloaded = true")
    producer.post(f"{base}/jobs", json={"type": "pdf"})
    expect(pending).to_have_text("2", timeout=LIVE)
    assert page.evaluate("window.notReloaded") is True

    # A pending job's page follows the job as a worker claims it, by the poll and not by a reload.
    page.goto(f"{base}/queue/{job['id']}")
    page.evaluate("window.notReloaded = true")
    assert worker.post(f"{base}/jobs/claim", json={"types": ["email"]}).json()["id"] == job["id"]
    expect(page.locator("#live-job-status .badge")).to_have_text("running", timeout=LIVE)
    expect(page.locator("#live-job")).to_contain_text("w-1")
    assert page.evaluate("window.notReloaded") is True
    assert console.problems == []


def test_the_poll_rests_while_the_tab_is_hidden(app, keys, live_server, new_page, console):
    base = live_server(workers=1, threads=4).url
    page = new_page()
    log_in(page, base)
    page.goto(f"{base}/admin/errors")
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if r.headers.get("x-queuelog-live") == "1" else None)
    page.get_by_label("Update by itself").select_option("5")
    page.wait_for_timeout(6_500)
    assert polls == [f"{base}/admin/errors"]  # one poll of the page itself, 5 s after choosing
    page.evaluate(HIDE, "hidden")
    page.wait_for_timeout(11_000)
    assert len(polls) == 1  # nothing while hidden
    page.evaluate(HIDE, "visible")
    page.wait_for_timeout(1_500)
    assert len(polls) == 2  # back in view: at once
    page.get_by_label("Update by itself").select_option("0")
    page.wait_for_timeout(6_000)
    assert len(polls) == 2  # off is off
    assert console.problems == []


def test_the_workers_page_shows_a_worker_holding_a_job_and_revokes_its_key(
    app, keys, live_server, new_page, console
):
    base = live_server(workers=1, threads=4).url
    producer, worker = api(keys, "producer", "alice"), api(keys, "worker", "w-1")
    for job_type in ("email", "pdf", "email"):
        producer.post(f"{base}/jobs", json={"type": job_type, "max_retries": 0})
    done = worker.post(f"{base}/jobs/claim").json()
    worker.post(f"{base}/jobs/{done['id']}/complete", json={"lease_token": done["lease_token"]})
    held = worker.post(f"{base}/jobs/claim").json()
    page = new_page()
    log_in(page, base)
    page.get_by_role("link", name="Workers").click()
    card = page.locator('section[id="worker-w-1"]')
    expect(card).to_contain_text("Holds now")
    assert "1 job" in card.locator("dd").first.inner_text()
    expect(card.locator(f'a[href="/queue/{held["id"]}"]')).to_be_visible()
    screenshot(page, "workers")
    card.get_by_role("link", name="Revoke key…").click()
    expect(page.locator("main")).to_contain_text("It holds 1 job now")
    page.get_by_role("button", name="Yes, revoke the key").click()
    page.wait_for_url(f"{base}/admin/workers")
    expect(page.locator(".flash")).to_have_text("Key w-1 revoked.")
    expect(card.locator(".badge-cancelled")).to_have_text("revoked")
    assert worker.post(f"{base}/jobs/claim").status_code == 401
    page.get_by_role("link", name="Figures").click()
    expect(page.locator('section[id="type-email"]')).to_contain_text("Last hour")
    screenshot(page, "figures")
    assert console.problems == []
