"""Alembic builds the schema on both engines, and the models match what it builds."""

from __future__ import annotations

import warnings

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from queuelog.db import Database
from queuelog.models import Base


def test_upgrade_from_empty_to_head_on_sqlite(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    assert not db.is_current()
    db.upgrade()
    assert db.is_current()
    tables = set(inspect(db.engine).get_table_names())
    assert tables >= {"users", "api_keys", "job_types", "jobs", "job_events", "audit_log", "alembic_version"}
    db.dispose()


def test_models_match_the_migrated_schema(app, backend):
    """Autogenerate finds no difference between the models and the migrated database (either engine)."""
    db = app.extensions["queuelog"]["db"]
    with db.engine.connect() as conn, warnings.catch_warnings():
        # SQLite cannot reflect the expression index (priority DESC); Alembic says so and skips it.
        warnings.filterwarnings("ignore", message=".*expression-based index.*")
        opts = {"compare_type": True}
        if backend.name == "sqlite":
            # ...and reflects it as a plain column index, so it is checked by the test below instead.
            opts["include_object"] = lambda obj, name, kind, reflected, other: name != "ix_jobs_claim"
        diff = compare_metadata(MigrationContext.configure(conn, opts=opts), Base.metadata)
    assert diff == []


def test_claim_index_is_partial_and_in_claim_order(app, backend):
    db = app.extensions["queuelog"]["db"]
    with db.engine.connect() as conn:
        if backend.name == "sqlite":
            sql = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'ix_jobs_claim'").scalar()
        else:
            sql = conn.exec_driver_sql(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_jobs_claim'"
            ).scalar()
    assert "priority DESC" in sql and "available_at" in sql
    assert "status" in sql.split("WHERE")[1] and "pending" in sql
