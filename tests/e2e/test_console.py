"""The console in a real browser: a search narrowing the jobs list, a bulk retry of everything matching
it (confirming the count), and a bulk cancellation of rows ticked in the list."""

from __future__ import annotations

import re

from tests.e2e.conftest import log_in, screenshot


def listed(page) -> list[int]:
    return [int(t.lstrip("#")) for t in page.locator("table.jobs tbody td:nth-child(2) a").all_inner_texts()]


def fail(worker, job_type: str, error: str) -> int:
    held = worker.post("/jobs/claim", json={"types": [job_type]}).json
    worker.post(f"/jobs/{held['id']}/fail", json={"lease_token": held["lease_token"], "error": error})
    return held["id"]


def test_search_then_retry_everything_matching_then_cancel_ticked_rows(
    app, producer, worker, live_server, new_page, console
):
    full = [producer.post("/jobs", json={"type": "email", "max_retries": 0}).json["id"] for _ in range(5)]
    for _ in full:
        fail(worker, "email", "SMTPError: mailbox full for user 17")
    font = producer.post("/jobs", json={"type": "pdf", "max_retries": 0}).json["id"]
    fail(worker, "pdf", "KeyError: 'font'")
    waiting = [producer.post("/jobs", json={"type": "sync"}).json["id"] for _ in range(3)]

    server = live_server(workers=1, threads=4)
    page = new_page(viewport=(1280, 800))
    log_in(page, server.url)
    page.get_by_role("link", name="Jobs").click()
    assert len(listed(page)) == 9

    # The search narrows the list to the five full mailboxes.
    page.get_by_label("Status").select_option("failed")
    page.locator("details.more-filters > summary").click()
    page.get_by_label("Error contains").fill("MAILBOX full")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(re.compile(r".*/queue\?.*error=MAILBOX"))
    assert sorted(listed(page)) == full
    screenshot(page, "console-search")

    # Everything matching: the confirmation states the count, then they are pending again.
    page.get_by_role("link", name="Retry all…").click()
    assert "5 jobs match this search." in page.locator("main").inner_text()
    screenshot(page, "console-bulk-confirm")
    page.get_by_role("button", name="Yes, retry 5 jobs").click()
    page.wait_for_url(re.compile(r".*/queue\?.*status=failed"))
    assert "5 jobs retried." in page.locator("main").inner_text()
    assert listed(page) == []  # none of them is failed any more
    assert {producer.get(f"/jobs/{i}").json["status"] for i in full} == {"pending"}
    assert producer.get(f"/jobs/{font}").json["status"] == "failed"

    # Ticked rows: two of the sync jobs are cancelled after a confirmation of two.
    page.goto(f"{server.url}/queue?type=sync")
    assert sorted(listed(page)) == waiting
    page.get_by_label(f"Select #{waiting[0]}").check()
    page.get_by_label(f"Select #{waiting[2]}").check()
    page.get_by_role("button", name="Cancel…").click()
    assert "You selected 2 jobs." in page.locator("main").inner_text()
    page.get_by_role("button", name="Yes, cancel 2 jobs").click()
    page.wait_for_url(re.compile(r".*/queue\?type=sync$"))
    assert "2 jobs cancelled." in page.locator("main").inner_text()
    statuses = [producer.get(f"/jobs/{i}").json["status"] for i in waiting]
    assert statuses == ["cancelled", "pending", "cancelled"]
    assert console.problems == []


def test_error_group_links_to_its_jobs_as_a_search(app, producer, worker, live_server, new_page, console):
    ids = [producer.post("/jobs", json={"type": "email", "max_retries": 0}).json["id"] for _ in range(2)]
    for n in (3, 4):
        fail(worker, "email", f"TimeoutError: gave up after {n}s")
    server = live_server(workers=1, threads=4)
    page = new_page(viewport=(390, 844))
    log_in(page, server.url)
    page.goto(f"{server.url}/admin/errors")
    assert page.locator("figure.trend svg rect").count() == 1  # both failures in the last hour's bar
    screenshot(page, "console-errors-phone")
    page.get_by_role("link", name="Search these jobs").click()
    page.wait_for_url(re.compile(r".*/queue\?group=\w+$"))
    assert sorted(listed(page)) == ids
    assert console.problems == []
