"""Fresh databases for the benchmarks: a new SQLite file, or a new schema on a PostgreSQL server."""

from __future__ import annotations

import os
import secrets
import sqlite3
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from queuelog.db import Database, driver_sql
from queuelog.engines.sqlite import sql as sqlite_sql
from queuelog.queue import Queue


def progress(label: str, done: int, total: int) -> None:
    """A progress bar on stderr when it is a terminal."""
    if sys.stderr.isatty():
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\r{label:<34} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


class Target:
    """Where a benchmark runs. ``fresh(name)`` gives a migrated, empty database with the type ``bench``."""

    engine = "sqlite"

    def __init__(self, folder: Path, postgres_url: str | None = None):
        self.folder = folder
        self.postgres_url = postgres_url
        self.schemas: list[str] = []
        self.sql = sqlite_sql  # the engine's statements and binding, for the raw driver loops
        if postgres_url:
            from queuelog.engines.postgres import sql as postgres_sql

            self.engine = "postgresql"
            self.sql = postgres_sql

    def empty(self, name: str) -> str:
        """A new, empty database: a SQLite file not yet made, or a new schema (dropped by ``cleanup``)."""
        if self.engine == "sqlite":
            return f"sqlite:///{self.folder / (name + '.sqlite3')}"
        schema = f"queuelog_bench_{os.getpid()}_{secrets.token_hex(3)}"
        with create_engine(self.postgres_url, isolation_level="AUTOCOMMIT").connect() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        self.schemas.append(schema)
        sep = "&" if "?" in self.postgres_url else "?"
        return f"{self.postgres_url}{sep}options={quote(f'-csearch_path={schema}')}"

    def fresh(self, name: str) -> str:
        url = self.empty(name)
        db = Database(url)
        db.upgrade()
        Queue(db).types.seed("bench")
        db.dispose()
        return url

    def queue(self, url: str, **kw: Any) -> Queue:
        return Queue(Database(url), backoff_base=0, **kw)

    def raw_connect(self, url: str):
        """A plain driver connection, set up like the app's (WAL and friends on SQLite)."""
        if self.engine == "sqlite":
            conn = sqlite3.connect(make_url(url).database, isolation_level=None)
            for pragma in (
                "busy_timeout = 30000",
                "journal_mode = WAL",
                "synchronous = NORMAL",
                "foreign_keys = ON",
            ):
                conn.execute(f"PRAGMA {pragma}")
            return conn
        import psycopg

        return psycopg.connect(
            make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        )

    def named(self, statement: str) -> str:
        """An ad-hoc statement with ``:name`` parameters, for this target's driver."""
        return driver_sql(self.engine, statement)

    def begin(self, cur) -> None:
        if self.engine == "sqlite":
            cur.execute("BEGIN IMMEDIATE")

    def cleanup(self) -> None:
        if self.schemas:
            with create_engine(self.postgres_url, isolation_level="AUTOCOMMIT").connect() as conn:
                for schema in self.schemas:
                    conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
