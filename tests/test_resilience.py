"""The app recovers by itself when PostgreSQL drops its connections (a restart, a failover)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from queuelog import create_app
from tests.conftest import ADMIN_PASSWORD, PG_URL, Caller, Keys


def test_connections_killed_by_the_server_are_replaced(backend, database_url):
    if backend.name != "postgresql":
        pytest.skip("PostgreSQL-only: SQLite has no server to drop connections")
    url = (
        f"{database_url}&application_name=queuelog_resilience"  # so that only this app's sessions are killed
    )
    # Not a test app (its pool is the real one), but without the maintenance thread, which would outlive
    # the test in this process and hold the cluster's maintenance lock (docs/schedules.md).
    settings = {"DATABASE_URL": url, "SECRET_KEY": "x", "ADMIN_PASSWORD": ADMIN_PASSWORD, "SCHEDULE_TICK": 0}
    app = create_app({"QUEUELOG": settings})
    keys = Keys(app, app.test_client())
    producer: Caller = keys.producer("alice")
    try:
        for _ in range(3):  # a few pooled connections
            assert producer.post("/jobs", json={"type": "email"}).status_code == 201
        admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            killed = conn.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = 'queuelog_resilience'"
                )
            ).scalar()
        admin.dispose()
        assert killed >= 1
        answers = [producer.post("/jobs", json={"type": "email"}).status_code for _ in range(12)]
        # A request on a dead connection may fail once per pooled connection (503, never 500); then the
        # pool has replaced them and everything succeeds.
        assert set(answers) <= {201, 503}
        assert answers[-3:] == [201, 201, 201]
        assert all(code == 201 for code in answers[answers.index(201) :])
    finally:
        app.extensions["queuelog"]["db"].dispose()
