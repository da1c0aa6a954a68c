"""Alembic builds the schema on both engines, and the models match what it builds."""

from __future__ import annotations

import os
import secrets
import warnings

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from queuelog.db import Database
from queuelog.engines import NewJob, engine_for
from queuelog.models import Base, utcnow
from tests.conftest import PG_URL, _pg_schema_url

CLAIM_INDEXES = ("ix_jobs_claim", "ix_jobs_claim_by_type")  # in claim order, over pending jobs


def test_upgrade_from_empty_to_head_on_sqlite(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    assert not db.is_current()
    db.upgrade()
    assert db.is_current()
    tables = set(inspect(db.engine).get_table_names())
    assert tables >= {"users", "api_keys", "job_types", "jobs", "job_events", "audit_log", "alembic_version"}
    db.dispose()


def test_a_database_at_a_revision_this_code_lacks_is_refused_in_one_line(tmp_path):
    """A database a newer queuelog migrated: SQLite's upgrade at start-up, and ``upgrade`` itself, say so
    in one line instead of a traceback, and change nothing."""
    from queuelog import create_app
    from queuelog.db import RevisionRefused

    url = f"sqlite:///{tmp_path / 'newer.db'}"
    db = Database(url)
    db.upgrade()
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    line = (
        "the database is at revision 0099, which this queuelog does not have (a newer queuelog's migration?)"
    )
    with pytest.raises(RevisionRefused, match=r"^the database is at revision 0099, which"):
        db.upgrade()
    with pytest.raises(RevisionRefused, match=r"^Can't locate revision identified by 'bogus'$"):
        db.upgrade("bogus")
    db.dispose()
    with pytest.raises(SystemExit) as caught:
        create_app({"TESTING": True, "QUEUELOG": {"DATABASE_URL": url, "SECRET_KEY": "k"}})
    assert str(caught.value) == f"queuelog: {line}"
    with create_engine(url).connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == "0099"


def test_models_match_the_migrated_schema(app, backend):
    """Autogenerate finds no difference between the models and the migrated database (either engine)."""
    db = app.extensions["queuelog"]["db"]
    with db.engine.connect() as conn, warnings.catch_warnings():
        # SQLite cannot reflect the expression index (priority DESC); Alembic says so and skips it.
        warnings.filterwarnings("ignore", message=".*expression-based index.*")
        opts = {"compare_type": True}
        if backend.name == "sqlite":
            # ...and reflects them as plain column indexes, so they are checked by the test below instead.
            opts["include_object"] = lambda obj, name, kind, reflected, other: name not in CLAIM_INDEXES
        diff = compare_metadata(MigrationContext.configure(conn, opts=opts), Base.metadata)
    assert diff == []


@pytest.mark.parametrize("name", CLAIM_INDEXES)
def test_claim_indexes_are_partial_and_in_claim_order(app, backend, name):
    db = app.extensions["queuelog"]["db"]
    with db.engine.connect() as conn:
        if backend.name == "sqlite":
            sql = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).scalar()
        else:
            sql = conn.exec_driver_sql(
                "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (name,)
            ).scalar()
    columns = sql.split("(", 1)[1].split(")")[0]
    assert (
        columns.replace('"', "").replace(" ", "")
        == {
            "ix_jobs_claim": "priorityDESC,available_at,id",
            "ix_jobs_claim_by_type": "type,priorityDESC,available_at,id",
        }[name]
    )
    assert "status" in sql.split("WHERE")[1] and "pending" in sql


@pytest.fixture
def empty_database(backend, tmp_path):
    """An empty database on the engine under test (a new file, or a new PostgreSQL schema)."""
    if backend.name == "sqlite":
        db = Database(f"sqlite:///{tmp_path / 'empty.sqlite3'}")
        yield db
        db.dispose()
        return
    schema = f"queuelog_mig_{os.getpid()}_{secrets.token_hex(3)}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    db = Database(_pg_schema_url(PG_URL, schema))
    try:
        yield db
    finally:
        db.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_0004_keeps_users_and_keys_and_frees_revoked_key_names(empty_database):
    db = empty_database
    db.upgrade("0003")
    now = "2026-01-02 03:04:05+00:00"
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO users (id, username, password_hash, role, active, created_at)"
                " VALUES (1, 'ada', 'x', 'admin', true, :now)"
            ),
            {"now": now},
        )
        conn.execute(
            text(
                "INSERT INTO api_keys (name, kind, key_hash, prefix, created_at, revoked_at)"
                " VALUES ('w-1', 'worker', 'h1', 'ql_a', :now, :now)"
            ),
            {"now": now},
        )
    db.upgrade()
    insert_key = text(
        "INSERT INTO api_keys (name, kind, key_hash, prefix, created_at)"
        " VALUES ('w-1', 'worker', :digest, 'ql_b', :now)"
    )
    with db.engine.begin() as conn:
        assert conn.execute(text("SELECT session_version FROM users WHERE id = 1")).scalar() == 0
        conn.execute(insert_key, {"digest": "h2", "now": now})  # the revoked key's name, again
    with pytest.raises(IntegrityError), db.engine.begin() as conn:
        conn.execute(insert_key, {"digest": "h3", "now": now})  # but not twice while unrevoked
    with db.engine.begin() as conn:
        conn.execute(text("DELETE FROM api_keys WHERE key_hash = 'h2'"))
    command.downgrade(db.alembic_config(), "0003")  # and back
    with db.engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("users")}
    assert "session_version" not in columns


