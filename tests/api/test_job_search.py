"""GET /jobs with the console's filters (worker, times, error text, a payload field), on both engines."""

from __future__ import annotations

import pytest


def ids(response) -> list[int]:
    assert response.status_code == 200, response.get_json()
    return [job["id"] for job in response.json["jobs"]]


@pytest.fixture
def made(producer, worker, admin):
    jobs = [
        producer.post(
            "/jobs", json={"type": "email", "max_retries": 0, "payload": {"to": f"u{i}", "n": i}}
        ).json
        for i in range(4)
    ]
    held = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{held['id']}/fail", json={"lease_token": held["lease_token"], "error": "SMTP: mailbox full"}
    )
    return [job["id"] for job in jobs], held["id"]


def test_filters_narrow_the_list(admin, producer, made):
    jobs, failed = made
    assert ids(admin.get("/jobs?worker=worker-1")) == [failed]
    assert ids(admin.get("/jobs?error=MAILBOX")) == [failed]
    assert ids(admin.get("/jobs?payload_path=to&payload_value=u2")) == [jobs[2]]
    assert ids(producer.get("/jobs?payload_path=n&payload_value=3")) == [jobs[3]]
    assert ids(admin.get("/jobs?finished_from=2000-01-01T00:00:00Z")) == [failed]
    assert ids(admin.get("/jobs?created_to=2001-01-01T00:00:00Z")) == []
    answer = admin.get("/jobs?created_from=2000-01-01T00:00:00%2B02:00&limit=2").json
    assert [j["id"] for j in answer["jobs"]] == jobs[::-1][:2] and answer["window_full"] is False
    assert answer["next_cursor"] is not None


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("payload_path=to", "payload_value"),
        ("payload_value=u1", "payload_path"),
        ("payload_path=a..b&payload_value=1", "payload_path"),
        ("payload_path=a%22b&payload_value=1", "payload_path"),
        ("created_from=2026-02-30T00:00:00Z", "created_from"),
        ("finished_to=2026-01-01T00:00:00", "finished_to"),
        ("worker=" + "w" * 65, "worker"),
        ("error=" + "e" * 201, "error"),
    ],
)
def test_bad_filters_are_422_naming_the_field(admin, query, field):
    response = admin.get(f"/jobs?{query}")
    assert response.status_code == 422, response.get_json()
    assert response.json["errors"][0]["field"] == field


def test_error_text_is_for_admins_only(producer, made):
    response = producer.get("/jobs?error=mailbox")
    assert response.status_code == 422 and response.json["errors"][0]["field"] == "error"


def test_a_page_that_examined_its_whole_window_says_so(app, admin, producer):
    jobs = [producer.post("/jobs", json={"type": "email", "payload": {"n": i}}).json["id"] for i in range(5)]
    app.config["QUEUELOG"] = app.config["QUEUELOG"].replace(SEARCH_SCAN=2)
    answer = admin.get("/jobs?payload_path=n&payload_value=0").json
    assert answer["jobs"] == [] and answer["window_full"] is True
    seen = []
    while answer["next_cursor"]:
        answer = admin.get(f"/jobs?payload_path=n&payload_value=0&cursor={answer['next_cursor']}").json
        seen += [job["id"] for job in answer["jobs"]]
    assert seen == [jobs[0]] and answer["window_full"] is False


LONG_NAME, LONG_TEXT = "w" * 64, "e" * 200


@pytest.mark.parametrize(
    "api_field, page_field, value, accepted",
    [
        ("worker", "worker", LONG_NAME, True),
        ("worker", "worker", LONG_NAME + "w", False),
        ("type", "type", LONG_NAME, True),
        ("type", "type", LONG_NAME + "t", False),
        ("error", "error", LONG_TEXT, True),
        ("error", "error", LONG_TEXT + "e", False),
        ("payload_path", "path", ".".join("k" * 8), True),
        ("payload_path", "path", ".".join("k" * 9), False),
        ("payload_path", "path", "k" * 64, True),
        ("payload_path", "path", "k" * 65, False),
        ("payload_path", "path", "a..b", False),
        ("payload_path", "path", 'a"b', False),
        ("payload_path", "path", "a\\b", False),
        ("payload_value", "value", LONG_TEXT, True),
        ("payload_value", "value", LONG_TEXT + "v", False),
    ],
)
def test_the_api_and_the_jobs_page_draw_the_same_line(
    admin, admin_browser, api_field, page_field, value, accepted
):
    """GET /jobs and the jobs page take a search's fields by one set of rules (queuelog/queue/console.py):
    each value at the edge is accepted by both, one past it refused by both, naming the field."""
    from urllib.parse import urlencode

    pair = {"payload_path": ("payload_value", "1"), "payload_value": ("payload_path", "k")}
    api_query = {api_field: value, **dict([pair[api_field]] if api_field in pair else [])}
    page_query = {page_field: value, **({"value": "1"} if page_field == "path" else {})}
    if page_field == "value":
        page_query["path"] = "k"
    api = admin.get(f"/jobs?{urlencode(api_query)}")
    page = admin_browser.get(f"/queue?{urlencode(page_query)}").get_data(as_text=True)
    assert (api.status_code == 200) is accepted, api.get_json()
    if not accepted:
        assert [e["field"] for e in api.json["errors"]] == [api_field]
    assert (f'id="f-{page_field}-error"' in page) is (not accepted)
    assert 'class="error" id="f-' not in page.replace(f'id="f-{page_field}-error"', "")  # no other field
