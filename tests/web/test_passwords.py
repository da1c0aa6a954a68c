"""Passwords: changing one's own on the settings page, and the rules every form keeps."""

from __future__ import annotations

import re

from sqlalchemy import select

from queuelog.models import User
from tests.conftest import Browser
from tests.web.test_sessions import Stolen, assert_logged_out


def _password_is(app, username: str, password: str) -> bool:
    with app.extensions["queuelog"]["db"].session() as s:
        return s.scalar(select(User).where(User.username == username)).check_password(password)


def _change(browser: Browser, current: str, new: str, confirm: str | None = None):
    return browser.submit(
        "/settings",
        "/settings/password",
        current_password=current,
        new_password=new,
        confirm=new if confirm is None else confirm,
    )


def test_changing_ones_password_ends_the_other_sessions_and_keeps_this_one(app, producer_browser):
    other_device = Browser(app.test_client())
    assert other_device.login("alice", "password-alice").status_code == 302
    stolen = Stolen(producer_browser)  # this very session's cookie, from before the change
    response = _change(producer_browser, "password-alice", "a-brand-new-one")
    assert response.status_code == 302 and response.headers["Location"] == "/settings"
    page = producer_browser.get("/settings").get_data(as_text=True)
    assert "Your password is changed. Your other sessions have ended." in page
    assert producer_browser.get("/").status_code == 200  # still logged in
    assert other_device.get("/").status_code == 302
    assert_logged_out(app, stolen)
    assert _password_is(app, "alice", "a-brand-new-one")
    assert Browser(app.test_client()).login("alice", "password-alice").status_code == 200  # refused
    assert Browser(app.test_client()).login("alice", "a-brand-new-one").status_code == 302


def test_wrong_current_password_changes_nothing_and_counts_as_a_failed_login(app, producer_browser):
    for _ in range(5):
        wrong = _change(producer_browser, "not-my-password", "a-brand-new-one")
        assert wrong.status_code == 422
        assert re.search(r'id="current_password-error">That is not your current password\.', wrong.text)
    blocked = _change(producer_browser, "password-alice", "a-brand-new-one")  # even the right one, now
    assert blocked.status_code == 429 and "Too many failed logins" in blocked.text
    assert _password_is(app, "alice", "password-alice")
    assert producer_browser.get("/").status_code == 200  # the session itself goes on


def test_new_password_rules_on_the_settings_page(app, producer_browser):
    blank = _change(producer_browser, "password-alice", " " * 12)
    assert blank.status_code == 422
    assert 'id="new_password-error">A password cannot be only spaces.' in blank.text
    short = _change(producer_browser, "password-alice", "short")
    assert 'id="new_password-error">Use between 8 and 256 characters.' in short.text
    differ = _change(producer_browser, "password-alice", "a-brand-new-one", "a-brand-new-two")
    assert differ.status_code == 422 and 'id="confirm-error">The two new passwords differ.' in differ.text
    german = producer_browser
    german.submit("/", "/language", locale="de", next="/")
    assert "Ein Passwort darf nicht nur aus Leerzeichen bestehen." in _change(german, "x", "\t" * 9).text
    assert _password_is(app, "alice", "password-alice")


def test_visitors_have_no_password_form(browser):
    assert 'action="/settings/password"' not in browser.get("/settings").text
    response = _change(browser, "anything", "long-enough-1")  # with the page's CSRF token
    assert response.status_code == 302 and response.headers["Location"].startswith("/login")


def test_admin_forms_refuse_blank_passwords(app, admin_browser):
    created = admin_browser.submit("/admin/users", username="dave", role="producer", password=" " * 9)
    assert created.status_code == 422
    assert 'id="password-error">A password cannot be only spaces.' in created.text
    admin_browser.submit("/admin/users", username="erin", role="producer", password="erin-password")
    admin_browser.submit("/admin/users", "/admin/users/erin/password", password=" " * 9)
    assert "A password cannot be only spaces." in admin_browser.get("/admin/users").text
    assert _password_is(app, "erin", "erin-password")
