"""The admins' schedules page on both engines: create with a preview first (no JavaScript), edit, pause,
resume, run now, delete; bad input is a message beside the field and saves nothing."""

from __future__ import annotations

import html
import re

from tests.conftest import Browser, csrf_token


def form(**kw) -> dict[str, str]:
    data = {"name": "nightly", "type": "email", "cron": "30 2 * * *", "interval_seconds": "",
            "timezone": "America/New_York", "payload": '{"to": "ops@example.com"}', "priority": "high",
            "max_retries": "3", "missed": "fire_once", "action": "save"}  # fmt: skip
    return data | kw


def send(browser: Browser, path: str, data: dict[str, str]):
    """Post the schedule form (its "action" field is the button pressed: preview or save)."""
    token = csrf_token(browser.get(path).get_data(as_text=True))
    return browser.client.post(path, data={**data, "csrf_token": token})


def errors_beside(html: str) -> dict[str, str]:
    """The message shown beside each field: {field id: message}."""
    return dict(re.findall(r'<p class="error" id="([\w-]+)-error">([^<]*)</p>', html))


def test_preview_then_save_then_change(admin_browser: Browser, app):
    page = admin_browser.get("/admin/schedules/new")
    assert page.status_code == 200 and 'name="action" value="preview"' in page.get_data(as_text=True)
    preview = send(admin_browser, "/admin/schedules/new", form(action="preview"))
    html = preview.get_data(as_text=True)
    assert preview.status_code == 200
    times = re.findall(r"<li><time datetime=\"[^\"]+\">([^<]+)</time></li>", html)
    assert len(times) == 5 and all(t.endswith(("02:30 EST", "02:30 EDT")) for t in times)
    assert app.extensions["queuelog"]["schedules"].all() == []  # a preview saves nothing
    saved = send(admin_browser, "/admin/schedules/new", form())
    assert saved.status_code == 302 and saved.headers["Location"].endswith("/admin/schedules")
    listing = admin_browser.get("/admin/schedules").get_data(as_text=True)
    assert "nightly" in listing and "Schedule nightly saved." in listing and "America/New_York" in listing
    edit = admin_browser.get("/admin/schedules/nightly").get_data(as_text=True)
    assert "ops@example.com" in edit and len(re.findall(r"<li><time", edit)) == 5
    changed = send(admin_browser, "/admin/schedules/nightly", form(cron="", interval_seconds="600"))
    assert changed.status_code == 302
    schedule = app.extensions["queuelog"]["schedules"].get("nightly")
    assert (schedule.cron, schedule.interval_seconds, schedule.priority) == (None, 600, 20)


def test_bad_input_is_shown_beside_the_field(admin_browser: Browser, app):
    cases = [
        (form(cron="61 * * * *"), "cron", "Not a cron expression"),
        (form(cron="", interval_seconds="0"), "interval_seconds", "Enter a whole number of seconds"),
        (form(cron="", interval_seconds="-5"), "interval_seconds", "Enter a whole number of seconds"),
        (form(cron=""), "cron", "Give a cron expression or an interval"),
        (form(timezone="Mars/Olympus"), "timezone", "Not a valid choice"),
        (form(payload="[1]"), "payload", "The payload must be a JSON object."),
        (form(name="two words"), "name", "Use 1 to 55 letters"),
    ]
    for data, field, message in cases:
        for action in ("preview", "save"):
            answer = send(admin_browser, "/admin/schedules/new", {**data, "action": action})
            beside = errors_beside(answer.get_data(as_text=True))
            if action == "preview" and field in ("payload", "name"):
                continue  # a preview checks the timing only
            assert answer.status_code == 422, (data, action)
            assert message in beside.get(field, ""), (data, action, beside)
    app.extensions["queuelog"]["queue"].types.update("pdf", enabled=False)
    unknown = send(admin_browser, "/admin/schedules/new", form(type="pdf"))
    assert unknown.status_code == 422 and "type" in errors_beside(unknown.get_data(as_text=True))
    assert app.extensions["queuelog"]["schedules"].all() == []


def test_every_bad_field_is_shown_at_once_in_german(admin_browser: Browser, app):
    app.extensions["queuelog"]["queue"].types.add("report", "", {"properties": {"day": {"type": "string"}}})
    admin_browser.submit("/", "/language", locale="de", next="/")
    bad = form(name="two words", cron="61 * * * *", type="report", payload='{"day": 3}')
    answer = send(admin_browser, "/admin/schedules/new", bad)
    assert answer.status_code == 422
    beside = {
        field: html.unescape(words) for field, words in errors_beside(answer.get_data(as_text=True)).items()
    }
    assert beside == {
        "name": "Verwende 1 bis 55 Buchstaben, Ziffern, '_', '.' oder '-', beginnend mit einem Buchstaben "
        "oder einer Ziffer.",
        "cron": "Kein Cron-Ausdruck: gib fünf Felder an (Minute Stunde Tag Monat Wochentag) oder @hourly, "
        "@daily, @weekly, @monthly oder @yearly.",
        "payload": 'payload.day passt nicht zum Schema des Job-Typs: 3 is not of type "string"',
    }
    assert app.extensions["queuelog"]["schedules"].all() == []


