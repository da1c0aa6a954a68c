"""Requests the API's routes do not answer, on both engines: an unknown path or a wrong method under any
of the API's mounts, a body past the size limit, a path segment no database can store. Each is a 4xx
problem+json for every kind of caller, never a 500; the pages keep their HTML 404 and 405. A 403's text
does not come from a docstring (``python -OO`` drops them)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ADMIN_PASSWORD, ROOT, Browser

PROBLEM = "application/problem+json"
BODY_METHODS = ("POST", "PUT", "PATCH")


def api_rules(app):
    return [rule for rule in app.url_map.iter_rules() if rule.endpoint.startswith("api.")]


def mounts(app) -> list[str]:
    """The first path segment of every API route, from the app's own URL map."""
    return sorted({rule.rule.split("/")[1] for rule in api_rules(app)})


def filled(rule) -> str:
    """A path of ``rule`` with a value for each of its arguments."""
    path = rule.rule
    for name in rule.arguments:
        path = path.replace(f"<jobid:{name}>", "1").replace(f"<path:{name}>", "x").replace(f"<{name}>", "x")
    return path


@pytest.fixture
def callers(app, keys):
    """Each kind of caller, as (name, headers, client): anonymous, the three kinds of key, and a browser
    with a logged-in admin's session cookie."""
    browser = Browser(app.test_client())
    assert browser.login("admin", ADMIN_PASSWORD).status_code == 302
    html = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    return [
        ("anonymous", {}, app.test_client()),
        ("producer", {"Authorization": f"Bearer {keys.raw('producer', 'alice')}"}, app.test_client()),
        ("worker", {"Authorization": f"Bearer {keys.raw('worker', 'w1')}"}, app.test_client()),
        ("admin", {"Authorization": f"Bearer {keys.raw('producer', 'admin')}"}, app.test_client()),
        ("browser", html, browser.client),
    ]


def assert_problem(response, context) -> dict:
    assert 400 <= response.status_code < 500, (context, response.status_code, response.data[:200])
    assert response.mimetype == PROBLEM, (context, response.status_code, response.mimetype)
    body = response.get_json(force=True)
    assert body["status"] == response.status_code and body["type"].startswith("/problems/"), context
    return body


def test_the_mounts_come_from_the_routes(app):
    assert {"jobs", "schedules", "types", "healthz", "metrics", "openapi.json"} <= set(mounts(app))
    assert set(app.extensions["queuelog"]["api_mounts"]) == set(mounts(app))


def test_unknown_paths_and_wrong_methods_under_every_mount_are_problems(app, callers):
    for mount in mounts(app):
        tries = [
            ("GET", f"/{mount}/a/b/c"),
            ("GET", f"/{mount}/no-such-thing/here"),
            ("DELETE", f"/{mount}/x/y"),
            ("PUT", f"/{mount}"),
            ("TRACE", f"/{mount}"),
            ("PATCH", f"/{mount}/x/y/z"),
        ]
        for who, headers, client in callers:
            for method, path in tries:
                response = client.open(path, method=method, headers=headers)
                body = assert_problem(response, (who, method, path))
                if response.status_code == 405:
                    assert response.headers["Allow"] and body["type"] == "/problems/method-not-allowed"


def test_wrong_methods_on_every_api_route_are_problems(app, callers):
    allowed: dict[str, set[str]] = {}
    for rule in api_rules(app):
        allowed.setdefault(filled(rule), set()).update(rule.methods)
    for path, methods in allowed.items():
        for who, headers, client in callers:
            for method in sorted({"GET", "POST", "PUT", "PATCH", "DELETE"} - methods):
                response = client.open(path, method=method, headers=headers)
                assert response.status_code == 405, (who, method, path, response.status_code)
                assert_problem(response, (who, method, path))


def test_bodies_past_the_limit_are_413_on_every_api_body_route(app, callers):
    limit = app.config["MAX_CONTENT_LENGTH"]
    big = b'{"x": "' + b"a" * limit + b'"}'
    routes = [(method, rule) for rule in api_rules(app) for method in BODY_METHODS if method in rule.methods]
    assert {rule.rule for _, rule in routes} >= {"/jobs", "/jobs/batch", "/schedules", "/types/<path:name>"}
    for who, headers, client in callers:
        for method, rule in routes:
            response = client.open(
                filled(rule), method=method, data=big, headers={**headers, "Content-Type": "application/json"}
            )
            assert response.status_code == 413, (who, method, rule.rule, response.status_code)
            assert assert_problem(response, (who, rule.rule))["type"] == "/problems/payload-too-large"


@pytest.mark.parametrize("segment", ["%00", "a%00b", "%ff", "%c0%80", "%ed%a0%80", "%01", "%EF%BF%BF"])
def test_odd_bytes_in_path_segments_are_404(app, callers, segment):
    _, headers, client = callers[3]  # the admin's key reaches every route
    tries = [
        ("GET", f"/schedules/{segment}"),
        ("PATCH", f"/schedules/{segment}"),
        ("DELETE", f"/schedules/{segment}"),
        ("POST", f"/schedules/{segment}/run"),
        ("GET", f"/types/{segment}"),
        ("PATCH", f"/types/{segment}"),
        ("GET", f"/types/a/{segment}"),
    ]
    for method, path in tries:
        response = client.open(path, method=method, headers=headers, json={} if method != "GET" else None)
        assert response.status_code == 404, (method, path, response.status_code, response.data[:200])
        assert_problem(response, (method, path))
    assert client.get("/healthz").status_code == 200  # the database connection is still usable


def test_pages_keep_their_html_404_and_405(app, callers):
    for who, headers, client in callers:
        headers = {**headers, "Accept": "text/html"}
        for method, path, status in (
            ("GET", "/no-such-page", 404),
            ("GET", "/admin/no/such/page", 404),
            ("GET", "/schedulesx", 404),
            ("PUT", "/login", 405),
            ("DELETE", "/", 405),
        ):
            response = client.open(path, method=method, headers=headers)
            assert response.status_code == status, (who, method, path, response.status_code)
            assert response.mimetype == "text/html", (who, method, path, response.mimetype)


@pytest.mark.slow  # a fresh interpreter
def test_a_403_under_python_OO_is_a_problem(tmp_path):
    """The app in a fresh interpreter without docstrings: a producer's key asking for the schedules."""
    script = textwrap.dedent(
        f"""
        import json
        from queuelog import create_app
        from queuelog.queue.admin import AdminStore
        assert create_app.__doc__ is None  # -OO is in force
        app = create_app({{"TESTING": True, "QUEUELOG": {{
            "DATABASE_URL": "sqlite:///{tmp_path / "oo.sqlite3"}", "ADMIN_PASSWORD": "x" * 16,
            "SECRET_KEY": "k"}}}})
        db = app.extensions["queuelog"]["db"]
        AdminStore(db).create_user("alice", "producer", "password-alice")
        key = AdminStore(db).create_key("alice-key", "producer", username="alice")
        client = app.test_client()
        for path in ("/schedules", "/types"):
            answer = client.get(path, headers={{"Authorization": "Bearer " + key}})
            print(json.dumps([answer.status_code, answer.mimetype, answer.get_json(force=True)]))
        """
    )
    run = subprocess.run(
        [sys.executable, "-OO", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    answers = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("[")]
    assert [(status, mimetype) for status, mimetype, _ in answers] == [(403, PROBLEM)] * 2
    assert [body["detail"] for _, _, body in answers] == [
        "this key may not manage schedules.",
        "this key may not manage job types.",
    ]
