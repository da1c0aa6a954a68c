"""Migration 0007 (docs/running-jobs.md): the running jobs' columns are added to existing jobs, and taken
away again, without touching the triggers that count jobs (migration 0003), on either engine."""

from __future__ import annotations

from alembic import command
from sqlalchemy import inspect, text

from tests.test_migrations import empty_database  # noqa: F401 - the fixture

NEW = {
    "cancel_requested_at",
    "cancel_requested_by",
    "progress_percent",
    "progress_note",
    "progress_at",
    "snooze_count",
}
NOW = "2026-01-02 03:04:05+00:00"
INSERT = text(
    "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner, available_at,"
    " created_at, updated_at) VALUES ('email', '{}', 0, :status, 0, 3, 'ada', :now, :now, :now)"
)


def columns(db) -> set[str]:
    with db.engine.connect() as conn:
        return {c["name"] for c in inspect(conn).get_columns("jobs")}


def counted(db) -> dict[str, int]:
    with db.engine.connect() as conn:
        rows = conn.execute(text("SELECT status, sum(n) FROM job_counts GROUP BY status")).fetchall()
    return {status: int(n) for status, n in rows if n}


def test_0007_adds_and_removes_the_columns_and_keeps_the_counts(empty_database):  # noqa: F811
    db = empty_database
    db.upgrade("0006")
    with db.engine.begin() as conn:
        conn.execute(INSERT, {"status": "running", "now": NOW})
    db.upgrade("0007")
    assert NEW <= columns(db)
    with db.engine.begin() as conn:
        row = conn.execute(text("SELECT snooze_count, progress_percent, cancel_requested_at FROM jobs")).one()
        assert tuple(row) == (0, None, None)
        conn.execute(INSERT, {"status": "pending", "now": NOW})
        conn.execute(text("UPDATE jobs SET status = 'cancelled' WHERE status = 'running'"))
    assert counted(db) == {"pending": 1, "cancelled": 1}
    command.downgrade(db.alembic_config(), "0006")
    assert not NEW & columns(db)
    with db.engine.begin() as conn:  # the counting triggers are still there
        conn.execute(INSERT, {"status": "pending", "now": NOW})
    assert counted(db) == {"pending": 2, "cancelled": 1}
