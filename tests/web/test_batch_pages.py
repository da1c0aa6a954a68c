"""The batches' pages (docs/batches.md) request by request, on both engines: the list, a batch's page with
its progress, counts, jobs and graph, the job page's links, the jobs list searched by batch, and the
cancel and retry forms. The layouts are checked in Chromium in tests/e2e/test_batch_layout.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

SVG = "{http://www.w3.org/2000/svg}"


def make_batch(caller, n: int = 3, **extra) -> dict:
    """A chain of ``n`` email jobs (each waits for the one before), made through the JSON API."""
    jobs = [{"type": "email", "payload": {"n": 0}, "ref": "j0"}]
    jobs += [
        {"type": "email", "payload": {"n": i}, "ref": f"j{i}", "depends_on": [f"j{i - 1}"]}
        for i in range(1, n)
    ]
    answer = caller.post("/batches", json={"jobs": jobs, "description": "album 7", **extra})
    assert answer.status_code == 201, answer.json
    return answer.json


def finish(worker, result=None, error=None) -> int:
    """Claim one job and complete it (or fail it for good with ``error``); its id."""
    held = worker.post("/jobs/claim").json
    body = {"lease_token": held["lease_token"]}
    if error is None:
        worker.post(f"/jobs/{held['id']}/complete", json={**body, "result": result or {}})
    else:
        worker.post(f"/jobs/{held['id']}/fail", json={**body, "error": error, "retryable": False})
    return held["id"]


def graph_of(html: str) -> ET.Element:
    return ET.fromstring(re.search(r"<svg class=\"graph\".*?</svg>", html, re.S).group(0))


def test_a_batch_page_shows_progress_counts_jobs_and_the_graph(producer, producer_browser, worker):
    batch = make_batch(producer, 3)
    first, second, third = batch["jobs"]
    finish(worker)
    response = producer_browser.get(f"/queue/batches/{batch['id']}")
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert f"Batch #{batch['id']}" in html and "album 7" in html
    assert re.search(r'<progress max="3" value="1"', html)
    assert "1 of 3 jobs finished (33 %)" in html
    assert re.search(r'badge-completed">completed</span> <span class="count">1<', html)
    assert re.search(r'badge-pending">pending</span> <span class="count">1<', html)
    assert re.search(r'badge-waiting">waiting</span> <span class="count">1<', html)
    assert f'href="/queue?batch={batch["id"]}&amp;status=waiting"' in html
    # The graph: one link per job, an arrow per dependency, each job below the one it waits for.
    svg = graph_of(html)
    boxes = {
        int(a.get("href").rsplit("/", 1)[1]): int(a.find(f"{SVG}rect").get("y")) for a in svg.iter(f"{SVG}a")
    }
    assert list(boxes) == [first, second, third] and boxes[first] < boxes[second] < boxes[third]
    assert len(list(svg.iter(f"{SVG}line"))) == 2
    assert [a.get("class") for a in svg.iter(f"{SVG}a")] == [
        "node g-completed",
        "node g-pending",
        "node g-waiting",
    ]
    # The jobs table: each job with its status and the jobs it waits for.
    rows = re.findall(r'<tr>\s*<td data-label="ID"><a href="/queue/(\d+)">.*?</tr>', html, re.S)
    assert [int(r) for r in rows] == [first, second, third]
    assert (
        f'<a href="/queue/{second}">#{second}</a></span></td>\n    </tr>' in html
    )  # the third waits for the second
    assert not re.search(r"<script(?![^>]*\bsrc=)", html)  # no inline script: the graph needs none


def test_a_batch_is_hidden_from_other_producers_and_shown_to_admins(producer, keys, admin_browser, app):
    batch = make_batch(producer, 2)
    bob = keys.producer("bob")
    mine = make_batch(bob, 1)
    from tests.conftest import Browser

    bob_browser = Browser(app.test_client())
    assert bob_browser.login("bob", "password-bob").status_code == 302
    assert bob_browser.get(f"/queue/batches/{batch['id']}").status_code == 404
    assert bob_browser.get(f"/queue/batches/{mine['id']}").status_code == 200
    listing = bob_browser.get("/queue/batches").get_data(as_text=True)
    assert (
        f'href="/queue/batches/{mine["id"]}"' in listing
        and f'href="/queue/batches/{batch["id"]}"' not in listing
    )
    # The jobs list searched by another user's batch finds nothing.
    found = bob_browser.get(f"/queue?batch={batch['id']}").get_data(as_text=True)
    assert "No jobs match." in found
    assert admin_browser.get(f"/queue/batches/{batch['id']}").status_code == 200
    assert admin_browser.get("/queue/batches/999999").status_code == 404


def test_the_batches_list_is_newest_first_and_filters_by_status(producer, producer_browser, worker):
    older = make_batch(producer, 1)
    newer = make_batch(producer, 2)
    finish(worker)  # the older batch's only job: it succeeds
    html = producer_browser.get("/queue/batches").get_data(as_text=True)
    ids = [int(i) for i in re.findall(r'href="/queue/batches/(\d+)"', html)]
    assert ids == [newer["id"], older["id"]]
    assert re.search(r'badge-succeeded">succeeded</span>', html)
    assert re.search(r'<progress max="2" value="0"', html) and "0 of 2" in html
    running = producer_browser.get("/queue/batches?status=running").get_data(as_text=True)
    assert re.findall(r'href="/queue/batches/(\d+)"', running) == [str(newer["id"])]
    bad = producer_browser.get("/queue/batches?status=exploded")
    assert bad.status_code == 422
    assert re.search(r'id="f-status-error">Choose a status from the list.', bad.get_data(as_text=True))


def test_the_batches_list_pages_by_fifty(producer, producer_browser):
    made = [make_batch(producer, 1)["id"] for _ in range(51)]
    first = producer_browser.get("/queue/batches").get_data(as_text=True)
    assert len(re.findall(r'href="/queue/batches/(\d+)"', first)) == 50
    older = re.search(r'href="(/queue/batches\?before=\d+)"', first).group(1)
    second = producer_browser.get(older).get_data(as_text=True)
    assert re.findall(r'href="/queue/batches/(\d+)"', second) == [str(made[0])]


def test_a_job_page_links_its_dependencies_dependents_and_batch(producer, producer_browser):
    batch = make_batch(producer, 3)
    first, second, third = batch["jobs"]
    middle = producer_browser.get(f"/queue/{second}").get_data(as_text=True)
    assert f'<a href="/queue/batches/{batch["id"]}">Batch #{batch["id"]}</a>' in middle
    assert re.search(
        rf'class="job-links depends-on"><span><a href="/queue/{first}">#{first}</a> <span class="muted">\(unfinished\)',
        middle,
    )
    assert re.search(rf'class="job-links dependents"><a href="/queue/{third}">#{third}</a></dd>', middle)
    plain = producer.post("/jobs", json={"type": "email"}).json
    alone = producer_browser.get(f"/queue/{plain['id']}").get_data(as_text=True)
    assert "job-links" not in alone and "/queue/batches/" not in alone


def test_the_jobs_list_searches_by_batch_and_says_so(producer, producer_browser):
    batch = make_batch(producer, 2)
    other = producer.post("/jobs", json={"type": "email"}).json
    html = producer_browser.get(f"/queue?batch={batch['id']}").get_data(as_text=True)
    listed = {int(i) for i in re.findall(r'<a href="/queue/(\d+)">#', html)}
    assert listed == set(batch["jobs"]) and other["id"] not in listed
    assert f'<a href="/queue/batches/{batch["id"]}">its page</a>' in html
    waiting = producer_browser.get(f"/queue?batch={batch['id']}&status=waiting").get_data(as_text=True)
    assert {int(i) for i in re.findall(r'<a href="/queue/(\d+)">#', waiting)} == {batch["jobs"][1]}
    bad = producer_browser.get("/queue?batch=twelve")
    assert bad.status_code == 422
    assert re.search(r'id="f-batch-error">Enter a batch number', bad.get_data(as_text=True))


def test_an_admin_acts_on_a_batchs_jobs_in_bulk_from_the_search(producer, admin_browser, queue):
    batch = make_batch(producer, 3)
    other = producer.post("/jobs", json={"type": "email"}).json
    html = admin_browser.get(f"/queue?batch={batch['id']}").get_data(as_text=True)
    assert f'href="/queue/bulk/cancel?batch={batch["id"]}"' in html
    confirm = admin_browser.get(f"/queue/bulk/cancel?batch={batch['id']}")
    page = confirm.get_data(as_text=True)
    assert confirm.status_code == 200 and "3 jobs match this search." in page
    assert re.search(rf"Batch number</span> <code>{batch['id']}</code>", page)
    fields = dict(re.findall(r'<input[^>]*name="(\w+)"[^>]*value="([^"]*)"', page))
    answer = admin_browser.client.post("/queue/bulk/cancel", data=fields)
    assert answer.status_code == 302
    assert {queue.get(i).status for i in batch["jobs"]} == {"cancelled"}
    assert queue.get(other["id"]).status == "pending"


def test_the_cancel_form_cancels_the_batchs_jobs(producer, producer_browser, queue):
    batch = make_batch(producer, 3)
    page = f"/queue/batches/{batch['id']}"
    answer = producer_browser.submit(page, f"{page}/cancel")
    assert answer.status_code == 302 and answer.headers["Location"].endswith(page)
    assert {queue.get(i).status for i in batch["jobs"]} == {"cancelled"}
    html = producer_browser.get(page).get_data(as_text=True)
    assert "finished with failures" in html and f'action="{page}/cancel"' not in html
    assert f'action="{page}/retry"' not in html  # a producer may not retry


def test_an_admin_retries_a_batchs_failed_and_cancelled_jobs(producer, admin_browser, worker, queue):
    batch = make_batch(producer, 2)
    failed = finish(worker, error="boom")
    page = f"/queue/batches/{batch['id']}"
    html = admin_browser.get(page).get_data(as_text=True)
    assert f'action="{page}/retry"' in html
    assert admin_browser.submit(page, f"{page}/retry").status_code == 302
    assert queue.get(failed).status == "pending"
    assert queue.get(batch["jobs"][1]).status == "waiting"
    assert "running" in admin_browser.get(page).get_data(as_text=True)


def test_producers_may_not_retry_a_batch(producer, producer_browser):
    batch = make_batch(producer, 1)
    page = f"/queue/batches/{batch['id']}"
    assert producer_browser.submit(page, f"{page}/retry").status_code == 403


@pytest.mark.parametrize("path", ["/queue/batches/0", "/queue/batches/99999999999999999999"])
def test_unknown_batches_are_404_not_500(admin_browser, path):
    assert admin_browser.get(path).status_code == 404


def test_waiting_is_a_status_of_the_filters_the_badges_and_the_dashboard(producer, producer_browser):
    make_batch(producer, 2)
    listing = producer_browser.get("/queue").get_data(as_text=True)
    assert '<option value="waiting" >waiting</option>' in listing
    assert 'class="badge badge-waiting">waiting</span>' in listing
    dashboard = producer_browser.get("/").get_data(as_text=True)
    assert re.search(r'tile-count">1</span>\s*<span class="badge badge-waiting"', dashboard)


def test_the_pages_speak_each_language(producer, producer_browser):
    batch = make_batch(producer, 2)
    for language, words in (("de", "Stapel"), ("pt-BR", "Lote"), ("zh-Hans", "批次")):
        html = producer_browser.get(
            f"/queue/batches/{batch['id']}", headers={"Accept-Language": language}
        ).get_data(as_text=True)
        assert words in html, language


def test_a_waiting_job_has_a_cancel_button_that_cancels_it(producer, producer_browser, queue):
    batch = make_batch(producer, 2)
    waiting = batch["jobs"][1]
    page = f"/queue/{waiting}"
    assert f'action="{page}/cancel"' in producer_browser.get(page).get_data(as_text=True)
    assert producer_browser.submit(page, f"{page}/cancel").status_code == 302
    assert queue.get(waiting).status == "cancelled" and queue.get(batch["jobs"][0]).status == "pending"
