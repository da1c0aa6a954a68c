"""A running job's page in Chromium (docs/running-jobs.md): its progress bar and message and the notice of
a pending cancellation fit a phone (390 px) and a desktop (1280 px) in all four languages, and the page
works without JavaScript: asking for the cancellation is a plain form."""

from __future__ import annotations

import pytest

from tests.e2e.test_layouts import DESKTOP, LAYOUT_PROBLEMS, LOCALES, PHONE, login

PROGRESS_BAR = """() => {
  const bar = document.querySelector('dd.progress progress');
  const card = bar.closest('.card').getBoundingClientRect();
  const r = bar.getBoundingClientRect();
  return {value: bar.value, width: r.width, inside: r.left >= card.left && r.right <= card.right};
}"""


@pytest.fixture
def running_job(backend, app, producer, worker, keys):
    """A running job with progress and a long message, whose cancellation a long-named admin asked for."""
    if backend.name != "sqlite":
        pytest.skip("layouts do not depend on the database engine; checked on SQLite")
    job = producer.post("/jobs", json={"type": "email"}).json
    held = worker.post("/jobs/claim").json
    message = "rendering section 14 of 20: monthly/statement/section_14_with_a_rather_long_name.html"
    body = {"lease_token": held["lease_token"], "progress": 70, "progress_message": message}
    assert worker.post(f"/jobs/{job['id']}/heartbeat", json=body).status_code == 200
    return job["id"]


@pytest.mark.parametrize("browser_locale", list(LOCALES))
def test_a_running_jobs_page_fits_a_phone_and_a_desktop(
    running_job, keys, live_server, new_page, console, browser_locale
):
    server = live_server(workers=1, threads=4)
    for width, height in (PHONE, DESKTOP):
        page = new_page(viewport=(width, height), locale=browser_locale)
        login(page, server.url)
        where = f"the job at {width}px in {LOCALES[browser_locale]}"
        assert page.goto(f"{server.url}/queue/{running_job}").status == 200
        bar = page.evaluate(PROGRESS_BAR)
        assert bar["value"] == 70 and bar["width"] >= 100 and bar["inside"], (where, bar)
        assert page.evaluate(LAYOUT_PROBLEMS) == [], where
        if width == PHONE[0]:
            page.locator("form[action$='/cancel'] button").click()  # a plain form post
            page.wait_for_load_state()
            assert page.locator("p.cancel-requested").count() == 1, where
            assert page.locator("form[action$='/cancel']").count() == 0, where
        assert page.evaluate(LAYOUT_PROBLEMS) == [], f"{where}, cancellation requested"
    assert console.problems == []
