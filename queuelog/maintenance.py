"""Periodic maintenance (pruning finished jobs, firing due schedules), done by one elected process of the
whole cluster. Firing schedules would be safe from every process at once (docs/schedules.md, Exactly
once); the election only saves the other processes the work.

Every app process runs a maintenance thread, but only the leader works. Leadership is a lock that the
operating system or the database lets go of when its holder dies, so a crashed leader needs no clean-up:

- SQLite: an exclusive, non-blocking ``flock`` on ``<database>.maintenance-lock`` (every app process that
  uses a SQLite file runs on the machine that holds it);
- PostgreSQL: a session-level advisory lock, held on one connection of its own for as long as the leader
  lives, keyed by the schema so that two queuelog installations in one database elect separately.

The leader keeps its lock; the others try again at every tick and take over within one interval of the
leader stopping. See docs/concepts.md#retention.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import threading
import time
from datetime import timedelta
from typing import Any

from queuelog.db import Database

log = logging.getLogger("queuelog.maintenance")

_PG_TRY_LOCK = "SELECT pg_try_advisory_lock(hashtext('queuelog-maintenance:' || current_schema()))"


class Leadership:
    """One process's claim to be the maintenance leader of its database."""

    def __init__(self, db: Database):
        self.db = db
        self._fd: int | None = None  # SQLite: the locked file
        self._conn: Any = None  # PostgreSQL: the connection holding the advisory lock

    @property
    def held(self) -> bool:
        return self._fd is not None or self._conn is not None

    def try_acquire(self) -> bool:
        """Become the leader if nobody is; True while this process is the leader."""
        if self.db.dialect == "sqlite":
            return self._try_file_lock()
        return self._try_advisory_lock()

    def release(self) -> None:
        """Step down (the lock also goes when the process or its connection dies)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
        if self._conn is not None:
            try:
                self._conn.close()  # ends the session, and with it the advisory lock
            except Exception:  # already broken: the lock is gone with it
                pass
            self._conn = None

    def _try_file_lock(self) -> bool:
        if self._fd is not None:
            return True
        database = self.db.url.database
        if not database or database == ":memory:":
            return True  # a private database has one process by definition
        fd = os.open(f"{database}.maintenance-lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def _try_advisory_lock(self) -> bool:
        if self._conn is not None:
            try:  # still connected means still holding the lock
                with self._conn.cursor() as cur:
                    cur.execute("SELECT 1")
                return True
            except Exception:
                self.release()
        conn = self.db.engine.raw_connection()
        dbapi = conn.driver_connection
        conn.detach()  # this connection leaves the pool for good: it carries the lock
        try:
            dbapi.autocommit = True
            with dbapi.cursor() as cur:
                cur.execute(_PG_TRY_LOCK)
                won = bool(cur.fetchone()[0])
        except Exception:
            conn.close()
            raise
        if won:
            self._conn = dbapi
        else:
            conn.close()
        return won


def start_maintenance(
    app: Any,
    queue: Any,
    older_than: timedelta | None,
    interval: float,
    stop: threading.Event | None = None,
    *,
    schedules: Any = None,
    tick: float = 1.0,
) -> threading.Thread:
    """If this process is the leader: every ``interval`` seconds (jittered), prune finished jobs older
    than ``older_than`` (unless None); every ``tick`` seconds, fire the due slots of ``schedules`` (unless
    None). Runs in a daemon thread; ``stop`` ends it."""
    stop = stop or threading.Event()
    leadership = Leadership(queue.db)

    def pause() -> float:
        return interval * (0.5 + random.random())

    def run() -> None:
        next_prune = time.monotonic() + pause()
        schema_ready = False
        try:
            while not stop.wait(tick if schedules is not None else pause()):
                try:
                    # A server may start before `flask db upgrade` has run on PostgreSQL: wait for it
                    # quietly rather than fail at every tick on tables that are not there yet.
                    schema_ready = schema_ready or queue.db.is_current()
                    if not schema_ready:
                        continue
                    was_leader = leadership.held
                    if not leadership.try_acquire():
                        continue
                    if not was_leader:
                        app.logger.info("this process now does the cluster's maintenance")
                    if schedules is not None:
                        fired = sum(1 for f in schedules.fire_due() if f.job is not None)
                        if fired:
                            app.logger.info("schedules made %d jobs", fired)
                    if older_than is not None and (schedules is None or time.monotonic() >= next_prune):
                        next_prune = time.monotonic() + pause()
                        deleted = queue.prune(older_than)
                        if deleted:
                            app.logger.info("pruned %d finished jobs older than %s", deleted, older_than)
                except Exception:  # a database hiccup must not kill the thread; try again next time
                    app.logger.exception("maintenance failed")
        finally:
            leadership.release()

    thread = threading.Thread(target=run, name="queuelog-maintenance", daemon=True)
    thread.start()
    return thread