def test_0005_keeps_every_history_row_and_the_partial_finished_index(empty_database, backend):
    db = empty_database
    db.upgrade("0004")
    # Times as each engine stores them (SQLite: SQLAlchemy's text format, in UTC).
    now = "2026-01-02 03:04:05.000000" if backend.name == "sqlite" else "2026-01-02 03:04:05+00:00"
    with db.engine.begin() as conn:
        for job_id, status, finished in ((1, "completed", now), (2, "pending", None)):
            assert (
                job_id
                == conn.execute(
                    text(
                        "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner,"
                        " available_at, created_at, updated_at, finished_at)"
                        " VALUES ('email', '{}', 0, :status, 0, 3, 'ada', :now, :now, :now, :finished)"
                        " RETURNING id"
                    ),
                    {"status": status, "now": now, "finished": finished},
                ).scalar()
            )
        for event_id, job_id, event, error in (
            (1, 1, "enqueued", None),
            (2, 2, "enqueued", None),
            (3, 1, "retry_scheduled", "boom"),
            (4, 1, "completed", None),
        ):
            assert (
                event_id
                == conn.execute(
                    text(
                        "INSERT INTO job_events (job_id, at, event, actor, attempt, error)"
                        " VALUES (:job_id, :now, :event, 'ada', 0, :error) RETURNING id"
                    ),
                    {"job_id": job_id, "now": now, "event": event, "error": error},
                ).scalar()
            )
    db.upgrade()
    engine = engine_for(db)
    assert [(e.id, e.event, e.error) for e in engine.events(1)] == [
        (1, "enqueued", None),
        (3, "retry_scheduled", "boom"),
        (4, "completed", None),
    ]
    assert [row.job_id for row in engine.failures(limit=10)] == [1]
    with db.engine.connect() as conn:
        assert inspect(conn).get_foreign_keys("job_events") == []
        indexes = {ix["name"] for ix in inspect(conn).get_indexes("jobs")}
    assert "ix_jobs_finished" in indexes and "ix_jobs_status_finished_at" not in indexes
    [(new, _)] = engine.insert("ada", [NewJob("email", "{}", 0, 3, None, None, utcnow())], utcnow())
    assert new.id == 3 and [e.event for e in engine.events(new.id)] == ["enqueued"]
    # Pruning the old completed job takes its history along, without a cascade.
    assert engine.prune(finished_before=utcnow(), batch=10, throughput_before=utcnow()) == 1
    assert engine.events(1) == [] and [e.id for e in engine.events(2)] == [2]
    command.downgrade(db.alembic_config(), "0004")  # and back: the foreign key cascades again
    with db.engine.connect() as conn:
        assert [fk["referred_table"] for fk in inspect(conn).get_foreign_keys("job_events")] == ["jobs"]
    with db.engine.begin() as conn:
        if backend.name == "sqlite":
            conn.exec_driver_sql("PRAGMA foreign_keys = ON")
        conn.execute(text("DELETE FROM jobs WHERE id = 2"))
        assert conn.execute(text("SELECT count(*) FROM job_events WHERE job_id = 2")).scalar() == 0


def test_0006_adds_schedules_and_goes_back(empty_database):
    db = empty_database
    db.upgrade("0006")
    with db.engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
    assert {"schedules", "schedule_fires"} <= tables
    command.downgrade(db.alembic_config(), "0005")
    with db.engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
    assert not {"schedules", "schedule_fires"} & tables
    db.upgrade()
    assert db.is_current()


