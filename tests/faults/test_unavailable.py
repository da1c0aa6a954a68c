"""Every failure to reach the database is a 503 with Retry-After, never a 500 (docs/operations.md#outages):
a PostgreSQL that refuses connections, one that stalls or drops them behind a TCP proxy, a SQLite database
that is full (and then nothing is half written)."""

from __future__ import annotations

import secrets
import time
from urllib.parse import urlsplit, urlunsplit

import pytest

from queuelog import create_app
from queuelog.access.auth import new_key
from queuelog.db import Database, DatabaseUnavailable
from tests.conftest import ADMIN_PASSWORD, PG_URL, Keys, free_port
from tests.faults.tcpproxy import TcpProxy

JOB = {"type": "email", "payload": {"to": "someone@example.com"}}


def _app(url: str, **settings):
    config = {"DATABASE_URL": url, "SECRET_KEY": "x", "ADMIN_PASSWORD": ADMIN_PASSWORD, "SCHEDULE_TICK": 0}
    return create_app({"TESTING": True, "WTF_CSRF_ENABLED": False, "QUEUELOG": {**config, **settings}})


def assert_unavailable(response, *, api: bool = True) -> None:
    assert response.status_code == 503, response.get_data(as_text=True)[:500]
    assert response.headers["Retry-After"] == "1"
    if api:
        assert response.content_type == "application/problem+json"
        assert response.json["status"] == 503
        assert response.json["type"].endswith("unavailable")
    else:
        assert response.content_type.startswith("text/html")
        assert "cannot be reached" in response.get_data(as_text=True)


