"""A server started on a database whose schema is behind (PostgreSQL is never upgraded by the app) says
what to run: one warning at start naming a command that works from a checkout and from a wheel, then a
503 for every request (problem+json for the API and /healthz, a page for the rest) until `db upgrade` has
run, after which it serves without a restart. `db upgrade` itself prints no such warning. SQLite upgrades
itself at start unless told not to."""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, text

from queuelog import create_app
from queuelog.factory import SchemaWatch
from tests.conftest import ADMIN_PASSWORD, PG_HOWTO, PG_URL, ROOT, _pg_schema_url

COMMAND = "flask --app queuelog:create_app db upgrade"
WARNING = "the database schema is not up to date"


@pytest.fixture
def empty_pg_schema():
    """A PostgreSQL schema of this test's own, with no tables at all; dropped afterwards."""
    if not PG_URL:
        pytest.skip(f"PostgreSQL tests: {PG_HOWTO}")
    schema = f"queuelog_empty_{os.getpid()}_{secrets.token_hex(3)}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    yield _pg_schema_url(PG_URL, schema)
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def start(url: str, caplog, **settings):
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        app = create_app(
            {
                "TESTING": True,
                "QUEUELOG": {
                    "DATABASE_URL": url,
                    "ADMIN_PASSWORD": ADMIN_PASSWORD,
                    "SECRET_KEY": "k",
                    **settings,
                },
            }
        )
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return app, warnings


def assert_behind(app) -> None:
    client = app.test_client()
    for path, headers in (
        ("/healthz", {}),
        ("/jobs", {"Authorization": "Bearer nope"}),
        ("/openapi.json", {}),
        ("/schedules/x/y", {"Accept": "text/html"}),
        ("/", {"Accept": "application/json"}),
    ):
        answer = client.get(path, headers=headers)
        assert answer.status_code == 503, (path, answer.status_code)
        assert answer.mimetype == "application/problem+json", path
        assert answer.json["detail"] == f"{WARNING}: run `{COMMAND}`", path
    for path in ("/", "/login", "/admin/schedules", "/no-such-page"):
        page = client.get(path, headers={"Accept": "text/html"})
        assert page.status_code == 503 and page.mimetype == "text/html", (path, page.status_code)
        assert COMMAND in page.get_data(as_text=True), path
    with client.get("/static/style.css") as static:
        assert static.status_code == 200


def wait_until_serving(app) -> None:
    client = app.test_client()
    deadline = time.monotonic() + SchemaWatch.RECHECK_SECONDS * 3 + 2
    while client.get("/healthz").status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.get("/healthz").json == {"status": "ok"}
    assert client.get("/login").status_code == 200


def upgrade_in_a_new_process(url: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "QUEUELOG_DATABASE_URL": url,
        "QUEUELOG_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "QUEUELOG_SECRET_KEY": "k",
    }
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "queuelog:create_app", "db", "upgrade"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_an_empty_postgresql_schema_answers_503_until_upgraded(empty_pg_schema, caplog):
    app, warnings = start(empty_pg_schema, caplog)
    assert [w for w in warnings if WARNING in w] == [
        f"{WARNING}: run `{COMMAND}`; until then every request answers 503"
    ]
    assert not any("--app app " in w for w in warnings)
    assert_behind(app)
    run = upgrade_in_a_new_process(empty_pg_schema)  # the command the warning names, as a wheel has it
    assert run.returncode == 0, run.stderr[-2000:]
    assert WARNING not in run.stderr + run.stdout
    wait_until_serving(app)
    # the upgrade seeded the new database: the first admin can log in
    page = app.test_client().post("/login", data={"username": "admin", "password": ADMIN_PASSWORD})
    assert page.status_code in (302, 400)  # 400: the test client sent no CSRF token; not a 503 or 500
    app.extensions["queuelog"]["db"].dispose()


def test_a_current_postgresql_schema_starts_without_the_warning(empty_pg_schema, caplog):
    assert upgrade_in_a_new_process(empty_pg_schema).returncode == 0
    app, warnings = start(empty_pg_schema, caplog)
    assert not [w for w in warnings if WARNING in w]
    assert app.test_client().get("/healthz").status_code == 200
    app.extensions["queuelog"]["db"].dispose()


def test_sqlite_upgrades_itself_on_first_use(tmp_path, caplog):
    app, warnings = start(f"sqlite:///{tmp_path / 'new.sqlite3'}", caplog)
    assert not [w for w in warnings if WARNING in w]
    assert app.test_client().get("/healthz").json == {"status": "ok"}
    app.extensions["queuelog"]["db"].dispose()


def test_sqlite_told_not_to_upgrade_answers_503_until_upgraded(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 'new.sqlite3'}"
    app, warnings = start(url, caplog, AUTO_UPGRADE=False)
    assert [w for w in warnings if WARNING in w]
    assert_behind(app)
    result = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output
    wait_until_serving(app)
    app.extensions["queuelog"]["db"].dispose()
