"""The submit page judges a job with the same declaration as POST /jobs (queuelog/api/schemas.py): what
the API refuses, the page refuses beside the field, and nothing is made."""

from __future__ import annotations

import re

import pytest

TEXT = "must contain only printable characters"


@pytest.mark.parametrize(
    ("form", "api", "field", "message"),
    [
        ({"idempotency_key": "night\u200bly"}, {"idempotency_key": "night\u200bly"}, "idempotency_key", TEXT),
        ({"idempotency_key": "night\u2028ly"}, {"idempotency_key": "night\u2028ly"}, "idempotency_key", TEXT),
        ({"payload": '{"a": "\\u0000"}'}, {"payload": {"a": "\x00"}}, "payload", "\\u0000"),
        ({"run_at": "1999-12-31T23:00"}, {"run_at": "1999-12-31T23:00:00Z"}, "run_at", None),
    ],
)
def test_the_submit_page_refuses_what_the_api_refuses(
    producer_browser, producer, queue, form, api, field, message
):
    refused = producer.post("/jobs", json={"type": "email", **api})
    assert refused.status_code == 422 and refused.json["errors"][0]["field"] == field
    fields = {"type": "email", "payload": "{}", "priority": "low", "max_retries": "3", **form}
    page = producer_browser.submit("/submit", **fields)
    assert page.status_code == 422
    shown = re.search(rf'id="{field}-error">([^<]*)<', page.get_data(as_text=True))
    assert shown
    if message:  # the API's words, shown as they are; a time is said in the page's own words
        assert message in refused.json["errors"][0]["message"] and message in shown.group(1)
    assert queue.list_jobs(owner="alice", limit=5) == []
