"""What ``Database`` (db.py) needs of each driver: SQLite's connection set-up and its private files and
lock files, psycopg's text loader, and the errors both are read into."""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

from sqlalchemy import Engine, event

JSONB_OID = 3802  # PostgreSQL's built-in jsonb type


@functools.cache
def json_text_loader() -> type:
    """psycopg's text loader (imported on first use: SQLite-only installs need no psycopg)."""
    from psycopg.types.string import TextLoader

    return TextLoader


def create_private_file(database: str | None) -> None:
    """Create a new SQLite database file empty and 0600 (and its folder 0700) before SQLite opens it:
    SQLite would make it 0644 under the usual umask, and gives its ``-wal`` and ``-shm`` files the database
    file's mode. An existing file is left as it is."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    if not path.parent.is_dir():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


_lock_files: dict[tuple[str, int], int] = {}
_lock_files_guard = threading.Lock()


def lock_file(path: str | None) -> int | None:
    """This process's descriptor of the lock file at ``path``, opened on first use. Never one inherited
    through a fork: flock belongs to the open file, so parent and child would share the lock."""
    if path is None:
        return None
    with _lock_files_guard:
        key = (path, os.getpid())
        fd = _lock_files.get(key)
        if fd is None:
            fd = _lock_files[key] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return fd


class DatabaseUnusable(Exception):
    """The configured database can never work as given (e.g. its folder cannot be made)."""


class DatabaseUnavailable(Exception):
    """The database could not be reached, or stayed locked past the busy timeout, or (``conflict``)
    PostgreSQL rolled the transaction back to break a deadlock: then running it again is the cure."""

    def __init__(self, message: str, *, conflict: bool = False):
        super().__init__(message)
        self.conflict = conflict


def is_conflict(exc: Exception) -> bool:
    try:
        from psycopg.errors import TransactionRollback  # deadlocks and serialization failures
    except ImportError:
        return False
    return isinstance(exc, TransactionRollback)


def rollback_quietly(dbapi_conn) -> None:
    try:
        dbapi_conn.rollback()
    except Exception:  # the connection may be gone; the pool will find out
        pass


def sqlite_setup(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        write = conn.get_execution_options().get("queuelog_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