def test_a_postgresql_that_refuses_connections_is_a_503_on_every_face():
    """Nothing listens on the port: the pool's checkout fails (psycopg's own error, outside any statement)."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    app = _app(url)  # serves anyway: the database may come up later
    client = app.test_client()
    try:
        key = {"Authorization": f"Bearer {new_key()}"}
        assert_unavailable(client.post("/jobs", json=JOB, headers=key))
        assert_unavailable(client.post("/jobs/claim", json={}, headers=key))
        assert_unavailable(client.get("/jobs/1", headers={**key, "Accept": "application/json"}))
        page = client.post("/login", data={"username": "admin", "password": ADMIN_PASSWORD})
        assert_unavailable(page, api=False)
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.headers["Retry-After"] == "1"
        assert health.json == {"status": "unavailable", "detail": "the database is unreachable"}
    finally:
        app.extensions["queuelog"]["db"].dispose()


def test_a_full_sqlite_database_is_a_503_that_says_so_and_writes_nothing(sqlite_backend, tmp_path):
    app = _app(sqlite_backend.fresh_url(tmp_path))
    db = app.extensions["queuelog"]["db"]
    client = app.test_client()
    try:
        producer = Keys(app, client).producer("alice")
        assert producer.post("/jobs", json=JOB).status_code == 201
        with db.cursor(write=True) as cur:  # the writer's connection may not grow the file any more
            pages = cur.execute("PRAGMA page_count").fetchone()[0]
            cur.execute(f"PRAGMA max_page_count = {pages}")
        before = producer.get("/jobs?limit=100").json["jobs"]
        big = [{"type": "email", "payload": {"blob": "x" * 30000}} for _ in range(20)]
        answer = producer.post("/jobs/batch", json={"jobs": big})
        assert_unavailable(answer)
        assert "full" in answer.json["detail"] and "nothing was written" in answer.json["detail"]
        assert producer.get("/jobs?limit=100").json["jobs"] == before  # all or nothing: nothing
        with db.cursor(write=True) as cur:
            cur.execute("PRAGMA max_page_count = 1073741823")
        assert producer.post("/jobs/batch", json={"jobs": big[:2]}).status_code == 201  # and it heals
    finally:
        db.dispose()


@pytest.fixture
def proxied(postgresql_backend, tmp_path):
    """An app whose PostgreSQL is reached through a TCP proxy, with short timeouts."""
    url = postgresql_backend.fresh_url(tmp_path)
    upstream = urlsplit(PG_URL)
    proxy = TcpProxy((upstream.hostname or "127.0.0.1", upstream.port or 5432))
    parts = urlsplit(url)
    netloc = parts.netloc.replace(f"{upstream.hostname}:{upstream.port}", f"127.0.0.1:{proxy.port}")
    app = _app(urlunsplit(parts._replace(netloc=netloc)), DB_CONNECT_TIMEOUT=2, DB_STATEMENT_TIMEOUT=1)
    yield app, proxy
    proxy.close()
    app.extensions["queuelog"]["db"].dispose()


@pytest.mark.slow
def test_a_stalled_or_dropped_postgresql_is_a_503_within_the_bound_and_then_serves_again(proxied):
    app, proxy = proxied
    client = app.test_client()
    producer = Keys(app, client).producer("alice")
    worker = Keys(app, client).worker("w")
    assert producer.post("/jobs", json=JOB).status_code == 201
    codes: list[int] = []

    # Stalled: the pooled connections and every new one get no answer. A statement's wait ends a second
    # after QUEUELOG_DB_STATEMENT_TIMEOUT (1 s), a new connection's after QUEUELOG_DB_CONNECT_TIMEOUT (2 s).
    proxy.stall()
    for call in (lambda: producer.post("/jobs", json=JOB), lambda: worker.post("/jobs/claim", json={})):
        started = time.monotonic()
        answer = call()
        took = time.monotonic() - started
        assert_unavailable(answer)
        assert took < 2 + 2 + 1, took  # each bound, with room for a busy machine
        codes.append(answer.status_code)
    started = time.monotonic()
    health = client.get("/healthz")
    assert health.status_code == 503 and time.monotonic() - started < 5
    proxy.resume()
    answers = [producer.post("/jobs", json=JOB).status_code for _ in range(5)]
    assert answers[-1] == 201 and set(answers) <= {201, 503}
    codes += answers

    # Dropped: every connection closed under the app; each failed request is a 503, then it serves.
    proxy.drop()
    answers = [producer.post("/jobs", json=JOB).status_code for _ in range(12)]
    assert set(answers) <= {201, 503}
    assert answers[-3:] == [201, 201, 201]
    codes += answers
    assert 500 not in codes


def test_the_timeouts_and_prepared_statements_reach_each_postgresql_connection(postgresql_backend, tmp_path):
    url = postgresql_backend.fresh_url(tmp_path)
    for prepared, threshold in ((False, None), (True, 5)):
        app = _app(url, DB_STATEMENT_TIMEOUT=1.5, DB_CONNECT_TIMEOUT=3, DB_PREPARED_STATEMENTS=prepared)
        db = app.extensions["queuelog"]["db"]
        try:
            with db.cursor() as cur:
                assert cur.execute("SHOW statement_timeout").fetchone()[0] == "1500ms"
                conn = cur.connection
                assert conn.prepare_threshold == threshold
                assert conn.wait_bound == 2.5  # a second beyond the server's own bound
                assert conn.info.get_parameters()["connect_timeout"] == "3"
        finally:
            db.dispose()


def test_a_pool_with_no_connection_free_in_time_is_a_503_then_serves_again(postgresql_backend, tmp_path):
    """Every pooled connection busy past QUEUELOG_DB_CONNECT_TIMEOUT: a 503 within that bound (on SQLite
    requests take no pooled connection: its reads and writes have connections of their own)."""
    app = _app(
        postgresql_backend.fresh_url(tmp_path), DB_POOL_SIZE=1, DB_MAX_OVERFLOW=0, DB_CONNECT_TIMEOUT=0.5
    )
    db = app.extensions["queuelog"]["db"]
    client = app.test_client()
    try:
        producer = Keys(app, client).producer("alice")
        worker = Keys(app, client).worker("w")
        assert producer.post("/jobs", json=JOB).status_code == 201
        held = db.engine.raw_connection()  # the pool's one connection, taken by something else
        try:
            for call in (
                lambda: producer.post("/jobs", json=JOB),
                lambda: worker.post("/jobs/claim", json={}),
            ):
                started = time.monotonic()
                answer = call()
                assert_unavailable(answer)
                assert time.monotonic() - started < 0.5 + 1.5  # the bound, with room for a busy machine
        finally:
            held.close()  # back to the pool
        assert producer.post("/jobs", json=JOB).status_code == 201
        claimed = worker.post("/jobs/claim", json={})
        assert claimed.status_code == 200 and claimed.json["id"] == 1
    finally:
        db.dispose()


def test_a_statement_past_the_timeout_is_a_503_on_postgresql(postgresql_backend, tmp_path):
    app = _app(postgresql_backend.fresh_url(tmp_path), DB_STATEMENT_TIMEOUT=0.2)
    db = app.extensions["queuelog"]["db"]
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as caught, db.cursor() as cur:
            cur.execute("SELECT pg_sleep(5)")
        assert caught.value.reason == "timeout" and time.monotonic() - started < 2
        with db.cursor() as cur:  # and the connection serves again
            assert cur.execute("SELECT 1").fetchone()[0] == 1
    finally:
        db.dispose()


def test_sqlite_waits_for_its_lock_no_longer_than_a_statement_may_last(sqlite_backend, tmp_path):
    app = _app(sqlite_backend.fresh_url(tmp_path), DB_STATEMENT_TIMEOUT=0.5, SQLITE_BUSY_TIMEOUT_MS=30000)
    db = app.extensions["queuelog"]["db"]
    try:
        with db.cursor() as cur:
            assert cur.execute("PRAGMA busy_timeout").fetchone()[0] == 500
    finally:
        db.dispose()


@pytest.mark.slow  # a whole migration run: seconds
def test_migrations_are_not_cut_off_by_the_statement_timeout(postgresql_backend):
    """`db upgrade` may build an index on a large table for longer than any request should take."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import create_engine, text

    from tests.conftest import _pg_schema_url

    schema = f"queuelog_upgrade_{secrets.token_hex(3)}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    db = Database(_pg_schema_url(PG_URL, schema), statement_timeout=0.001)
    try:
        db.upgrade()
        heads = ScriptDirectory.from_config(db.alembic_config()).get_heads()
        with admin.connect() as conn:
            assert [
                conn.execute(text(f'SELECT version_num FROM "{schema}".alembic_version')).scalar()
            ] == heads
        with pytest.raises(DatabaseUnavailable), db.cursor() as cur:  # a request's statement is cut off
            cur.execute("SELECT pg_sleep(0.05)")
    finally:
        db.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
