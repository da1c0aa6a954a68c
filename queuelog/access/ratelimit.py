"""Login rate limiting, kept in the database so that every app server shares the count.

Every login attempt first reserves a place: in one write transaction the limiter counts the username's and
the address's attempts within ``window`` and, when both are under their limits (``per_user``,
``per_address``), records the attempt; otherwise the login is refused (429) before any password is checked.
Counting and recording are one step (SQLite: the database's write lock; PostgreSQL: a transaction-level
advisory lock per username and per address), so concurrent attempts can never check more passwords than the
limits allow. A failed attempt's reservation stays as the failure; a success removes the username's
reservations and its own address reservation. Rows older than the window are deleted as attempts come in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, func, or_, select, text
from sqlalchemy.orm import Session

from queuelog.db import Database
from queuelog.models import LoginAttempt, utcnow

_PG_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")


@dataclass(frozen=True)
class Reservation:
    """A login attempt allowed to check a password: the rows that record it."""

    user_key: str
    address_row: int


class LoginLimiter:
    def __init__(
        self,
        db: Database,
        *,
        per_user: int = 5,
        per_address: int = 20,
        window: timedelta = timedelta(minutes=15),
    ):
        self.db = db
        self.per_user = per_user
        self.per_address = per_address
        self.window = window

    @staticmethod
    def _keys(username: str, address: str) -> tuple[str, str]:
        return f"user:{username.strip().lower()[:100]}", f"addr:{address[:100]}"

    def _lock(self, session: Session, *keys: str) -> None:
        """Serialize the transactions that count and change these keys (PostgreSQL; SQLite's write
        transactions are serial already). Taken in one order everywhere, so they never deadlock."""
        if self.db.dialect == "postgresql":
            for key in sorted(keys):
                session.execute(_PG_LOCK, {"key": "queuelog.login:" + key})

    def reserve(self, username: str, address: str) -> Reservation | None:
        """Record an attempt and return it, or None (record nothing) when a limit is reached."""
        user_key, addr_key = self._keys(username, address)
        now = utcnow()
        since = now - self.window
        with self.db.session(write=True) as session, session.begin():
            self._lock(session, user_key, addr_key)
            counts = dict(
                session.execute(
                    select(LoginAttempt.key, func.count())
                    .where(or_(LoginAttempt.key == user_key, LoginAttempt.key == addr_key))
                    .where(LoginAttempt.at > since)
                    .group_by(LoginAttempt.key)
                ).all()
            )
            if counts.get(user_key, 0) >= self.per_user or counts.get(addr_key, 0) >= self.per_address:
                return None
            # Old rows go, skipping any another transaction holds: this never waits, so never deadlocks.
            stale = select(LoginAttempt.id).where(LoginAttempt.at <= since).with_for_update(skip_locked=True)
            session.execute(delete(LoginAttempt).where(LoginAttempt.id.in_(stale)))
            address_row = LoginAttempt(key=addr_key, at=now)
            session.add_all([LoginAttempt(key=user_key, at=now), address_row])
            session.flush()
            return Reservation(user_key, address_row.id)

    def succeeded(self, reservation: Reservation) -> None:
        """The password was right: the username starts afresh, and this login does not count against the
        address."""
        with self.db.session(write=True) as session, session.begin():
            self._lock(session, reservation.user_key)
            session.execute(
                delete(LoginAttempt).where(
                    or_(LoginAttempt.key == reservation.user_key, LoginAttempt.id == reservation.address_row)
                )
            )
