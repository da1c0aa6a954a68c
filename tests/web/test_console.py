"""The console's search and bulk actions, request by request, on both engines (the browser tests drive
the main paths in Chromium)."""

from __future__ import annotations

import html
import re

import pytest
from sqlalchemy import select

from queuelog.models import AuditLog


def shown(page) -> list[int]:
    return [int(i) for i in re.findall(r'href="/queue/(\d+)"', page.get_data(as_text=True))]


def hidden_fields(page_html: str, action: str) -> dict[str, list[str]]:
    """The hidden inputs of the page's form that posts to ``action``."""
    form = re.search(rf'<form method="post" action="{re.escape(action)}"[^>]*>(.*?)</form>', page_html, re.S)
    assert form, f"no form posting to {action}"
    fields: dict[str, list[str]] = {}
    for tag in re.findall(r"<input [^>]*>", form.group(1)):
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', tag))
        if attrs.get("type") == "hidden":
            fields.setdefault(attrs["name"], []).append(html.unescape(attrs["value"]))
    return fields


def audit_rows(app) -> list[AuditLog]:
    with app.extensions["queuelog"]["db"].session() as s:
        return list(
            s.scalars(select(AuditLog).where(AuditLog.action.like("jobs.bulk_%")).order_by(AuditLog.id))
        )


def fail_next(worker, error: str) -> int:
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{held['id']}/fail", json={"lease_token": held["lease_token"], "error": error})
    return held["id"]


@pytest.fixture
def jobs(producer, worker, keys):
    """Six jobs of alice's (two failed by worker-1, one per error), and two of bob's."""
    ids = [
        producer.post(
            "/jobs",
            json={
                "type": ("email", "pdf")[i % 2],
                "max_retries": 0,
                "payload": {"to": f"u{i % 3}@example.com"},
            },
        ).json["id"]
        for i in range(6)
    ]
    failed = [fail_next(worker, "SMTPError: mailbox full"), fail_next(worker, "KeyError: 'font'")]
    bob = keys.producer("bob")
    ids += [
        bob.post("/jobs", json={"type": "sync", "payload": {"to": "u0@example.com"}}).json["id"]
        for _ in range(2)
    ]
    return {"all": ids, "failed": failed}


def test_search_narrows_the_list(admin_browser, jobs):
    every = jobs["all"]
    assert shown(admin_browser.get("/queue")) == every[::-1]
    cases = {
        "worker=worker-1": jobs["failed"][::-1],
        "error=mailbox": [jobs["failed"][0]],
        "error=MAILBOX+FULL&status=failed": [jobs["failed"][0]],
        "path=to&value=u0%40example.com": [every[7], every[6], every[3], every[0]],
        "path=to&value=u0%40example.com&owner=alice": [every[3], every[0]],
        f"id={every[4]}": [every[4]],
        f"id=%23{every[4]}": [every[4]],
        "type=sync": [every[7], every[6]],
        "created_from=2000-01-01T00%3A00&created_to=2999-01-01T00%3A00": every[::-1],
        "created_to=2001-01-01T00%3A00": [],
        "finished_from=2000-01-01T00%3A00": jobs["failed"][::-1],
    }
    for query, expected in cases.items():
        response = admin_browser.get(f"/queue?{query}")
        assert response.status_code == 200, query
        assert shown(response) == expected, query


