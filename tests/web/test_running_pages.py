"""A running job on its page (docs/running-jobs.md): its progress, asking to cancel it, and what the page
says while the request waits for the worker, in four languages."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ADMIN_PASSWORD, Browser


@pytest.fixture
def app_settings():
    return {"RETRY_BACKOFF_BASE": 0}


def running(producer, worker, **progress):
    job = producer.post("/jobs", json={"type": "email"}).json
    held = worker.post("/jobs/claim").json
    assert held["id"] == job["id"]
    if progress:
        body = {"lease_token": held["lease_token"], **progress}
        assert worker.post(f"/jobs/{job['id']}/heartbeat", json=body).status_code == 200
    return held


def test_the_job_page_shows_the_running_attempts_progress(admin_browser, producer, worker):
    held = running(producer, worker, progress=40, progress_message="page 4 of <10>")
    html = admin_browser.get(f"/queue/{held['id']}").get_data(as_text=True)
    assert '<progress max="100" value="40">40%</progress>' in html
    assert '<span class="percent">40%</span>' in html
    assert "page 4 of &lt;10&gt;" in html  # escaped like any job data
    assert re.search(r"<dt>Progress</dt>", html)
    # a new attempt starts without the old one's progress
    worker.post(f"/jobs/{held['id']}/fail", json={"lease_token": held["lease_token"], "error": "boom"})
    worker.post("/jobs/claim")
    html = admin_browser.get(f"/queue/{held['id']}").get_data(as_text=True)
    assert "<progress" not in html and "<dt>Progress</dt>" not in html


def test_a_message_alone_shows_without_a_bar(admin_browser, producer, worker):
    held = running(producer, worker, progress_message="waiting for the mail server")
    html = admin_browser.get(f"/queue/{held['id']}").get_data(as_text=True)
    assert "waiting for the mail server" in html and "<progress" not in html


def test_cancelling_a_running_job_from_its_page_asks_its_worker(producer_browser, producer, worker):
    held = running(producer, worker)
    page = f"/queue/{held['id']}"
    assert "Cancel job" in producer_browser.get(page).get_data(as_text=True)
    response = producer_browser.submit(page, f"{page}/cancel")
    assert response.status_code == 302
    html = producer_browser.get(page).get_data(as_text=True)
    assert f"Cancellation of job {held['id']} requested: its worker stops it at its next check." in html
    assert "Cancellation requested by alice" in html and "Cancel job" not in html
    assert "badge-running" in html  # still running; the history says who asked (an event shown with "_"
    # as a space once the pages show events as words)
    assert re.search(r'class="event">cancel[_ ]requested</td>\s*<td[^>]*>alice</td>', html)
    beat = worker.post(f"/jobs/{held['id']}/heartbeat", json={"lease_token": held["lease_token"]})
    assert beat.json["cancel_requested"] is True
    worker.post(f"/jobs/{held['id']}/cancelled", json={"lease_token": held["lease_token"]})
    html = producer_browser.get(page).get_data(as_text=True)
    assert "badge-cancelled" in html and "Cancellation requested by" not in html


def test_a_finished_job_cannot_be_cancelled_from_its_page(producer_browser, producer, worker):
    held = running(producer, worker)
    page = f"/queue/{held['id']}"
    form_page = producer_browser.get(page).get_data(as_text=True)  # the button, before it finished
    worker.post(f"/jobs/{held['id']}/complete", json={"lease_token": held["lease_token"]})
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', form_page).group(1)
    producer_browser.client.post(f"{page}/cancel", data={"csrf_token": token})
    html = producer_browser.get(page).get_data(as_text=True)
    assert "Only pending or running jobs can be cancelled." in html and "badge-completed" in html


@pytest.mark.parametrize(
    ("language", "percent", "words"),
    [
        ("de", "40\u00a0%", ("Fortschritt", "Abbruch angefordert von admin", "Zurückstellungen")),
        ("pt-BR", "40%", ("Progresso", "Cancelamento pedido por admin", "Adiamentos")),
        ("zh-CN", "40%", ("进度", "admin 已于", "推迟次数")),
    ],
)
def test_the_running_job_is_shown_in_every_language(app, producer, worker, admin, language, percent, words):
    held = running(producer, worker)
    worker.post(f"/jobs/{held['id']}/snooze", json={"lease_token": held["lease_token"], "delay_seconds": 1})
    with app.extensions["queuelog"]["db"].cursor(write=True) as cur:  # due now rather than in a second
        cur.execute(f"UPDATE jobs SET available_at = created_at WHERE id = {int(held['id'])}")
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{held['id']}/heartbeat", json={"lease_token": held["lease_token"], "progress": 40})
    assert admin.post(f"/jobs/{held['id']}/cancel").status_code == 202
    b = Browser(app.test_client())
    b.client.environ_base["HTTP_ACCEPT_LANGUAGE"] = language
    b.login("admin", ADMIN_PASSWORD)
    html = b.get(f"/queue/{held['id']}").get_data(as_text=True)
    assert f'<span class="percent">{percent}</span>' in html
    for word in words:
        assert word in html, word
