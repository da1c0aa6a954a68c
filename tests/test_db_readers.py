"""SQLite's reads go through a connection per thread, kept for the life of the thread (queuelog/db.py): each
read must still see every write committed before it (a revoked key is refused at once), hold no snapshot
after its block, stay in its thread, and never cross a fork."""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest

from queuelog.db import Database, DatabaseUnavailable
from queuelog.queue.admin import AdminStore
from tests.conftest import in_child, table_database


@pytest.fixture
def db(tmp_path):
    yield from table_database(tmp_path)


def _read(db: Database) -> tuple[sqlite3.Connection, list[int]]:
    with db.cursor() as cur:
        return cur.connection, [n for (n,) in cur.execute("SELECT n FROM t ORDER BY n").fetchall()]


def test_reads_reuse_the_threads_connection_and_other_threads_have_their_own(db):
    first, _ = _read(db)
    again, _ = _read(db)
    assert again is first
    with db.cursor(write=True) as cur:
        assert cur.connection is not first  # the writer's is another
    seen = []
    thread = threading.Thread(target=lambda: seen.append(_read(db)[0]))
    thread.start()
    thread.join()
    assert seen[0] is not first


def test_a_read_sees_every_write_committed_before_it_by_any_connection(db):
    assert _read(db)[1] == []
    other = sqlite3.connect(db.url.database, isolation_level=None)  # another process, say
    other.execute("INSERT INTO t VALUES (1)")
    assert _read(db)[1] == [1]
    with db.cursor(write=True) as cur:
        cur.execute("INSERT INTO t VALUES (2)")
    other.execute("DELETE FROM t WHERE n = 1")
    other.close()
    assert _read(db)[1] == [2]


def test_a_key_revoked_elsewhere_is_refused_at_the_next_request(tmp_path):
    url = f"sqlite:///{tmp_path / 'keys.sqlite3'}"
    app_db, admin_db = Database(url), Database(url)  # the app's process and the admin's command
    app_db.upgrade()
    key = AdminStore(admin_db).create_key("w1", "worker")
    assert AdminStore(app_db).authenticate(key) is not None
    AdminStore(admin_db).revoke_key("w1")
    assert AdminStore(app_db).authenticate(key) is None
    app_db.dispose()
    admin_db.dispose()


def test_a_read_that_leaves_rows_unread_holds_no_snapshot_after_it(db):
    with db.cursor(write=True) as cur:
        cur.executemany("INSERT INTO t VALUES (?)", [(n,) for n in range(5)])
    with db.cursor() as cur:
        cur.execute("SELECT n FROM t").fetchone()  # four rows left unread
    other = sqlite3.connect(db.url.database, isolation_level=None)
    other.execute("INSERT INTO t VALUES (9)")
    busy, _, _ = other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    other.close()
    assert busy == 0  # no reader of an old snapshot holds the WAL back
    assert len(_read(db)[1]) == 6


def test_a_failed_read_block_leaves_the_connection_usable(db):
    with pytest.raises(DatabaseUnavailable):  # as every OperationalError of the driver
        with db.cursor() as cur:
            cur.execute("SELECT nothing FROM nowhere")
    with pytest.raises(RuntimeError):
        with db.cursor() as cur:
            cur.execute("BEGIN")
            raise RuntimeError("stop")
    conn, values = _read(db)
    assert values == [] and not conn.in_transaction


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_reads_through_a_connection_of_its_own(db):
    with db.cursor(write=True) as cur:
        cur.execute("INSERT INTO t VALUES (1)")
    parent, _ = _read(db)

    def child() -> bytes:  # whether it got a new connection, and what it read
        conn, values = _read(db)
        return b"new" if conn is not parent and values == [1] else b"same"

    assert in_child(child) == b"new"
    assert _read(db) == (parent, [1])


def test_dispose_closes_the_reader_and_the_next_read_opens_another(db):
    first, _ = _read(db)
    db.dispose()
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    conn, values = _read(db)
    assert conn is not first and values == []