def test_producers_search_their_own_jobs_and_never_error_text(app, producer_browser, jobs):
    mine = jobs["all"][:6]
    assert shown(producer_browser.get("/queue")) == mine[::-1]
    assert shown(producer_browser.get("/queue?owner=bob")) == mine[::-1]  # the owner field is the admin's
    page = producer_browser.get("/queue?error=mailbox")
    assert shown(page) == mine[::-1] and 'name="error"' not in page.get_data(as_text=True)
    assert shown(producer_browser.get("/queue?path=to&value=u0%40example.com")) == [mine[3], mine[0]]
    assert producer_browser.get("/queue/bulk/retry").status_code == 403
    assert "Retry all" not in producer_browser.get("/queue").get_data(as_text=True)


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("id=%D9%A1%D9%A2", "id", "Enter a job number"),  # Arabic-Indic digits
        ("id=" + "9" * 40, "id", "Enter a job number"),
        ("id=-3", "id", "Enter a job number"),
        ("created_from=2026-02-30T10%3A00", "created_from", "Enter a date and time"),
        ("created_to=99999-01-01T00%3A00", "created_to", "Enter a date and time"),
        ("finished_to=1999-12-31T23%3A59", "finished_to", "Enter a date and time"),
        ("finished_from=yesterday", "finished_from", "Enter a date and time"),
        ("created_from=%D9%A2026-01-01T00%3A00", "created_from", "Enter a date and time"),
        ("path=a%22b&value=1", "path", "separated by dots"),
        ("path=a..b&value=1", "path", "separated by dots"),
        ("path=to", "value", "Give both"),
        ("value=ada", "path", "Give both"),
        ("priority=urgent", "priority", "Choose a priority"),
        ("status=done", "status", "Choose a status"),
        ("worker=" + "w" * 65, "worker", "at most 64"),
        ("error=" + "e" * 201, "error", "at most 200"),
    ],
)
def test_bad_search_input_is_a_message_beside_its_field(admin_browser, query, field, message):
    response = admin_browser.get(f"/queue?{query}")
    assert response.status_code == 422
    page = response.get_data(as_text=True)
    error = re.search(rf'<span class="error" id="f-{field}-error">([^<]*)</span>', page)
    assert error and message in html.unescape(error.group(1)), page[-3000:]
    assert "nothing was searched" in page


def test_nul_in_a_search_is_refused_before_anything_runs(admin_browser):
    response = admin_browser.get("/queue?worker=a%00b")
    assert response.status_code == 400 and "worker" in response.get_data(as_text=True)


def test_a_search_examines_a_bounded_window_and_offers_to_look_further(app, admin_browser, producer):
    ids = [producer.post("/jobs", json={"type": "email", "payload": {"n": i}}).json["id"] for i in range(8)]
    app.config["QUEUELOG"] = app.config["QUEUELOG"].replace(SEARCH_SCAN=3)
    first = admin_browser.get("/queue?path=n&value=0").get_data(as_text=True)
    assert shown_in(first) == [] and "looked at the newest 3 jobs" in first
    further = html.unescape(re.search(r'href="([^"]+)">Look further, below job #(\d+)', first).group(1))
    assert f"before={ids[5]}" in further
    second = admin_browser.get(further).get_data(as_text=True)
    assert shown_in(second) == [] and f"below job #{ids[2]}" in second
    third = admin_browser.get(f"/queue?path=n&value=0&before={ids[2]}").get_data(as_text=True)
    assert shown_in(third) == [ids[0]] and "Look further" not in third


def shown_in(page_html: str) -> list[int]:
    return [int(i) for i in re.findall(r'href="/queue/(\d+)"', page_html)]


def test_bulk_action_on_selected_rows_asks_then_retries_and_is_audited(app, admin_browser, producer, jobs):
    listing = admin_browser.get("/queue?status=failed").get_data(as_text=True)
    token = hidden_fields(listing, "/queue/bulk/selected")["csrf_token"][0]
    chosen = {"csrf_token": token, "action": "retry", "ids": jobs["failed"], "back": "status=failed"}
    confirm = admin_browser.client.post("/queue/bulk/selected", data=chosen).get_data(as_text=True)
    assert "You selected 2 jobs." in confirm and "Yes, retry 2 jobs" in confirm
    assert [s for s in (producer.get(f"/jobs/{i}").json["status"] for i in jobs["failed"])] == ["failed"] * 2
    fields = hidden_fields(confirm, "/queue/bulk/selected")
    done = admin_browser.client.post("/queue/bulk/selected", data=fields)
    assert done.status_code == 302 and done.location.endswith("/queue?status=failed")
    assert "2 jobs retried." in admin_browser.get("/queue").get_data(as_text=True)
    for job_id in jobs["failed"]:
        assert producer.get(f"/jobs/{job_id}").json["status"] == "pending"
        event = producer.get(f"/jobs/{job_id}/events").json["events"][-1]
        assert (event["event"], event["actor"]) == ("retried", "admin")
    [row] = audit_rows(app)
    assert (row.actor, row.action, row.target) == ("admin", "jobs.bulk_retry", "selected")
    assert row.detail == f"ids: {jobs['failed'][0]} {jobs['failed'][1]}; jobs changed: 2"