def _trigger_of_jobs(conn, name: str) -> str:
    return conn.execute(
        text(
            "SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " WHERE c.relname = 'jobs' AND c.relnamespace = current_schema()::regnamespace AND t.tgname = :name"
        ),
        {"name": name},
    ).scalar_one()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)  # on SQLite 0014 changes nothing
def test_0014_goes_back_to_0013s_triggers_and_counts_right_both_ways(empty_database):
    """Inserts notify per statement at 0014 and per row at 0013; the counters' function pairs rows by id
    at 0014 and by a join at 0013; the counts stay exact both ways."""
    db = empty_database
    db.upgrade()

    def insert_and_finish(conn, status: str) -> None:
        conn.execute(
            text(
                "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner,"
                " available_at, created_at, updated_at)"
                " SELECT 'email', '{}', 0, 'pending', 0, 3, 'ada', now(), now(), now() FROM generate_series(1, 3)"
            )
        )
        conn.execute(
            text("UPDATE jobs SET status = :status, finished_at = now() WHERE status = 'pending'"),
            {"status": status},
        )

    def counts(conn) -> dict[str, int]:
        rows = conn.execute(text("SELECT status, sum(n) FROM job_counts GROUP BY status HAVING sum(n) <> 0"))
        return {status: int(n) for status, n in rows}

    with db.engine.begin() as conn:
        assert "FOR EACH STATEMENT" in _trigger_of_jobs(conn, "jobs_ready_insert")
        insert_and_finish(conn, "completed")
        assert counts(conn) == {"completed": 3}
    command.downgrade(db.alembic_config(), "0013")
    with db.engine.begin() as conn:
        assert "FOR EACH ROW" in _trigger_of_jobs(conn, "jobs_ready_insert")
        assert (
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_proc WHERE proname = 'queuelog_jobs_inserted'"
                    " AND pronamespace = current_schema()::regnamespace"
                )
            ).scalar()
            == 0
        )
        insert_and_finish(conn, "failed")
        assert counts(conn) == {"completed": 3, "failed": 3}
    db.upgrade()
    assert db.is_current()


def test_0015_marks_the_running_jobs_of_limited_types_and_goes_back(empty_database, backend):
    """Jobs running when 0015 runs were claimed without the mark: it marks those of types with a
    concurrency limit (on PostgreSQL, whose wake-up trigger reads it; SQLite only gains the column). Its
    downgrade drops the column and, on PostgreSQL, gives 0012's trigger condition back."""
    db = empty_database
    db.upgrade("0014")
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO job_types (name, description, enabled, paused, concurrency_limit, created_at, updated_at)"
                " VALUES ('render', '', :yes, :no, 2, :now, :now), ('email', '', :yes, :no, NULL, :now, :now)"
            ),
            {"yes": True, "no": False, "now": utcnow()},
        )
        for job_type, status in (("render", "running"), ("email", "running"), ("render", "pending")):
            conn.execute(
                text(
                    "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, owner,"
                    " available_at, created_at, updated_at)"
                    " VALUES (:type, '{}', 0, :status, 0, 3, 'ada', :now, :now, :now)"
                ),
                {"type": job_type, "status": status, "now": utcnow()},
            )
    db.upgrade()
    with db.engine.begin() as conn:
        rows = conn.execute(text("SELECT type, status, holds_slot FROM jobs ORDER BY id")).all()
        assert [(job_type, status, bool(held)) for job_type, status, held in rows] == [
            ("render", "running", backend.name == "postgresql"),
            ("email", "running", False),
            ("render", "pending", False),
        ]
        if backend.name == "postgresql":
            assert "old.holds_slot" in _trigger_of_jobs(conn, "jobs_ready_update")
    command.downgrade(db.alembic_config(), "0014")
    with db.engine.begin() as conn:
        assert "holds_slot" not in {column["name"] for column in inspect(conn).get_columns("jobs")}
        if backend.name == "postgresql":
            assert "holds_slot" not in _trigger_of_jobs(conn, "jobs_ready_update")
            assert _functions_named(conn, "queuelog_limit_set") == 0
    db.upgrade()
    assert db.is_current()
    if backend.name == "postgresql":
        with db.engine.begin() as conn:
            assert _functions_named(conn, "queuelog_limit_set") == 1


def _functions_named(conn, name: str) -> int:
    return conn.execute(
        text(
            "SELECT count(*) FROM pg_proc WHERE proname = :name AND pronamespace = current_schema()::regnamespace"
        ),
        {"name": name},
    ).scalar_one()
