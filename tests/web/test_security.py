"""The pages' security, request by request: CSRF, login limits, redirects, headers, escaping, access."""

from __future__ import annotations

import pytest

from tests.conftest import ADMIN_PASSWORD, Browser, csrf_token

ADMIN_PAGES = [
    "/admin/errors",
    "/admin/users",
    "/admin/keys",
    "/admin/types",
    "/admin/types/email",
    "/admin/audit",
]


def test_login_without_or_with_a_wrong_csrf_token_is_rejected(client):
    missing = client.post("/login", data={"username": "admin", "password": ADMIN_PASSWORD})
    assert missing.status_code == 400
    wrong = client.post(
        "/login", data={"username": "admin", "password": ADMIN_PASSWORD, "csrf_token": "forged"}
    )
    assert wrong.status_code == 400
    assert client.get("/").status_code == 302  # still not logged in


@pytest.mark.parametrize(
    "body",
    [
        b"[1, 2]",
        b'{"username": 5, "password": "x"}',
        b'{"username": "bob", "password": "x\\ud800"}',
        b"[" * 5000,
    ],
    ids=["array", "number", "surrogate", "deep"],
)
def test_a_json_body_sent_to_a_page_form_is_an_empty_form_never_a_500(client, admin_browser, producer, body):
    """No page sends JSON; Flask-WTF would read it as the form, values that are not text and all."""
    token = csrf_token(client.get("/login").get_data(as_text=True))
    headers = {"Content-Type": "application/json", "X-CSRFToken": token}
    login = client.post("/login", data=body, headers=headers)
    assert login.status_code in (200, 400, 422) and client.get("/").status_code == 302  # not logged in
    page = admin_browser.client.get("/submit").get_data(as_text=True)
    headers = {"Content-Type": "application/json", "X-CSRFToken": csrf_token(page)}
    submitted = admin_browser.client.post("/submit", data=body.replace(b"username", b"type"), headers=headers)
    assert submitted.status_code in (200, 400, 422)
    assert producer.get("/jobs").json["jobs"] == []  # nothing written


def test_state_changing_forms_need_the_token(admin_browser, producer):
    job = producer.post("/jobs", json={"type": "email"}).json
    forged = admin_browser.client.post(f"/queue/{job['id']}/cancel", data={"csrf_token": "forged"})
    assert forged.status_code == 400
    assert producer.get(f"/jobs/{job['id']}").json["status"] == "pending"
    ok = admin_browser.submit(f"/queue/{job['id']}", f"/queue/{job['id']}/cancel")
    assert ok.status_code == 302
    assert producer.get(f"/jobs/{job['id']}").json["status"] == "cancelled"


def test_one_message_for_unknown_user_and_wrong_password(browser):
    unknown = browser.login("nobody", "whatever-password").get_data(as_text=True)
    wrong = browser.login("admin", "wrong-password").get_data(as_text=True)
    assert "Unknown user or wrong password." in unknown and "Unknown user or wrong password." in wrong


def test_login_is_rate_limited_per_username(app, browser):
    for _ in range(5):
        assert browser.login("admin", "wrong-password").status_code == 200
    blocked = browser.login("admin", ADMIN_PASSWORD)  # even the right password, now
    assert blocked.status_code == 429
    assert "Too many failed logins" in blocked.get_data(as_text=True)
    other = Browser(app.test_client())
    assert other.login("admin", ADMIN_PASSWORD).status_code == 429  # shared, not per session


def test_login_is_rate_limited_per_address(app, keys):
    for i in range(20):
        Browser(app.test_client()).login(f"user{i}", "wrong-password")
    keys.raw("producer", "alice")
    assert Browser(app.test_client()).login("alice", "password-alice").status_code == 429


