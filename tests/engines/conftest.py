"""Fixtures for the engine conformance suite: a Database and its engine, with no app around them.

SQLite runs on a file copied from a migrated template; PostgreSQL in a schema of its own for the session
(dropped at the end), its tables emptied before each test. Without ``QUEUELOG_TEST_POSTGRES_URL`` the
PostgreSQL half is skipped and says why.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from queuelog.db import Database
from queuelog.engines import NewJob, engine_for
from queuelog.models import Base, JobType
from tests.conftest import PG_PREPARED, PG_SCHEMA, PG_URL

TABLES = ", ".join(table.name for table in Base.metadata.sorted_tables)
NOW = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    path = tmp_path_factory.mktemp("engines") / "template.sqlite3"
    db = Database(f"sqlite:///{path}")
    db.upgrade()
    db.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_url():
    if not PG_URL:
        pytest.skip(
            "PostgreSQL engine tests need QUEUELOG_TEST_POSTGRES_URL"
            " (e.g. postgresql+psycopg://postgres@127.0.0.1/test)"
        )
    if PG_SCHEMA:  # through PgBouncer (tests/test_pgbouncer.py): a schema on the pooler's search path
        db = Database(PG_URL, prepared_statements=PG_PREPARED)
        db.upgrade()
        db.dispose()
        yield PG_URL
        return
    schema = f"queuelog_engines_{os.getpid()}_{secrets.token_hex(3)}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    url = f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    db = Database(url)
    db.upgrade()
    db.dispose()
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture
def pg(postgres_url):
    """A migrated, empty PostgreSQL database, for the tests of what only PostgreSQL does."""
    database = Database(postgres_url, prepared_statements=PG_PREPARED)
    with database.cursor(write=True) as cur:
        cur.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    yield database
    database.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    """A migrated, empty database of each kind."""
    if request.param == "sqlite":
        path = tmp_path / "queuelog.sqlite3"
        shutil.copy(request.getfixturevalue("sqlite_template"), path)
        database = Database(f"sqlite:///{path}")
    else:
        database = Database(request.getfixturevalue("postgres_url"), prepared_statements=PG_PREPARED)
        with database.cursor(write=True) as cur:
            cur.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    yield database
    database.dispose()


@pytest.fixture
def engine(db):
    return engine_for(db)


def new(
    type: str = "email",
    *,
    payload: dict | None = None,
    priority: int = 0,
    max_retries: int = 3,
    key: str | None = None,
    at: datetime = NOW,
) -> NewJob:
    """A job to insert; the fingerprint of a keyed job is its payload, so that a changed payload conflicts."""
    payload_json = json.dumps(payload or {})
    return NewJob(type, payload_json, priority, max_retries, key, payload_json if key else None, at)


def set_type(
    db: Database,
    name: str,
    *,
    paused: bool = False,
    schema: dict | None = None,
    concurrency: int | None = None,
    rate: int | None = None,
    period: int | None = None,
) -> None:
    """Add or change a job type through the ORM (the admin's path); its limits set, with a full bucket."""
    with db.session(write=True) as session, session.begin():
        job_type = session.query(JobType).filter_by(name=name).one_or_none()
        if job_type is None:
            job_type = JobType(name=name, description="")
            session.add(job_type)
        job_type.paused = paused
        job_type.payload_schema = schema
        job_type.concurrency_limit = concurrency
        job_type.rate_limit = rate
        job_type.rate_period = period
        job_type.rate_tokens = None
        job_type.rate_checked_at = None


def count_jobs(db: Database) -> dict[tuple[str, str, int], int]:
    """The truth the counters must equal: jobs per status, type and priority, counted in the jobs table."""
    with db.cursor() as cur:
        cur.execute("SELECT status, type, priority, count(*) FROM jobs GROUP BY status, type, priority")
        return {(status, job_type, priority): int(n) for status, job_type, priority, n in cur.fetchall()}


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


# -- PostgreSQL sessions of a test's own ------------------------------------------------------------------


def connect(db: Database) -> psycopg.Connection:
    """A psycopg connection of its own to ``db`` (its schema on the search path), autocommitted."""
    url = make_url(db.url).set(drivername="postgresql")
    return psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)


def explaining(conn: psycopg.Connection, *settings: str) -> list[str]:
    """Make ``conn`` report the plan of each statement it runs, as auto_explain logs it (rows counted,
    no timing), after ``settings``; returns the list the plans are added to. Skips the test when the role
    may not load auto_explain (a superuser may)."""
    try:
        conn.execute("LOAD 'auto_explain'")
    except psycopg.errors.InsufficientPrivilege:
        pytest.skip("LOAD 'auto_explain' needs a superuser: the plans cannot be read")
    for setting in (
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_analyze = on",
        "auto_explain.log_timing = off",
        "client_min_messages = log",
        *settings,
    ):
        conn.execute(f"SET {setting}")
    plans: list[str] = []
    conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
    return plans
