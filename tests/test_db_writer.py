"""SQLite's writes go through one long-lived connection (queuelog/db.py, docs/performance.md#writes-one-transaction-one-round-trip): it must
still leave each write block committed or rolled back as a whole, serve every thread, and never cross a
fork."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading

import pytest

from queuelog.db import Database, DatabaseUnavailable
from queuelog.drivers import lock_file
from tests.conftest import in_child, table_database


@pytest.fixture
def db(tmp_path):
    yield from table_database(tmp_path)


def _values(db: Database) -> list[int]:
    with db.cursor() as cur:
        return [n for (n,) in cur.execute("SELECT n FROM t ORDER BY n").fetchall()]


def test_a_failed_block_leaves_nothing_and_the_next_write_goes_through(db):
    with pytest.raises(RuntimeError):
        with db.cursor(write=True) as cur:
            cur.execute("INSERT INTO t VALUES (1)")
            raise RuntimeError("stop")
    with pytest.raises(sqlite3.IntegrityError):
        with db.cursor(write=True) as cur:
            cur.execute("INSERT INTO t VALUES (2)")
            cur.execute("INSERT INTO t VALUES (2)")
    with db.cursor(write=True) as cur:
        cur.execute("INSERT INTO t VALUES (3)")
    assert _values(db) == [3]


def test_writes_reuse_one_connection_and_other_connections_see_them_at_once(db):
    with db.cursor(write=True) as cur:
        first = cur.connection
        cur.execute("INSERT INTO t VALUES (1)")
    with db.cursor(write=True) as cur:
        assert cur.connection is first
        cur.execute("INSERT INTO t VALUES (2)")
    assert not first.in_transaction  # committed: no lock is held between writes
    assert _values(db) == [1, 2]


def test_threads_write_through_it_one_at_a_time(db):
    def write(first: int) -> None:
        for n in range(first, first + 50):
            with db.cursor(write=True) as cur:
                cur.execute("INSERT INTO t VALUES (?)", (n,))

    threads = [threading.Thread(target=write, args=(i * 50,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _values(db) == list(range(200))


def test_a_locked_database_is_unavailable_and_the_writer_recovers(tmp_path):
    path = tmp_path / "locked.sqlite3"
    db = Database(f"sqlite:///{path}", busy_timeout_ms=50)
    with db.cursor(write=True) as cur:
        cur.execute("CREATE TABLE t (n INTEGER)")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer that skips the lock file
    with pytest.raises(DatabaseUnavailable):
        with db.cursor(write=True) as cur:
            cur.execute("INSERT INTO t VALUES (1)")
    other.execute("ROLLBACK")
    other.close()
    with db.cursor(write=True) as cur:
        cur.execute("INSERT INTO t VALUES (2)")
    assert _values(db) == [2]
    db.dispose()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_writes_through_a_connection_of_its_own(db):
    with db.cursor(write=True) as cur:
        parent = cur.connection
        cur.execute("INSERT INTO t VALUES (1)")

    def child() -> bytes:  # whether it got a new connection; it writes through it
        with db.cursor(write=True) as cur:
            fresh = cur.connection is not parent
            cur.execute("INSERT INTO t VALUES (2)")
        return b"new" if fresh else b"same"

    assert in_child(child) == b"new"
    with db.cursor(write=True) as cur:
        assert cur.connection is parent
        cur.execute("INSERT INTO t VALUES (3)")
    assert _values(db) == [1, 2, 3]


def test_dispose_closes_the_writer_and_the_next_write_opens_another(db):
    with db.cursor(write=True) as cur:
        first = cur.connection
    db.dispose()
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    with db.cursor(write=True) as cur:
        assert cur.connection is not first
        cur.execute("INSERT INTO t VALUES (1)")
    assert _values(db) == [1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_holding_the_write_lock_keeps_its_parent_out(db):
    with db.cursor(write=True) as cur:  # the parent opens its lock file before the fork
        cur.execute("INSERT INTO t VALUES (1)")
    holding, release = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: take the write lock, say so, wait for the word to let go
        code = 1
        try:
            with db.cursor(write=True) as cur:
                cur.execute("INSERT INTO t VALUES (2)")
                os.write(holding[1], b"x")
                os.read(release[0], 1)
            code = 0
        finally:
            os._exit(code)
    try:
        assert os.read(holding[0], 1) == b"x"
        fd = lock_file(db._lock_path)
        with pytest.raises(BlockingIOError):  # shared with the child, the lock would be granted here
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.write(release[1], b"x")
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _values(db) == [1, 2]


def test_a_block_that_leaves_rows_unread_holds_no_snapshot_after_it(db):
    with db.cursor(write=True) as cur:
        cur.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(5)])
    with db.cursor(write=True) as cur:
        cur.execute("SELECT n FROM t").fetchone()  # four rows left unread
    other = sqlite3.connect(db.url.database, isolation_level=None)
    other.execute("INSERT INTO t VALUES (9)")
    busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    other.close()
    assert busy == 0  # no reader of an old snapshot holds the WAL back
    with db.cursor(write=True) as cur:
        assert cur.execute("SELECT count(*) FROM t").fetchone() == (6,)


def test_the_write_ahead_log_is_checkpointed_every_10000_pages_not_every_1000(db, tmp_path):
    """docs/configuration.md#sqlite-and-postgresql: the log passes SQLite's default of 1,000 pages
    without a checkpoint, and the commit past 10,000 copies it into the database file and starts it over."""
    for write in (False, True):
        with db.cursor(write=write) as cur:
            assert cur.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 10_000
    with db.cursor(write=True) as cur:
        cur.execute("CREATE TABLE pages (blob BLOB NOT NULL)")
    frame = 4096 + 24  # a page and its header
    wal, main = tmp_path / "table.sqlite3-wal", tmp_path / "table.sqlite3"

    def fill(commits: int) -> None:
        for _ in range(commits):
            with db.cursor(write=True) as cur:
                cur.execute("INSERT INTO pages VALUES (zeroblob(3500))")  # a new page each, at least

    fill(1500)
    assert wal.stat().st_size > 1500 * frame
    assert main.stat().st_size < 100 * 4096  # nothing copied yet
    fill(5000)
    assert main.stat().st_size > 1500 * 4096  # copied by a checkpoint
    assert wal.stat().st_size < 10_100 * frame  # and the log started over rather than growing on