@pytest.mark.parametrize(
    "target,expected",
    [
        ("/queue", "/queue"),
        ("https://evil.example/", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("javascript:alert(1)", "/"),
        ("http:/evil.example", "/"),
    ],
)
def test_next_only_goes_to_local_paths(browser, target, expected):
    response = browser.login("admin", ADMIN_PASSWORD, next_url=target)
    assert response.status_code == 302
    assert response.headers["Location"] == expected


def test_session_is_renewed_at_login(app):
    b = Browser(app.test_client())
    with b.client.session_transaction() as session:
        session["planted"] = "by an attacker"
    b.login("admin", ADMIN_PASSWORD)
    with b.client.session_transaction() as session:
        assert "planted" not in session
        assert session.get("_user_id") == "1:0"  # user id 1, session version 0


def test_security_headers_and_cookie_flags(browser, client):
    for response in (client.get("/login"), client.get("/healthz"), client.get("/jobs")):
        headers = response.headers
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert "unsafe-inline" not in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "same-origin"
    response = browser.login("admin", ADMIN_PASSWORD)
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie


@pytest.mark.parametrize("app_settings", [{"SESSION_COOKIE_SECURE": True}])
def test_secure_cookie_when_configured(browser, app_settings):
    cookie = browser.login("admin", ADMIN_PASSWORD).headers["Set-Cookie"]
    assert "Secure" in cookie


def test_markup_in_payloads_and_errors_is_shown_as_text(admin_browser, producer, worker):
    job = producer.post(
        "/jobs", json={"type": "email", "payload": {"html": "<script>alert('p')</script>"}}
    ).json
    held = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{job['id']}/fail",
        json={
            "lease_token": held["lease_token"],
            "error": "<img src=x onerror=alert('e')>",
            "retryable": False,
        },
    )
    for path in (f"/queue/{job['id']}", "/admin/errors"):
        html = admin_browser.get(path).get_data(as_text=True)
        assert "<script>alert" not in html and "<img src=x" not in html
    page = admin_browser.get(f"/queue/{job['id']}").get_data(as_text=True)
    assert "&lt;script&gt;alert(&#39;p&#39;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(&#39;e&#39;)&gt;" in page


@pytest.mark.parametrize("path", ADMIN_PAGES)
def test_admin_pages_refuse_producers_and_send_visitors_to_login(client, producer_browser, path):
    assert producer_browser.get(path).status_code == 403
    anonymous = client.get(path)
    assert anonymous.status_code == 302
    assert anonymous.headers["Location"].startswith("/login?next=")


def test_admin_actions_refuse_producers(producer_browser, producer, worker):
    job = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
    held = worker.post("/jobs/claim").json
    worker.post(f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "x"})
    token = csrf_token(producer_browser.get("/").get_data(as_text=True))
    for path in (
        f"/queue/{job['id']}/retry",
        "/admin/users/admin/deactivate",
        "/admin/keys/x/revoke",
        "/admin/types/email/disable",
        "/admin/users",
    ):
        assert producer_browser.client.post(path, data={"csrf_token": token}).status_code == 403
    assert producer.get(f"/jobs/{job['id']}").json["status"] == "failed"


def test_producers_never_see_error_text(producer_browser, producer, worker):
    job = producer.post("/jobs", json={"type": "email", "max_retries": 0}).json
    held = worker.post("/jobs/claim").json
    worker.post(
        f"/jobs/{job['id']}/fail", json={"lease_token": held["lease_token"], "error": "SecretStackTrace"}
    )
    for path in ("/", "/queue", f"/queue/{job['id']}", "/queue?status=failed"):
        assert "SecretStackTrace" not in producer_browser.get(path).get_data(as_text=True)


def test_producers_see_only_their_own_jobs(producer_browser, keys):
    bob = keys.producer("bob")
    job = bob.post("/jobs", json={"type": "email", "payload": {"bob": "private"}}).json
    assert producer_browser.get(f"/queue/{job['id']}").status_code == 404
    assert "private" not in producer_browser.get("/queue").get_data(as_text=True)
