"""The submit page judges a job by the rules POST /jobs declares (queuelog/api/jobs.py; the queue's
own checks in queuelog/queue/inputs.py): what the API refuses, the page refuses beside the field, in the
page's words, and nothing is made."""

from __future__ import annotations

import re

import pytest

TEXT = "Use printable characters only, no line breaks or other control characters."


@pytest.mark.parametrize(
    ("form", "api", "field", "message"),
    [
        ({"idempotency_key": "night\u200bly"}, {"idempotency_key": "night\u200bly"}, "idempotency_key", TEXT),
        ({"idempotency_key": "night\u2028ly"}, {"idempotency_key": "night\u2028ly"}, "idempotency_key", TEXT),
        (
            {"payload": '{"a": "\\u0000"}'},
            {"payload": {"a": "\x00"}},
            "payload",
            "The payload contains the NUL character (\\u0000), which cannot be stored.",
        ),
        (
            {"run_at": "1999-12-31T23:00"},
            {"run_at": "1999-12-31T23:00:00Z"},
            "run_at",
            "Choose a start time between the years 2000 and 9000.",
        ),
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
    assert shown and shown.group(1) == message
    assert queue.list_jobs(owner="alice", limit=5) == []