def test_run_now_of_a_disabled_type_is_flashed_in_german(admin_browser: Browser, app):
    send(admin_browser, "/admin/schedules/new", form(type="pdf"))
    app.extensions["queuelog"]["queue"].types.update("pdf", enabled=False)
    admin_browser.submit("/", "/language", locale="de", next="/")
    ran = admin_browser.submit("/admin/schedules", "/admin/schedules/nightly/run")
    assert ran.status_code == 302
    listing = html.unescape(admin_browser.get("/admin/schedules").get_data(as_text=True))
    assert "Der Job-Typ pdf ist unbekannt oder gesperrt. Freigegebene Typen: email, sync." in listing
    assert app.extensions["queuelog"]["queue"].list_jobs(owner="schedule:nightly") == []


def test_pause_resume_run_delete(admin_browser: Browser, app):
    send(admin_browser, "/admin/schedules/new", form())
    assert admin_browser.submit("/admin/schedules", "/admin/schedules/nightly/pause").status_code == 302
    sched = app.extensions["queuelog"]["schedules"]
    assert sched.get("nightly").paused is True
    admin_browser.submit("/admin/schedules", "/admin/schedules/nightly/resume")
    assert sched.get("nightly").paused is False
    ran = admin_browser.submit("/admin/schedules", "/admin/schedules/nightly/run")
    assert ran.status_code == 302
    jobs = app.extensions["queuelog"]["queue"].list_jobs(owner="schedule:nightly")
    assert len(jobs) == 1 and f"Job {jobs[0].id} enqueued." in admin_browser.get("/admin/schedules").get_data(
        as_text=True
    )
    admin_browser.submit("/admin/schedules/nightly", "/admin/schedules/nightly/delete")
    assert sched.all() == []
    assert admin_browser.get("/admin/schedules/nightly").status_code == 404
    audit = admin_browser.get("/admin/audit").get_data(as_text=True)
    for action in ("schedule.create", "schedule.pause", "schedule.resume", "schedule.run", "schedule.delete"):
        assert action in audit


def test_admins_only_and_in_the_navigation(producer_browser: Browser, admin_browser: Browser):
    assert producer_browser.get("/admin/schedules").status_code == 403
    assert 'href="/admin/schedules"' not in producer_browser.get("/").get_data(as_text=True)
    assert 'href="/admin/schedules"' in admin_browser.get("/").get_data(as_text=True)


def test_the_dashboard_shows_admins_the_next_schedules_to_fire(
    admin_browser: Browser, producer_browser: Browser
):
    assert send(admin_browser, "/admin/schedules/new", form(name="nightly")).status_code == 302
    assert send(admin_browser, "/admin/schedules/new", form(name="hourly", cron="@hourly")).status_code == 302
    assert send(admin_browser, "/admin/schedules/new", form(name="resting", cron="@daily")).status_code == 302
    token = csrf_token(admin_browser.get("/admin/schedules").get_data(as_text=True))
    admin_browser.client.post("/admin/schedules/resting/pause", data={"csrf_token": token})
    page = admin_browser.get("/").get_data(as_text=True)
    card = page[page.index('class="card next-schedules"') :]
    names = re.findall(r'href="/admin/schedules/([\w-]+)">', card)
    assert names == ["hourly", "nightly"]  # the soonest first; a paused one is left out
    assert "next-schedules" not in producer_browser.get("/").get_data(as_text=True)


def test_malformed_json_is_named_as_such_beside_every_other_bad_field_in_each_language(
    admin_browser: Browser, app
):
    """A payload that is not JSON is "not valid JSON: <reason>" (not "must be a JSON object"), and the
    name's and the cron expression's messages are shown with it, not after it is fixed."""
    bad = form(name="two words", cron="61 * * * *", payload='{"to": ')
    words = {
        "en": ("Not valid JSON: Expecting value", "Use 1 to 55 letters", "Not a cron expression"),
        "de": ("Kein gültiges JSON: Expecting value", "Verwende 1 bis 55 Buchstaben", "Kein Cron-Ausdruck"),
        "pt_BR": ("JSON inválido: Expecting value", "Use de 1 a 55 letras", "Não é uma expressão cron"),
        "zh_Hans": ("不是有效的 JSON：Expecting value", "使用 1 到 55 个字母", "不是 Cron 表达式"),
    }
    for locale, (payload, name, cron) in words.items():
        admin_browser.submit("/", "/language", locale=locale, next="/")
        answer = send(admin_browser, "/admin/schedules/new", bad)
        assert answer.status_code == 422
        beside = {k: html.unescape(v) for k, v in errors_beside(answer.get_data(as_text=True)).items()}
        assert set(beside) == {"name", "cron", "payload"}, (locale, beside)
        assert beside["payload"].startswith(payload), (locale, beside)
        assert beside["name"].startswith(name) and beside["cron"].startswith(cron), (locale, beside)
    empty_name = send(admin_browser, "/admin/schedules/new", form(name="", cron="61 * * * *", payload="{"))
    assert set(errors_beside(empty_name.get_data(as_text=True))) == {"name", "cron", "payload"}
    assert app.extensions["queuelog"]["schedules"].all() == []


