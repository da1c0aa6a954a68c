"""Passwords: changing one's own on the settings page, and the rules every form keeps."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from queuelog import create_app
from queuelog.config import SettingError, load_settings
from queuelog.models import User
from tests.conftest import ADMIN_PASSWORD, Browser
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


def _stored_hash(app, username: str) -> str:
    with app.extensions["queuelog"]["db"].session() as s:
        return s.scalar(select(User.password_hash).where(User.username == username))


def _app_hashing_with(database_url: str, method: str):
    settings = {"DATABASE_URL": database_url, "SECRET_KEY": "test-secret-key", "PASSWORD_HASH": method}
    return create_app({"TESTING": True, "QUEUELOG": settings})


@pytest.mark.parametrize(
    "first,then", [("scrypt", "pbkdf2:sha256:1"), ("pbkdf2:sha256:1", "scrypt:32768:8:1")]
)
def test_passwords_hashed_one_way_still_work_after_the_hash_setting_changes(app, database_url, first, then):
    """QUEUELOG_PASSWORD_HASH decides how new passwords are stored; each stored hash names its own method,
    so every password set before a change of the setting still logs in after it, in both directions."""
    before = _app_hashing_with(database_url, first)
    admin_browser = Browser(before.test_client())
    assert admin_browser.login("admin", ADMIN_PASSWORD).status_code == 302
    admin_browser.submit("/admin/users", username="erin", role="producer", password="erin-password")
    assert _stored_hash(before, "erin").startswith(("scrypt:32768:8:1" if first == "scrypt" else first) + "$")
    before.extensions["queuelog"]["db"].dispose()

    after = _app_hashing_with(database_url, then)
    assert Browser(after.test_client()).login("erin", "erin-password").status_code == 302
    assert Browser(after.test_client()).login("erin", "not-erins-password").status_code == 200  # refused
    assert _stored_hash(after, "erin").split(":")[0] == first.split(":")[0]  # a login does not rehash
    runner = after.test_cli_runner()
    result = runner.invoke(args=["users", "set-password", "erin", "--password", "erin-new-password"])
    assert result.exit_code == 0, result.output
    assert _stored_hash(after, "erin").startswith(then + "$")
    assert Browser(after.test_client()).login("erin", "erin-new-password").status_code == 302
    after.extensions["queuelog"]["db"].dispose()


def test_the_suite_hashes_cheaply_and_a_server_hashes_with_scrypt(app, monkeypatch, tmp_path):
    """The tests run with a one-iteration hash (tests/conftest.py); without the setting it is scrypt."""
    assert app.config["QUEUELOG"]["PASSWORD_HASH"] == "pbkdf2:sha256:1"
    assert _stored_hash(app, "admin").startswith("pbkdf2:sha256:1$")
    monkeypatch.delenv("QUEUELOG_PASSWORD_HASH")
    assert load_settings(str(tmp_path)).password_hash == "scrypt"


@pytest.mark.parametrize("method", ["md5", "pbkdf2:sha1:1", "pbkdf2:1", "scrypt:x", "plain"])
def test_an_unknown_password_hash_is_refused_at_start_with_the_setting_named(monkeypatch, tmp_path, method):
    monkeypatch.setenv("QUEUELOG_PASSWORD_HASH", method)
    with pytest.raises(
        SettingError, match=r"^QUEUELOG_PASSWORD_HASH=.* is not valid: a password hash method"
    ):
        load_settings(str(tmp_path))