def test_bulk_action_on_everything_matching_goes_in_steps_and_spares_later_jobs(app, admin_browser, producer):
    ids = [producer.post("/jobs", json={"type": "email", "payload": {"k": "v"}}).json["id"] for _ in range(7)]
    other = producer.post("/jobs", json={"type": "pdf", "payload": {"k": "v"}}).json["id"]
    unlike = producer.post("/jobs", json={"type": "email", "payload": {"k": "w"}}).json["id"]
    app.config["QUEUELOG"] = app.config["QUEUELOG"].replace(SEARCH_SCAN=3, BULK_STEP_SECONDS=0)  # 3 a step
    confirm = admin_browser.get("/queue/bulk/cancel?type=email&path=k&value=v").get_data(as_text=True)
    assert "7 jobs match this search." in confirm and "This will cancel 7 pending jobs." in confirm
    late = producer.post("/jobs", json={"type": "email", "payload": {"k": "v"}}).json[
        "id"
    ]  # after the confirmation
    fields = hidden_fields(confirm, "/queue/bulk/cancel")
    steps = 0
    while True:
        response = admin_browser.client.post("/queue/bulk/cancel", data=fields)
        steps += 1
        if response.status_code == 302:
            break
        page = response.get_data(as_text=True)
        assert response.status_code == 200 and "Bulk action in progress" in page
        fields = hidden_fields(page, "/queue/bulk/cancel")
    # 8 pending email jobs up to the confirmation's newest id, examined 3 at a time: 3 steps.
    assert steps == 3 and response.location.endswith("/queue?type=email&path=k&value=v")
    assert "7 jobs cancelled." in admin_browser.get("/queue").get_data(as_text=True)
    assert {producer.get(f"/jobs/{i}").json["status"] for i in ids} == {"cancelled"}
    assert producer.get(f"/jobs/{late}").json["status"] == "pending"
    assert producer.get(f"/jobs/{other}").json["status"] == "pending"
    assert producer.get(f"/jobs/{unlike}").json["status"] == "pending"
    rows = audit_rows(app)
    assert [r.action for r in rows] == ["jobs.bulk_cancel"] * 3
    assert sum(int(r.detail.rsplit(": ", 1)[1]) for r in rows) == 7
    assert all(r.detail.startswith("search: type=email&path=k&value=v;") for r in rows)


def test_bulk_delete_removes_only_finished_jobs_and_the_counts_follow(
    app, admin_browser, producer, queue, jobs
):
    confirm = admin_browser.get("/queue/bulk/delete?owner=alice").get_data(as_text=True)
    assert "This will delete 2 finished jobs and their history." in confirm
    done = admin_browser.client.post("/queue/bulk/delete", data=hidden_fields(confirm, "/queue/bulk/delete"))
    assert done.status_code == 302
    assert all(queue.get(i) is None for i in jobs["failed"])
    assert len(queue.list_jobs(limit=100)) == 6
    dashboard = admin_browser.get("/").get_data(as_text=True)
    assert re.search(r'tile-count">6</span>\s*<span class="badge badge-pending"', dashboard)
    assert re.search(r'tile-count">0</span>\s*<span class="badge badge-failed"', dashboard)