def test_the_form_shows_its_help_whole_and_pausing_says_paused_in_each_language(admin_browser: Browser, app):
    """The name's help keeps its "<name>" (escaped, not swallowed as a tag); pausing flashes "paused" and
    resuming "resumed", not "saved"."""
    words = {"en": ("paused", "resumed"), "de": ("angehalten", "fortgesetzt"),
             "pt_BR": ("pausado", "retomado"), "zh_Hans": ("已暂停", "已恢复")}  # fmt: skip
    send(admin_browser, "/admin/schedules/new", form())
    for locale, (paused, resumed) in words.items():
        admin_browser.submit("/", "/language", locale=locale, next="/")
        page = admin_browser.get("/admin/schedules/new").get_data(as_text=True)
        assert "schedule:&lt;name&gt;" in page and "<name>" not in page, locale
        admin_browser.submit("/admin/schedules", "/admin/schedules/nightly/pause")
        listing = html.unescape(admin_browser.get("/admin/schedules").get_data(as_text=True))
        assert f"nightly {paused}" in listing and "saved" not in listing, locale
        admin_browser.submit("/admin/schedules", "/admin/schedules/nightly/resume")
        listing = html.unescape(admin_browser.get("/admin/schedules").get_data(as_text=True))
        assert f"nightly {resumed}" in listing, locale


def test_delete_asks_first(admin_browser: Browser, app):
    """The edit page's Delete leads to a confirmation (as bulk actions and revoking a key do); only the
    confirmation's button deletes, and only with its CSRF token."""
    send(admin_browser, "/admin/schedules/new", form())
    edit = admin_browser.get("/admin/schedules/nightly").get_data(as_text=True)
    assert '<a class="button danger" href="/admin/schedules/nightly/delete">' in edit
    assert 'action="/admin/schedules/nightly/delete"' not in edit  # no button that deletes at once
    confirm = admin_browser.get("/admin/schedules/nightly/delete")
    text = confirm.get_data(as_text=True)
    assert confirm.status_code == 200 and "This will delete the schedule nightly" in text
    assert app.extensions["queuelog"]["schedules"].get("nightly")  # asking deleted nothing
    assert admin_browser.client.post("/admin/schedules/nightly/delete", data={}).status_code == 400
    assert app.extensions["queuelog"]["schedules"].get("nightly")  # nor did a post without its token
    done = admin_browser.client.post("/admin/schedules/nightly/delete", data={"csrf_token": csrf_token(text)})
    assert done.status_code == 302 and app.extensions["queuelog"]["schedules"].all() == []
    assert admin_browser.get("/admin/schedules/nightly/delete").status_code == 404


def test_a_new_schedules_zone_menu_is_marked_for_the_browsers_zone(admin_browser: Browser):
    """UTC is chosen in the page (what stays without JavaScript); the menu of a new schedule, and only
    that one, is marked for static/timezone.js to choose the browser's zone."""
    page = admin_browser.get("/admin/schedules/new").get_data(as_text=True)
    menu = re.search(r'<select[^>]*id="timezone"[^>]*>', page).group(0)
    assert 'data-browser-zone="fill"' in menu
    assert re.search(r'<option selected value="UTC">|<option value="UTC" selected>', page)
    send(admin_browser, "/admin/schedules/new", form())
    for path in ("/admin/schedules/nightly",):
        assert "data-browser-zone" not in admin_browser.get(path).get_data(as_text=True)
    refused = send(admin_browser, "/admin/schedules/new", form(name="two words"))
    assert "data-browser-zone" not in refused.get_data(as_text=True)  # the person's choice stays


def test_the_audit_logs_intro_names_what_it_lists(admin_browser: Browser, producer, worker):
    """The intro names schedules and bulk actions, which the log lists beside users, keys and types."""
    send(admin_browser, "/admin/schedules/new", form())
    job = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "x"})
    token = csrf_token(admin_browser.get("/queue").get_data(as_text=True))
    admin_browser.client.post(
        "/queue/bulk/selected",
        data={"action": "retry", "ids": str(job["id"]), "confirmed": "1", "csrf_token": token},
    )
    page = html.unescape(admin_browser.get("/admin/audit").get_data(as_text=True))
    assert "schedule.create" in page and "jobs.bulk_retry" in page
    intro = re.search(r'<h1>Audit log</h1>\s*<p class="muted">([^<]*)</p>', page).group(1)
    assert "schedules" in intro and "bulk actions" in intro, intro
