"""Login limits hold under concurrent attempts, and count the client's address behind trusted proxies."""

from __future__ import annotations

import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import func, select

from queuelog.models import LoginAttempt
from tests.conftest import ADMIN_PASSWORD, Browser, csrf_token

BURST = 30


def _burst(base: str, attempts: list[tuple[str, str]]) -> Counter:
    """Every attempt from its own HTTP session, all sent at once; the answers' status codes, counted.

    200 is a password that was checked and found wrong, 429 an attempt refused before any check."""
    barrier = threading.Barrier(len(attempts))

    def attempt(credentials: tuple[str, str]) -> int:
        with requests.Session() as http:
            token = csrf_token(http.get(f"{base}/login", timeout=60).text)
            barrier.wait(timeout=120)
            username, password = credentials
            data = {"csrf_token": token, "username": username, "password": password}
            return http.post(f"{base}/login", data=data, allow_redirects=False, timeout=120).status_code

    with ThreadPoolExecutor(len(attempts)) as pool:
        return Counter(pool.map(attempt, attempts))


def _attempts(app, key: str) -> int:
    with app.extensions["queuelog"]["db"].session() as s:
        return s.scalar(select(func.count()).select_from(LoginAttempt).where(LoginAttempt.key == key))


def test_concurrent_wrong_passwords_check_no_more_than_the_limits_allow(app, live_server):
    server = live_server(workers=2, threads=8)
    same_user = _burst(server.url, [("admin", "wrong-password")] * BURST)
    assert same_user == Counter({200: 5, 429: BURST - 5})  # per username: 5 checks, however many at once
    assert _attempts(app, "user:admin") == 5
    many_users = _burst(server.url, [(f"nobody-{i}", "wrong-password") for i in range(BURST)])
    assert many_users == Counter({200: 15, 429: BURST - 15})  # per address: 20 in all, 5 of them above
    assert _attempts(app, "addr:127.0.0.1") == 20


def _login_from(app, username: str, password: str, forwarded_for: str | None = None) -> int:
    client = app.test_client()
    token = csrf_token(client.get("/login").get_data(as_text=True))
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    data = {"csrf_token": token, "username": username, "password": password}
    return client.post("/login", data=data, headers=headers).status_code


@pytest.mark.parametrize("app_settings", [{"TRUSTED_PROXIES": 1}])
def test_behind_a_proxy_each_client_address_has_its_own_limit(app, app_settings):
    for i in range(20):  # twenty clients behind the one proxy, one failure each
        assert _login_from(app, f"user{i}", "wrong-password", f"203.0.113.{i}") == 200
    assert _login_from(app, "admin", ADMIN_PASSWORD, "198.51.100.7") == 302  # not locked out
    for i in range(20):  # one client failing twenty times is stopped...
        assert _login_from(app, f"other{i}", "wrong-password", "198.51.100.66") == 200
    assert _login_from(app, "admin", ADMIN_PASSWORD, "198.51.100.66") == 429
    assert _login_from(app, "admin", ADMIN_PASSWORD, "198.51.100.8") == 302  # ...and only that client
    assert _attempts(app, "addr:198.51.100.66") == 20 and _attempts(app, "addr:127.0.0.1") == 0


@pytest.mark.parametrize("app_settings", [{"TRUSTED_PROXIES": 1}])
def test_a_client_cannot_choose_its_address_through_the_proxy(app, app_settings):
    """The proxy appends the address it saw; what the client wrote before it is not believed."""
    for i in range(20):
        assert _login_from(app, f"user{i}", "wrong-password", f"10.9.9.{i}, 198.51.100.66") == 200
    assert _login_from(app, "admin", ADMIN_PASSWORD, "10.0.0.1, 198.51.100.66") == 429


def test_without_trusted_proxies_forwarded_headers_are_ignored(app):
    for i in range(20):
        assert _login_from(app, f"user{i}", "wrong-password", f"203.0.113.{i}") == 200
    assert _login_from(app, "admin", ADMIN_PASSWORD, "198.51.100.7") == 429  # all one address: the peer
    assert _attempts(app, "addr:127.0.0.1") == 20


def test_a_success_frees_the_username_and_does_not_count_against_the_address(app):
    for _ in range(4):
        assert _login_from(app, "admin", "wrong-password") == 200
    assert _login_from(app, "admin", ADMIN_PASSWORD) == 302
    assert _attempts(app, "user:admin") == 0 and _attempts(app, "addr:127.0.0.1") == 4
    for _ in range(5):
        assert _login_from(app, "admin", "wrong-password") == 200
    assert _login_from(app, "admin", ADMIN_PASSWORD) == 429


def test_the_limit_page_says_how_long_to_wait(app):
    b = Browser(app.test_client())
    for _ in range(5):
        b.login("admin", "wrong-password")
    page = b.login("admin", ADMIN_PASSWORD).get_data(as_text=True)
    assert re.search(r"Too many failed logins\. Try again in 15 minutes\.", page)
