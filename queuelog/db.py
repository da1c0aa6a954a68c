"""The database connection for one app: engine, transactions, schema upgrades.

SQLite is opened the way SQLAlchemy's documentation recommends for explicit transaction control: the
driver's own transaction handling is switched off and we emit BEGIN ourselves. Write transactions say
``BEGIN IMMEDIATE`` so they take the write lock up front and wait in the busy handler, instead of failing
with "database is locked" when a read transaction tries to become a write transaction.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from queuelog.drivers import (
    JSONB_OID,
    DatabaseUnavailable,
    DatabaseUnusable,
    as_unavailable,
    create_private_file,
    json_text_loader,
    lock_file,
    postgres_setup,
    rollback_quietly,
    sqlite_setup,
)

MIGRATIONS = Path(__file__).parent / "migrations"
_NAMED_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def driver_sql(dialect: str, statement: str) -> str:
    """Rewrite an ad-hoc statement's ``:name`` parameters for ``dialect``'s driver: sqlite3 takes them as
    they are, psycopg wants ``%(name)s``."""
    if dialect == "postgresql":
        return _NAMED_PARAM.sub(r"%(\1)s", statement)
    return statement


class RevisionRefused(ValueError):
    """``Database.upgrade`` to a revision that no migration has, or of a database at one."""


class Database:
    """Owns the engine of one app and hands out connections in explicit transactions."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        max_overflow: int = 20,
        busy_timeout_ms: int = 30000,
        password_hash: str = "scrypt",
        connect_timeout: float = 5.0,
        statement_timeout: float = 30.0,
        prepared_statements: bool = True,
    ):
        self.url = make_url(url)
        # How queuelog.access.auth hashes the passwords it stores in this database (QUEUELOG_PASSWORD_HASH).
        self.password_hash = password_hash
        self.dialect = self.url.get_backend_name()
        if self.dialect == "sqlite":
            try:
                create_private_file(self.url.database)
            except OSError as exc:
                raise DatabaseUnusable(
                    f"cannot use the database {self.url.database}: {exc.strerror}"
                ) from None
            self.engine = create_engine(
                self.url,
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_timeout=connect_timeout,
                hide_parameters=True,
            )
            if statement_timeout > 0:  # a write waits for SQLite's lock no longer than a statement may last
                busy_timeout_ms = min(busy_timeout_ms, int(statement_timeout * 1000))
            sqlite_setup(self.engine, busy_timeout_ms)
        elif self.dialect == "postgresql":
            # No pre-ping: it would add a round trip to every operation. A connection that died with the
            # server fails its next use once (503, which workers retry) and is dropped from the pool.
            # Logged errors leave out bound parameters: they may hold payloads or lease tokens. A request
            # waits for a pooled connection as long as for a new one (pool_timeout): then 503.
            self.engine = create_engine(
                self.url,
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_timeout=connect_timeout,
                hide_parameters=True,
            )
            postgres_setup(
                self.engine,
                connect_timeout=connect_timeout,
                statement_timeout=statement_timeout,
                prepared_statements=prepared_statements,
            )
        else:
            raise ValueError(f"unsupported database {self.dialect!r}: use sqlite or postgresql")
        self.write_engine = self.engine.execution_options(queuelog_write=True)
        self._connect_timeout, self._prepared_statements = connect_timeout, prepared_statements
        # How long a write waits for this process's SQLite writer (the busy timeout bounds the rest).
        self._writer_wait = statement_timeout if statement_timeout > 0 else -1
        self._sqlite_writer = threading.Lock()
        self._writer: Any = None  # SQLite: the writer's connection, opened by the first write (cursor)
        self._writer_conn: Any = None
        self._writer_pid = 0
        self._lock_fd: int | None = None
        database = self.url.database if self.dialect == "sqlite" else None
        self._lock_path = f"{database}.writer-lock" if database and database != ":memory:" else None
        # SQLite's reads: one connection per thread, kept (cursor, _reader). Not for a memory database,
        # where each connection would be a database of its own.
        self._thread_readers = self._lock_path is not None
        self._readers = threading.local()
        self._reader_generation = 0  # dispose() moves it on: every thread then opens a new reader

    def sql(self, statement: str) -> str:
        """``driver_sql`` for this database (the engines write each driver's own style instead)."""
        return driver_sql(self.dialect, statement)

    def parse_time(self, value: Any) -> datetime | None:
        """A timestamp as the driver returns it, made an aware UTC datetime (SQLite returns text)."""
        if isinstance(value, str):
            return datetime.fromisoformat(value + "+00:00")
        return None if value is None else value.astimezone(UTC)

    @contextmanager
    def cursor(self, *, write: bool = False, autocommit: bool = False) -> Iterator[Any]:
        """A DB-API cursor for the queue layer's hot path (SQLite's writes: on the writer's connection; its
        reads: on a connection of the calling thread's own).

        With ``write=True`` the block is one transaction (``BEGIN IMMEDIATE`` on SQLite), committed when it
        ends without an error and rolled back otherwise. Skipping SQLAlchemy's result machinery here is
        worth about 2x on claim+complete (see ``queuelog-bench core``). Driver errors that mean "cannot
        reach or lock the database" come out as ``DatabaseUnavailable``.

        ``autocommit=True`` (PostgreSQL; ignored on SQLite) makes each statement its own transaction: for
        blocks whose writes are single self-contained statements it saves the BEGIN and COMMIT round trips.

        JSON comes out of these cursors as the text the database holds, on both databases: SQLite keeps
        text, and PostgreSQL's jsonb is read with a text loader on the cursor (the ORM's connections keep
        psycopg's parsing). A payload goes back out as it came in, never parsed and serialized again.
        """
        if self.dialect == "sqlite" and write:
            # SQLite has one writer at a time. Writers queue on locks that hand over at once: a thread lock
            # within this process, then an flock on a file beside the database across processes (gunicorn
            # workers). Left to SQLite's busy handler, waiting writers poll with sleeps of 1 ms and up.
            # Writes have one connection of their own, kept for the life of the process: no pool checkout
            # and reset per write, and its page cache stays valid from one write to the next, since no other
            # connection of this process writes in between (docs/performance.md#writes-one-transaction-one-round-trip).
            if not self._sqlite_writer.acquire(timeout=self._writer_wait):
                raise DatabaseUnavailable("another write held the database too long", reason="busy")
            try:
                pid = os.getpid()
                if self._writer_pid != pid:  # a connection never crosses a fork: a child opens its own
                    self._writer_conn = self.engine.raw_connection()
                    self._writer = self._writer_conn.driver_connection
                    self._writer_pid = pid
                    self._lock_fd = lock_file(self._lock_path)
                fd = self._lock_fd
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    with self._sqlite_block(self._writer, "BEGIN IMMEDIATE") as cur:
                        yield cur
                finally:
                    if fd is not None:
                        fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                self._sqlite_writer.release()
            return
        if self._thread_readers and not write:
            # SQLite's reads: on a connection of this thread's own that lives as long as the thread (no
            # pool checkout and reset per read; the API key lookup of every request comes here). Its
            # statements are each their own transaction (the driver's autocommit; nothing here says
            # BEGIN), so a read sees every write committed before it started: a key revoked a moment ago
            # is refused at once.
            with self._sqlite_block(self._reader(), None) as cur:
                yield cur
            return
        with self._cursor(write=write, autocommit=autocommit) as cur:
            yield cur

    @contextmanager
    def _sqlite_block(self, dbapi_conn: Any, begin: str | None) -> Iterator[Any]:
        """One block of SQLite statements on ``dbapi_conn`` (the writer's or a thread's reader): ``begin``
        first, if any; committed when the block ends without an error (a reader's too, if the block began
        a transaction of its own), rolled back otherwise. A cursor per block, closed at its end: a
        statement left with rows unread would otherwise keep an old snapshot open after the commit, and
        hold back the WAL's checkpoints."""
        cur = dbapi_conn.cursor()
        try:
            if begin is not None:
                cur.execute(begin)
            yield cur
            if dbapi_conn.in_transaction:
                dbapi_conn.commit()
        except BaseException as exc:
            rollback_quietly(dbapi_conn)
            unavailable = as_unavailable(exc)
            if unavailable is not None and unavailable is not exc:
                raise unavailable from exc
            raise
        finally:
            cur.close()

    def _reader(self) -> Any:
        """This thread's reader, opened on first use, and again after a fork or a dispose(). It is made
        by the pool (the same set-up as every connection) and detached from it: it is closed when its
        thread ends, and does not count against the pool's size."""
        readers = self._readers
        key = (os.getpid(), self._reader_generation)
        if getattr(readers, "key", None) != key:
            old = getattr(readers, "conn", None)
            if old is not None and readers.key[0] == key[0]:  # never close a parent's connection
                old.close()
            fairy = self.engine.raw_connection()
            fairy.detach()
            readers.conn, readers.key = fairy.dbapi_connection, key  # sqlite3's own connection
        return readers.conn

    def _close_writer(self) -> None:
        conn, self._writer_conn, self._writer = self._writer_conn, None, None
        if conn is not None and self._writer_pid == os.getpid():
            conn.invalidate()  # closed, and never handed out by the pool again
        self._writer_pid = 0

    @contextmanager
    def _cursor(self, *, write: bool, autocommit: bool) -> Iterator[Any]:
        try:
            conn = self.engine.raw_connection()  # the pool's checkout: a refused connection is a 503 too
        except Exception as exc:
            unavailable = as_unavailable(exc)
            if unavailable is None:
                raise
            raise unavailable from exc
        dbapi_conn = conn.driver_connection
        autocommit = autocommit and self.dialect == "postgresql"
        try:
            if autocommit:
                dbapi_conn.autocommit = True
            cur = dbapi_conn.cursor()
            if self.dialect != "sqlite":  # SQLite's writes take the writer's connection (cursor)
                cur.adapters.register_loader(JSONB_OID, json_text_loader())
            yield cur
            if not autocommit and (self.dialect != "sqlite" or dbapi_conn.in_transaction):
                dbapi_conn.commit()
        except BaseException as exc:
            rollback_quietly(dbapi_conn)
            unavailable = as_unavailable(exc)
            if unavailable is not None and getattr(dbapi_conn, "closed", False):
                # The server went away (a restart, a failover): so did every connection pooled before
                # now. Invalidate them all at once, as SQLAlchemy does on a disconnect, instead of failing
                # one request for each of them (docs/operations.md#outages).
                self.engine.pool._invalidate(conn, exc)
            if unavailable is not None and unavailable is not exc:
                raise unavailable from exc
            raise
        finally:
            # A connection the server dropped was invalidated above: nothing to reset, and invalidating
            # it again would only warn.
            if autocommit and conn.is_valid:
                try:
                    dbapi_conn.autocommit = False
                except Exception:  # a broken connection: the pool's reset will discard it
                    conn.invalidate()
            conn.close()  # back to the pool

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in a read transaction (rolled back at the end)."""
        with self.engine.connect() as conn:
            with conn.begin():
                yield conn

    def session(self, *, write: bool = False) -> Session:
        """An ORM session; ``write=True`` makes its transactions take the write lock up front."""
        return Session(bind=self.write_engine if write else self.engine, expire_on_commit=False)

    def dispose(self) -> None:
        """Close every pooled connection and the writer's (tests, forks)."""
        with self._sqlite_writer:
            self._close_writer()
        self._reader_generation += 1  # other threads' readers are closed by their next read
        old = getattr(self._readers, "conn", None)
        if old is not None and self._readers.key[0] == os.getpid():
            old.close()
        self._readers.conn = self._readers.key = None
        self.engine.dispose()

    # -- schema -------------------------------------------------------------------------------------

    def alembic_config(self, engine: Any = None):
        """An Alembic config pointing at the packaged migrations and this database (or ``engine``)."""
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.attributes["engine"] = engine if engine is not None else self.write_engine
        return cfg

    def upgrade(self, revision: str = "head") -> None:
        """Bring the schema to ``revision`` (the newest by default). On PostgreSQL the migrations run on
        a connection of their own without QUEUELOG_DB_STATEMENT_TIMEOUT: building an index on a large
        table may well take longer than any request should. A ``revision`` no migration has raises
        ``RevisionRefused`` before anything runs."""
        from alembic import command
        from alembic.script import ScriptDirectory
        from alembic.util import CommandError

        script = ScriptDirectory.from_config(self.alembic_config())
        try:
            script.get_revisions(revision)
        except CommandError as exc:  # "Can't locate revision identified by ...": a line, no traceback
            raise RevisionRefused(str(exc)) from None
        engine = None
        if self.dialect == "postgresql":
            engine = create_engine(self.url, poolclass=NullPool, hide_parameters=True)
            postgres_setup(
                engine,
                connect_timeout=self._connect_timeout,
                statement_timeout=0,
                prepared_statements=self._prepared_statements,
            )
        try:
            known = {s.revision for s in script.walk_revisions()}
            unknown = sorted(self._current_heads(engine) - known)
            if unknown:
                raise RevisionRefused(
                    f"the database is at revision {', '.join(unknown)}, which this queuelog does not have"
                    " (a newer queuelog's migration?)"
                )
            command.upgrade(self.alembic_config(engine), revision)
        finally:
            if engine is not None:
                engine.dispose()

    def is_current(self) -> bool:
        """True when the schema is at the newest migration."""
        from alembic.script import ScriptDirectory

        heads = set(ScriptDirectory.from_config(self.alembic_config()).get_heads())
        return self._current_heads() == heads

    def _current_heads(self, engine: Any = None) -> set[str]:
        """The revisions the database says it is at (none for an empty database), read on ``engine``
        (the migrations' own, on PostgreSQL), else on this database's."""
        from alembic.runtime.migration import MigrationContext

        with (engine or self.engine).connect() as conn:
            return set(MigrationContext.configure(conn).get_current_heads())
