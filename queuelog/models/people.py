"""Who uses queuelog: users, API keys, login attempts, and the audit log of what they changed."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash

from queuelog.models.base import (
    Base,
    Timestamp,
    utcnow,
)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(Timestamp(), default=utcnow)
    locale: Mapped[str | None] = mapped_column(String(16))  # the language chosen in the pages
    timezone: Mapped[str | None] = mapped_column(String(64))  # an IANA zone name for showing times
    # Part of every login's session id: raising it ends every session of the user (logout, password
    # changes and resets, deactivation, role changes).
    session_version: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))

    # flask-login's user protocol
    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def is_active(self) -> bool:
        return self.active

    @property
    def is_anonymous(self) -> bool:
        return False

    def get_id(self) -> str:
        """The session id flask-login keeps in the cookie: ``<id>:<session_version>``."""
        return f"{self.id}:{self.session_version}"

    def check_password(self, password: str) -> bool:
        """Whether ``password`` is this user's (the hash, made by queuelog.access.auth.hash_password, names its
        method)."""
        return check_password_hash(self.password_hash, password)

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


class ApiKey(Base):
    """An API key. Only a SHA-256 of the key is stored; the key has 256 random bits, so no slow hash is needed.

    A name belongs to one key that is not revoked; a revoked key keeps its row, and its name can be given to
    a new key."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_by: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(Timestamp(), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(Timestamp())
    revoked_at: Mapped[datetime | None] = mapped_column(Timestamp())

    __table_args__ = (
        Index(
            "uq_api_keys_name_unrevoked",
            "name",
            unique=True,
            sqlite_where=text("revoked_at IS NULL"),
            postgresql_where=text("revoked_at IS NULL"),
        ),
    )


class LoginAttempt(Base):
    """A failed login, kept for the rate limit's window. In the database, so every app server shares it."""

    __tablename__ = "login_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(128))  # "user:<name>" or "addr:<ip>"
    at: Mapped[datetime] = mapped_column(Timestamp())

    __table_args__ = (Index("ix_login_attempts_key_at", "key", "at"), Index("ix_login_attempts_at", "at"))


class AuditLog(Base):
    """Admin actions that are not job transitions (users, keys, types), with who and when."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(Timestamp(), default=utcnow)
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(255))
    detail: Mapped[str | None] = mapped_column(Text)