def test_error_groups_show_first_and_last_seen_a_trend_and_link_to_their_jobs(admin_browser, jobs):
    page = admin_browser.get("/admin/errors").get_data(as_text=True)
    assert page.count('<figure class="trend">') == 2
    assert page.count('class="bar-failed"') == 2  # one failure each, in the last hour's bar
    assert "first " in page and "in all, at most 1 in one hour" in page
    links = [html.unescape(link) for link in re.findall(r'href="(/queue\?group=[^"]*)"', page)]
    assert [shown(admin_browser.get(link)) for link in links] == [[jobs["failed"][1]], [jobs["failed"][0]]]


def test_an_error_groups_search_lists_exactly_its_jobs(admin_browser, producer, worker):
    """Two groups of one type whose errors begin alike ("bad" is a prefix of "bad input"): each group's
    "Search these jobs" lists its own jobs only (all of them, whatever number its errors carry), and a bulk
    retry from there counts and retries those only."""
    ids = [producer.post("/jobs", json={"type": "email", "max_retries": 0}).json["id"] for _ in range(4)]
    errors = ["ValueError: bad", "ValueError: bad input 1", "ValueError: bad", "ValueError: bad input 7"]
    for error in errors:
        fail_next(worker, error)
    page = admin_browser.get("/admin/errors").get_data(as_text=True)
    links = [html.unescape(link) for link in re.findall(r'href="(/queue\?group=[^"]*)"', page)]
    assert len(links) == 2
    found = sorted(sorted(shown(admin_browser.get(link))) for link in links)
    assert found == [[ids[0], ids[2]], [ids[1], ids[3]]]
    short = next(link for link in links if sorted(shown(admin_browser.get(link))) == [ids[0], ids[2]])
    listing = admin_browser.get(short).get_data(as_text=True)
    assert "Only the jobs of this error group:" in listing and "ValueError: bad</code>" in listing
    assert 'type="hidden" name="group"' in listing  # a new search from there stays in the group
    bulk = html.unescape(re.search(r'href="(/queue/bulk/retry\?[^"]*)"', listing).group(1))
    confirm = admin_browser.get(bulk).get_data(as_text=True)
    assert "2 jobs match this search." in confirm
    fields = hidden_fields(confirm, "/queue/bulk/retry")
    assert fields["group"] == [short.split("group=")[1]]
    done = admin_browser.client.post("/queue/bulk/retry", data={k: v[0] for k, v in fields.items()})
    assert done.status_code == 302
    statuses = [producer.get(f"/jobs/{i}").json["status"] for i in ids]
    assert statuses == ["pending", "failed", "pending", "failed"]
    assert shown(admin_browser.get("/queue?group=0123456789abcdef")) == []  # an unknown group: none


def test_a_bulk_confirmation_shows_the_search_in_the_pages_language(admin_browser, jobs):
    """The search a bulk action will act on, each field by its name in the search form and each status,
    priority and time as the page's language writes them (not "status failed" on a German page)."""
    path = "/queue/bulk/retry?status=failed&priority=low&created_from=2026-01-15T09:30&error=SMTP"
    expected = {
        "en": [("Priority", "low"), ("Status", "failed"), ("Created from", "1/15/26, 9:30\u202fAM"),
               ("Error contains", "SMTP")],
        "de": [("Priorität", "niedrig"), ("Status", "fehlgeschlagen"), ("Erstellt ab", "15.01.26, 09:30"),
               ("Fehler enthält", "SMTP")],
        "pt_BR": [("Prioridade", "baixa"), ("Situação", "com falha"), ("Criada a partir de", "15/01/2026 09:30"),
                  ("O erro contém", "SMTP")],
        "zh_Hans": [("优先级", "低"), ("状态", "失败"), ("创建时间起", "2026/1/15 09:30"), ("错误包含", "SMTP")],
    }  # fmt: skip
    for locale, terms in expected.items():
        admin_browser.submit("/", "/language", locale=locale, next="/")
        page = html.unescape(admin_browser.get(path).get_data(as_text=True))
        shown_terms = re.findall(r'<li><span class="muted">([^<]*)</span> <code>([^<]*)</code></li>', page)
        assert shown_terms == terms, (locale, shown_terms)
