"""Periodic maintenance (pruning finished jobs, firing due schedules), done by one elected process of the
whole cluster. Firing schedules would be safe from every process at once (docs/schedules.md, Exactly
once); the election only saves the other processes the work.

Every app process runs a maintenance thread, but only the leader works. Leadership is a lock that the
operating system or the database lets go of when its holder dies, so a crashed leader needs no clean-up:

- SQLite: an exclusive, non-blocking ``flock`` on ``<database>.maintenance-lock`` (every app process that
  uses a SQLite file runs on the machine that holds it);
- PostgreSQL: a lease row in ``leader_leases`` (migration 0012), taken or renewed by one statement that
  reads the database's clock. No session state is involved, so the election works through PgBouncer in
  transaction mode (docs/operations.md#pgbouncer), and a leader that dies without a word is replaced once
  its lease has run out (``LEASE_SECONDS``). Each schema has its own table: two queuelog installations in
  one database elect separately.

The leader keeps its lock or lease; the others try again at every tick and take over within one interval
of the leader stopping (PostgreSQL: of its lease running out, within 4/3 of ``LEASE_SECONDS``). See docs/concepts.md#retention.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import secrets
import socket
import threading
import time
from datetime import timedelta
from typing import Any

from queuelog.db import Database

log = logging.getLogger("queuelog.maintenance")

LEASE_SECONDS = 30.0  # how long a PostgreSQL leader's lease lasts; renewed when a third of it has passed
_LEASE_NAME = "maintenance"
# Take the lease if it is free or has run out, or renew it if it is ours: a row back means we hold it.
_PG_TAKE_LEASE = (
    "INSERT INTO leader_leases (name, holder, expires_at)"
    " VALUES (%(name)s, %(holder)s, now() + make_interval(secs => %(seconds)s))"
    " ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at"
    " WHERE leader_leases.holder = EXCLUDED.holder OR leader_leases.expires_at < now()"
    " RETURNING holder"
)
_PG_DROP_LEASE = "DELETE FROM leader_leases WHERE name = %(name)s AND holder = %(holder)s"


class Leadership:
    """One process's claim to be the maintenance leader of its database."""

    def __init__(self, db: Database, *, lease_seconds: float = LEASE_SECONDS):
        self.db = db
        self._fd: int | None = None  # SQLite: the locked file
        # PostgreSQL: who we are in leader_leases, and until when (this process's clock) we may act on
        # the lease we last took or renewed; 0: we hold none.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.lease_seconds = lease_seconds
        self._valid_until = 0.0
        self._renewed = 0.0

    @property
    def held(self) -> bool:
        return self._fd is not None or self._valid_until > time.monotonic()

    def try_acquire(self) -> bool:
        """Become the leader if nobody is; True while this process is the leader."""
        if self.db.dialect == "sqlite":
            return self._try_file_lock()
        return self._try_lease()

    def release(self) -> None:
        """Step down (the lock also goes when the process dies; a lease when it runs out)."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
        if self._valid_until:
            self._valid_until = self._renewed = 0.0
            try:
                with self.db.cursor(write=True, autocommit=True) as cur:  # one statement: no BEGIN, COMMIT
                    cur.execute(_PG_DROP_LEASE, {"name": _LEASE_NAME, "holder": self.holder})
            except Exception:  # unreachable: the lease runs out by itself
                pass

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

    def _try_lease(self) -> bool:
        now = time.monotonic()
        if now - self._renewed < self.lease_seconds / 3:
            # Renewed (or found taken) lately: no statement at every tick. A leader renews every third
            # of its lease; another process looks as often, so it takes over within 4/3 of a lease.
            return self._valid_until > now
        self._renewed = now
        try:
            with self.db.cursor(write=True, autocommit=True) as cur:  # one statement: no BEGIN, COMMIT
                params = {"name": _LEASE_NAME, "holder": self.holder, "seconds": self.lease_seconds}
                won = bool(cur.execute(_PG_TAKE_LEASE, params).fetchall())
        except Exception:
            # Unreachable: act on the lease no longer than it surely lasts (it was renewed before ``now``).
            if self._valid_until <= time.monotonic():
                self._valid_until = 0.0
            raise
        # The lease runs from the database's now(), a moment after ``now`` here: act on it a little less.
        self._valid_until = now + self.lease_seconds * 0.9 if won else 0.0
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
    None) through ``fire_when_due``, which reads the schedules only when one is due, one changed here, or
    its last read is ``recheck_seconds`` old (queue/schedules.py, ``recheck_for``). Runs in a daemon thread; ``stop`` ends it."""
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
                        fired = sum(1 for f in schedules.fire_when_due() if f.job is not None)
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
