"""Login rate limiting, kept in the database so that every app server shares the count.

A login is refused (429) once a username has failed ``per_user`` times, or an address ``per_address``
times, within ``window``. A success clears the username's failures. Rows older than the window are deleted
as new failures come in.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete, func, or_, select

from queuelog.db import Database
from queuelog.models import LoginAttempt, utcnow


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

    def blocked(self, username: str, address: str) -> bool:
        user_key, addr_key = self._keys(username, address)
        since = utcnow() - self.window
        with self.db.session() as session:
            rows = session.execute(
                select(LoginAttempt.key, func.count())
                .where(
                    or_(LoginAttempt.key == user_key, LoginAttempt.key == addr_key), LoginAttempt.at > since
                )
                .group_by(LoginAttempt.key)
            ).all()
        counts = dict(rows)
        return counts.get(user_key, 0) >= self.per_user or counts.get(addr_key, 0) >= self.per_address

    def failed(self, username: str, address: str) -> None:
        now = utcnow()
        with self.db.session(write=True) as session, session.begin():
            session.execute(delete(LoginAttempt).where(LoginAttempt.at < now - self.window))
            session.add_all([LoginAttempt(key=key, at=now) for key in self._keys(username, address)])

    def succeeded(self, username: str) -> None:
        user_key, _ = self._keys(username, "")
        with self.db.session(write=True) as session, session.begin():
            session.execute(delete(LoginAttempt).where(LoginAttempt.key == user_key))
