"""What ``Database`` (db.py) needs of each driver: SQLite's connection set-up and its private files and
lock files, psycopg's text loader, and the errors both are read into."""

from __future__ import annotations

import functools
import math
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
    """The database could not be reached, did not answer in time, stayed locked past the busy timeout or
    is full, or (``conflict``) PostgreSQL rolled the transaction back to break a deadlock: then running it
    again is the cure. ``reason`` says which, in one word: ``unreachable``, ``timeout``, ``busy``, ``full``
    or ``conflict`` (the words of the 503's detail, docs/operations.md#outages)."""

    def __init__(self, message: str, *, conflict: bool = False, reason: str | None = None):
        super().__init__(message)
        self.conflict = conflict
        self.reason = reason or ("conflict" if conflict else "unreachable")


# SQLite's result codes (the low byte of sqlite3.Error.sqlite_errorcode) that say why it failed.
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_FULL = 5, 6, 13


def as_unavailable(exc: BaseException) -> DatabaseUnavailable | None:
    """``exc`` as a ``DatabaseUnavailable`` when it means that the database could not be reached or could
    not answer (then the request may be sent again later: a 503), else None. The one reading of the
    drivers' and SQLAlchemy's errors: a connection refused or dropped (psycopg's or sqlite3's
    ``OperationalError`` and ``InterfaceError``, as raised by the pool's checkout too), a statement or a
    pool checkout that timed out, a database locked or full. Other errors (a bug, a constraint) are None."""
    import sqlite3

    from sqlalchemy import exc as sa

    if isinstance(exc, DatabaseUnavailable):
        return exc
    if isinstance(exc, sa.TimeoutError):  # no pooled connection came free in time
        return DatabaseUnavailable(str(exc), reason="busy")
    if isinstance(exc, sa.DBAPIError) and exc.orig is not None:
        orig: BaseException = exc.orig
    elif isinstance(exc, sa.DisconnectionError):
        return DatabaseUnavailable(str(exc))
    else:
        orig = exc
    if isinstance(orig, sqlite3.OperationalError | sqlite3.InterfaceError):
        code = getattr(orig, "sqlite_errorcode", 0) & 0xFF
        if code == _SQLITE_FULL:
            return DatabaseUnavailable(str(orig), reason="full")
        if code in (_SQLITE_BUSY, _SQLITE_LOCKED) or "locked" in str(orig):
            return DatabaseUnavailable(str(orig), reason="busy")
        return DatabaseUnavailable(str(orig))
    try:
        import psycopg
        from psycopg import errors as pg
    except ImportError:  # a SQLite-only install
        return None
    if isinstance(orig, pg.QueryCanceled | pg.LockNotAvailable | pg._WaitTimeout):
        return DatabaseUnavailable(str(orig), reason="timeout")
    if isinstance(orig, pg.DiskFull | pg.OutOfMemory):
        return DatabaseUnavailable(str(orig), reason="full")
    if isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError):
        return DatabaseUnavailable(str(orig), conflict=is_conflict(orig))
    return None


def is_conflict(exc: BaseException) -> bool:
    """Whether PostgreSQL rolled the transaction back to break a deadlock (SQLSTATE 40P01) or a
    serialization conflict (40001): running it again is the cure. By the code, not the class: psycopg
    makes DeadlockDetected a sibling of TransactionRollback, not a kind of it."""
    return getattr(exc, "sqlstate", None) in _CONFLICTS


_CONFLICTS = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected


def rollback_quietly(dbapi_conn) -> None:
    try:
        dbapi_conn.rollback()
    except Exception:  # the connection may be gone; the pool will find out
        pass


@functools.cache
def bounded_connection() -> type:
    """psycopg's connection whose every wait for the server ends after ``wait_bound`` seconds (None: no
    bound). PostgreSQL's own statement_timeout ends a slow statement in the server; this bound ends the
    wait of a client whose server, or the network to it, stalled without a word (a stopped process, a
    dropped route): the connection is closed, and the wait raises psycopg's ``OperationalError`` (a 503).
    A wait for notifications (``notifies()``) is left alone: waiting there is its purpose."""
    import psycopg
    from psycopg import errors as pg

    class BoundedConnection(psycopg.Connection):  # type: ignore[type-arg]
        wait_bound: float | None = None

        def wait(self, gen, interval=0.1, timeout=None):  # type: ignore[no-untyped-def]
            bound = self.wait_bound
            if timeout is not None or bound is None or getattr(gen, "__name__", "") == "notifies":
                return super().wait(gen, interval, timeout)
            try:
                return super().wait(gen, interval, bound)
            except pg._WaitTimeout:
                self.close()  # its protocol state is lost: never use it again
                raise

    return BoundedConnection


def postgres_setup(
    engine: Engine, *, connect_timeout: float, statement_timeout: float, prepared_statements: bool
) -> None:
    """Each new PostgreSQL connection: made within ``connect_timeout`` seconds (libpq counts whole seconds,
    at least 2), statements cut off by the server after ``statement_timeout`` seconds (0: never), every
    wait for the server bounded a second beyond that (``bounded_connection``), and without prepared
    statements when ``prepared_statements`` is off (PgBouncer in transaction mode)."""
    connection_class = bounded_connection()
    wait_bound = statement_timeout + 1.0 if statement_timeout > 0 else None

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect, _record, cargs, cparams):
        cparams.setdefault("connect_timeout", max(2, math.ceil(connect_timeout)))
        if not prepared_statements:
            cparams["prepare_threshold"] = None
        conn = connection_class.connect(*cargs, **cparams)
        conn.wait_bound = wait_bound
        if statement_timeout > 0:
            with conn.cursor() as cur:
                cur.execute(f"SET statement_timeout = {int(statement_timeout * 1000)}")
            conn.commit()
        return conn


WAL_AUTOCHECKPOINT_PAGES = 10_000


def sqlite_setup(engine: Engine, busy_timeout_ms: int) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        # The commit that takes the WAL past this many pages (4 KiB each) copies them into the database
        # file and syncs both, holding the write lock: every 10,000 rather than SQLite's 1,000, a page
        # written by most commits (a counter, an index's last leaf) is copied once where it was copied ten
        # times (docs/configuration.md#sqlite-and-postgresql).
        cursor.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        write = conn.get_execution_options().get("queuelog_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
