"""Sessions end: a copy of the session cookie, saved before a logout, a password reset, a deactivation or a
role change, is replayed from another client and must find itself logged out, unable to submit jobs."""

from __future__ import annotations

import time

import pytest

from tests.conftest import Browser, csrf_token

SUBMIT = {"type": "email", "payload": "{}", "priority": "low", "max_retries": "3"}


class Stolen:
    """What an attacker keeps: the session cookie, and a submit form's CSRF token from the same session."""

    def __init__(self, browser: Browser):
        self.token = csrf_token(browser.get("/submit").get_data(as_text=True))
        self.cookie = browser.client.get_cookie("session").value

    def replay(self, app) -> tuple:
        """From a fresh client: the dashboard's answer, the submit form's answer, the jobs that exist."""
        client = app.test_client()
        client.set_cookie("session", self.cookie)
        dashboard = client.get("/")
        submitted = client.post("/submit", data={**SUBMIT, "csrf_token": self.token})
        jobs = app.extensions["queuelog"]["queue"].list_jobs(limit=10)
        return dashboard, submitted, jobs


def assert_logged_out(app, stolen: Stolen, *, cookie_expired: bool = False) -> None:
    dashboard, submitted, jobs = stolen.replay(app)
    assert dashboard.status_code == 302 and dashboard.headers["Location"].startswith("/login")
    if cookie_expired:  # nothing in the cookie is read any more, the CSRF secret included
        assert submitted.status_code == 400
    else:
        assert submitted.status_code == 302 and submitted.headers["Location"].startswith("/login")
    assert jobs == []


def test_a_replayed_cookie_works_while_the_session_lasts(app, producer_browser):
    """The control: the replay itself is sound, so the refusals below are the server's doing."""
    dashboard, submitted, jobs = Stolen(producer_browser).replay(app)
    assert dashboard.status_code == 200
    assert submitted.status_code == 302 and submitted.headers["Location"].startswith("/queue/")
    assert [job["owner"] for job in jobs] == ["alice"]


def test_logout_ends_every_session_of_the_user(app, producer_browser):
    other_device = Browser(app.test_client())
    assert other_device.login("alice", "password-alice").status_code == 302
    stolen = Stolen(producer_browser)
    assert producer_browser.submit("/", "/logout").status_code == 302
    assert_logged_out(app, stolen)
    assert other_device.get("/").status_code == 302  # logged out there too
    assert producer_browser.login("alice", "password-alice").status_code == 302  # logging in again works
    assert producer_browser.get("/").status_code == 200


@pytest.mark.parametrize(
    "change,data",
    [("password", {"password": "a-new-password"}), ("deactivate", {}), ("role", {"role": "admin"})],
)
def test_an_admins_change_ends_the_users_sessions(app, producer_browser, admin_browser, change, data):
    stolen = Stolen(producer_browser)
    admin_browser.submit("/admin/users", f"/admin/users/alice/{change}", **data)
    assert_logged_out(app, stolen)
    assert producer_browser.get("/").status_code == 302
    assert admin_browser.get("/admin/users").status_code == 200  # the admin's own session goes on


def test_reactivation_does_not_bring_old_sessions_back(app, producer_browser, admin_browser):
    stolen = Stolen(producer_browser)
    admin_browser.submit("/admin/users", "/admin/users/alice/deactivate")
    admin_browser.submit("/admin/users", "/admin/users/alice/activate")
    assert_logged_out(app, stolen)


def test_a_password_reset_from_the_command_line_ends_the_users_sessions(app, runner, producer_browser):
    stolen = Stolen(producer_browser)
    result = runner.invoke(args=["users", "set-password", "alice", "--password", "cli-new-password"])
    assert result.exit_code == 0, result.output
    assert_logged_out(app, stolen)
    assert Browser(app.test_client()).login("alice", "cli-new-password").status_code == 302


@pytest.mark.parametrize("app_settings", [{"SESSION_LIFETIME": "3s"}])
def test_a_login_lasts_at_most_the_session_lifetime(app, producer_browser, app_settings):
    stolen = Stolen(producer_browser)
    assert producer_browser.get("/").status_code == 200
    time.sleep(3.5)
    assert producer_browser.get("/").status_code == 302  # even though it was used a moment ago
    assert_logged_out(app, stolen)


@pytest.mark.parametrize("app_settings", [{"SESSION_IDLE": "1s"}])
def test_an_idle_session_ends(app, producer_browser, app_settings):
    stolen = Stolen(producer_browser)
    cookie = producer_browser.client.get_cookie("session")
    assert cookie.expires is not None  # the browser forgets it too
    time.sleep(2.2)
    assert producer_browser.get("/").status_code == 302
    assert_logged_out(app, stolen, cookie_expired=True)


def test_sessions_from_before_session_versions_are_logged_out(app, client):
    """A cookie signed with the right key but without a version (as before) counts for nothing."""
    with client.session_transaction() as session:
        session["_user_id"] = "1"
        session["login_at"] = int(time.time())
    assert client.get("/").status_code == 302
