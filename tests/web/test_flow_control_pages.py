"""Flow control on the pages, on both engines (docs/flow-control.md): the job type edit page's limit fields
(refusals beside each field, 422, values saved, the bucket reset, the audit row), the types list's running
jobs and rates, and the dashboard's panel for admins."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from queuelog.models import AuditLog

FORM = {
    "description": "Mail",
    "payload_schema": "",
    "concurrency_limit": "",
    "rate_limit": "",
    "rate_period": "",
}


def beside(page, field: str) -> str | None:
    found = re.search(rf'id="{field}-error">([^<]*)<', page.get_data(as_text=True))
    return html.unescape(found.group(1)) if found else None


def settings(queue, name: str = "email") -> tuple:
    t = queue.types.get(name)
    return (t.description, t.concurrency_limit, t.rate_limit, t.rate_period)


def text_of(page) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page.get_data(as_text=True))))


def test_limits_are_saved_shown_and_removed(admin_browser, queue, app):
    page = admin_browser.get("/admin/types/email")
    assert page.status_code == 200
    for field in ("concurrency_limit", "rate_limit", "rate_period"):
        assert f'name="{field}"' in page.get_data(as_text=True)
    saved = admin_browser.submit(
        "/admin/types/email", **{**FORM, "concurrency_limit": "5", "rate_limit": "100", "rate_period": " "}
    )
    assert saved.status_code == 302
    assert settings(queue) == ("Mail", 5, 100, 60)  # an empty period is a minute
    again = admin_browser.get("/admin/types/email").get_data(as_text=True)
    assert re.search(r'name="concurrency_limit"[^>]*value="5"', again)
    assert re.search(r'name="rate_period"[^>]*value="60"', again)
    listing = text_of(admin_browser.get("/admin/types"))
    assert "0 / 5 100 per minute" in listing

    admin_browser.submit(
        "/admin/types/email", **{**FORM, "concurrency_limit": "5", "rate_limit": "10", "rate_period": "1800"}
    )
    assert "10 per 30 minutes" in text_of(admin_browser.get("/admin/types"))
    admin_browser.submit("/admin/types/email", **FORM)  # every field empty: no limits
    assert settings(queue) == ("Mail", None, None, None)
    with app.extensions["queuelog"]["db"].session() as session:
        details = [
            r.detail for r in session.scalars(select(AuditLog).where(AuditLog.action == "type.update"))
        ]
    assert details == [
        "description changed; concurrency_limit: none -> 5; rate_limit: none -> 100; rate_period: none -> 60",
        "rate_limit: 100 -> 10; rate_period: 60 -> 1800",
        "concurrency_limit: 5 -> none; rate_limit: 10 -> none; rate_period: 1800 -> none",
    ]
    assert "concurrency_limit: none -&gt; 5" in admin_browser.get("/admin/audit").get_data(as_text=True)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("concurrency_limit", "0", "Choose a number from 1 to 10,000."),
        ("concurrency_limit", "-1", "Choose a number from 1 to 10,000."),
        ("concurrency_limit", "10001", "Choose a number from 1 to 10,000."),
        ("concurrency_limit", "1.5", "Enter a whole number from 1 to 10,000."),
        ("concurrency_limit", "five", "Enter a whole number from 1 to 10,000."),
        ("rate_limit", "1000001", "Choose a number from 1 to 1,000,000."),
        ("rate_limit", "1e3", "Enter a whole number from 1 to 1,000,000."),
        ("rate_period", "86401", "Choose a number from 1 to 86,400."),
        ("rate_period", "0", "Choose a number from 1 to 86,400."),
    ],
)
def test_a_bad_limit_is_refused_beside_its_field(admin_browser, queue, field, value, words):
    queue.types.set_limits("email", "ada", concurrency_limit=3)
    form = {**FORM, "description": "changed", "concurrency_limit": "3", "rate_limit": "50", field: value}
    page = admin_browser.submit("/admin/types/email", **form)
    assert page.status_code == 422
    assert beside(page, field) == words
    assert [f for f in ("concurrency_limit", "rate_limit", "rate_period") if beside(page, f)] == [field]
    assert f'value="{value}"' in page.get_data(as_text=True)  # what was typed stays, to be corrected
    assert settings(queue) == ("", 3, None, None)  # nothing saved, the description neither


def test_every_bad_field_is_marked_at_once_in_german(admin_browser, queue):
    admin_browser.submit("/", "/language", locale="de", next="/")
    page = admin_browser.submit(
        "/admin/types/pdf", **{**FORM, "concurrency_limit": "0", "rate_limit": "x", "rate_period": "99999"}
    )
    assert page.status_code == 422
    assert beside(page, "concurrency_limit") == "Wähle eine Zahl von 1 bis 10.000."
    assert beside(page, "rate_limit") == "Gib eine ganze Zahl von 1 bis 1.000.000 ein."
    assert beside(page, "rate_period") == "Wähle eine Zahl von 1 bis 86.400."
    assert "Flusssteuerung" in page.get_data(as_text=True)


def test_a_changed_rate_starts_with_a_full_bucket(admin_browser, queue):
    moment = datetime(2030, 1, 1, tzinfo=UTC)
    queue.types.set_limits("sync", "ada", rate_limit=10, rate_period=60)
    queue.engine.update_job_type("sync", {"rate_tokens": 3.0, "rate_checked_at": moment})  # as a claim does
    form = {**FORM, "rate_limit": "10", "rate_period": "60"}
    assert admin_browser.submit("/admin/types/sync", **{**form, "concurrency_limit": "2"}).status_code == 302
    bucket = queue.types.get("sync")
    assert (bucket.rate_tokens, bucket.rate_checked_at) == (3.0, moment)  # the rate did not change
    assert admin_browser.submit("/admin/types/sync", **{**form, "rate_period": "30"}).status_code == 302
    bucket = queue.types.get("sync")
    assert (bucket.rate_tokens, bucket.rate_checked_at, bucket.rate_period) == (None, None, 30)


def test_the_edit_page_is_for_admins_and_known_types(admin_browser, producer_browser):
    assert admin_browser.get("/admin/types/nope").status_code == 404
    assert admin_browser.submit("/admin/types/email", "/admin/types/nope", **FORM).status_code == 404
    assert producer_browser.get("/admin/types/email").status_code == 403


def test_the_dashboard_shows_admins_the_limited_types(
    admin_browser, producer_browser, producer, worker, queue
):
    def panel(browser) -> str | None:
        page = browser.get("/").get_data(as_text=True)
        found = re.search(r'<section class="card flow-control".*?</section>', page, re.S)
        return text_of_html(found.group(0)) if found else None

    assert panel(admin_browser) is None  # no type has limits: no panel
    queue.types.set_limits("email", "ada", concurrency_limit=3)
    queue.types.set_limits("pdf", "ada", rate_limit=100, rate_period=60)
    queue.types.update("pdf", paused=True)
    for _ in range(2):
        producer.post("/jobs", json={"type": "email"})
    worker.post("/jobs/claim", json={"types": ["email"], "limit": 2})
    shown = panel(admin_browser)
    assert "Flow control" in shown
    assert "email 2 / 3 —" in shown and "pdf paused 0 100 per minute" in shown
    assert "sync" not in shown
    assert panel(producer_browser) is None  # producers never see it


def text_of_html(fragment: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", fragment))).strip()


def test_a_form_without_the_limit_fields_keeps_the_limits(admin_browser, queue):
    queue.types.set_limits("email", "ada", concurrency_limit=4, rate_limit=9, rate_period=30)
    saved = admin_browser.submit("/admin/types/email", description="Only this", payload_schema="")
    assert saved.status_code == 302
    assert settings(queue) == ("Only this", 4, 9, 30)


def test_a_type_form_posted_without_its_schema_field_keeps_the_schema(admin_browser, queue):
    """A browser always sends the field; a hand-made post may not: the stored schema stays, never a 500."""
    schema = {"type": "object", "required": ["to"]}
    admin_browser.submit(
        "/admin/types/email", **{**FORM, "payload_schema": '{"type": "object", "required": ["to"]}'}
    )
    assert queue.types.get("email").payload_schema == schema
    data = {key: value for key, value in FORM.items() if key != "payload_schema"}
    saved = admin_browser.submit("/admin/types/email", **{**data, "description": "Mail, kept"})
    assert saved.status_code == 302
    kept = queue.types.get("email")
    assert kept.payload_schema == schema and kept.description == "Mail, kept"
