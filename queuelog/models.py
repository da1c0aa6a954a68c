"""The tables, as typed SQLAlchemy models. Alembic migrations build exactly this schema.

Job state changes never go through these classes: the queue layer (``queuelog.queue``) writes jobs with
guarded SQL. The models serve the admin code, the pages and the migrations' autogenerate check.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Text,
    TypeDecorator,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

JsonType = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
# SQLite only makes INTEGER PRIMARY KEY an alias of its rowid; BIGINT would not auto-increment there.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Timestamp(TypeDecorator):
    """A UTC timestamp that comes back aware on every engine (SQLite's DATETIME alone returns naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else value.astimezone(UTC)

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


PRIORITIES = {"low": 0, "medium": 10, "high": 20, "critical": 30}
PRIORITY_NAMES = {value: name for name, value in PRIORITIES.items()}
STATUSES = ("pending", "running", "completed", "failed", "cancelled")
ROLES = ("admin", "producer")
KEY_KINDS = ("worker", "producer")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
        }
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

    def set_password(self, password: str) -> None:
        """Store a slow, salted hash (scrypt through Werkzeug) of ``password``."""
        self.password_hash = generate_password_hash(password)

    def check_password(self, password: str) -> bool:
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


class JobType(Base):
    __tablename__ = "job_types"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    payload_schema: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
    # Flow control (docs/flow-control.md): NULL is no limit. The claim keeps the rate limit's token
    # bucket in rate_tokens (NULL: full) as of rate_checked_at.
    concurrency_limit: Mapped[int | None] = mapped_column(Integer)
    rate_limit: Mapped[int | None] = mapped_column(Integer)
    rate_period: Mapped[int | None] = mapped_column(Integer)  # seconds
    rate_tokens: Mapped[float | None] = mapped_column(Float)
    rate_checked_at: Mapped[datetime | None] = mapped_column(Timestamp())
    created_at: Mapped[datetime] = mapped_column(Timestamp(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(Timestamp(), default=utcnow, onupdate=utcnow)


FINISHED = "status IN ('completed', 'failed', 'cancelled')"


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    type: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JsonType)
    priority: Mapped[int] = mapped_column(SmallInteger)
    status: Mapped[str] = mapped_column(String(16))
    retry_count: Mapped[int] = mapped_column(Integer, default=0)
    max_retries: Mapped[int] = mapped_column(Integer, default=3)
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    owner: Mapped[str] = mapped_column(String(64))
    worker_id: Mapped[str | None] = mapped_column(String(64))
    lease_token: Mapped[str | None] = mapped_column(String(64))
    claimed_at: Mapped[datetime | None] = mapped_column(Timestamp())
    lease_expires_at: Mapped[datetime | None] = mapped_column(Timestamp())
    available_at: Mapped[datetime] = mapped_column(Timestamp())
    created_at: Mapped[datetime] = mapped_column(Timestamp())
    updated_at: Mapped[datetime] = mapped_column(Timestamp())
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp())
    result: Mapped[dict[str, Any] | None] = mapped_column(JsonType)
    error: Mapped[str | None] = mapped_column(Text)
    # A running job's cancellation, asked for and not yet carried out (docs/running-jobs.md): cleared when
    # the job ends cancelled; the history keeps who asked and when.
    cancel_requested_at: Mapped[datetime | None] = mapped_column(Timestamp())
    cancel_requested_by: Mapped[str | None] = mapped_column(String(64))
    # The running attempt's last progress report; stale once progress_at is older than claimed_at.
    progress_percent: Mapped[int | None] = mapped_column(SmallInteger)
    progress_note: Mapped[str | None] = mapped_column(String(200))
    progress_at: Mapped[datetime | None] = mapped_column(Timestamp())
    # How often a worker handed the job back to run later; capped by QUEUELOG_MAX_SNOOZES.
    snooze_count: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))

    __table_args__ = (
        # Claim order, and only over pending rows: the claim's cost stays flat however many jobs have
        # finished, and `complete` keeps using the primary key (README, "Performance").
        Index(
            "ix_jobs_claim",
            text("priority DESC"),
            "available_at",
            "id",
            sqlite_where=text("status = 'pending'"),
            postgresql_where=text("status = 'pending'"),
        ),
        # Leases to expire: running rows only.
        Index(
            "ix_jobs_lease",
            "lease_expires_at",
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
        # Running jobs by type: a limited type's running jobs, counted by each claim (docs/flow-control.md).
        Index(
            "ix_jobs_running_type",
            "type",
            sqlite_where=text("status = 'running'"),
            postgresql_where=text("status = 'running'"),
        ),
        # Idempotency keys are unique per owner while the job exists.
        Index(
            "uq_jobs_owner_idempotency_key",
            "owner",
            "idempotency_key",
            unique=True,
            sqlite_where=text("idempotency_key IS NOT NULL"),
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
        Index("ix_jobs_owner_id", "owner", "id"),
        Index("ix_jobs_type_id", "type", "id"),
        Index("ix_jobs_status_id", "status", "id"),
        # Pruning reads finished jobs by age. Partial, so that enqueue and claim (pending and running rows)
        # never maintain it: on PostgreSQL an update that changes an indexed column writes an entry into
        # every index the new row belongs to (README, Performance).
        Index(
            "ix_jobs_finished",
            "finished_at",
            sqlite_where=text(FINISHED),
            postgresql_where=text(FINISHED),
        ),
        # Ids are never reused, even after the newest jobs are pruned: a job id names one job forever.
        {"sqlite_autoincrement": True},
    )


class JobEvent(Base):
    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    # No foreign key: every history row is written by the statement (or transaction) that changes its job,
    # and pruning deletes a job's history with it (queuelog/engines/). A foreign key would check every
    # history row against jobs: a sizeable part of a batch's cost on PostgreSQL (README, Performance).
    job_id: Mapped[int] = mapped_column(BigId)
    at: Mapped[datetime] = mapped_column(Timestamp())
    event: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str] = mapped_column(String(64))
    attempt: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index("ix_job_events_job_id_id", "job_id", "id"),
        # The errors page reads the newest failures; most events carry no error.
        Index(
            "ix_job_events_failures",
            "id",
            sqlite_where=text("error IS NOT NULL"),
            postgresql_where=text("error IS NOT NULL"),
        ),
    )


class AuditLog(Base):
    """Admin actions that are not job transitions (users, keys, types), with who and when."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(Timestamp(), default=utcnow)
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(255))
    detail: Mapped[str | None] = mapped_column(Text)


class JobCount(Base):
    """How many jobs there are per owner, type, priority and status, kept by database triggers on ``jobs``
    (migration 0003) so that dashboards and /metrics never count the jobs table. On PostgreSQL each key is
    spread over a few ``shard`` rows so that concurrent transactions do not queue on one hot row; readers
    sum the shards."""

    __tablename__ = "job_counts"

    owner: Mapped[str] = mapped_column(String(64), primary_key=True)
    type: Mapped[str] = mapped_column(String(64), primary_key=True)
    priority: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True, default=0)
    n: Mapped[int] = mapped_column(BigInteger, default=0)


class JobThroughput(Base):
    """Jobs finished per minute (completed or failed), per owner, kept by the same triggers: the
    dashboard's chart reads at most 60 rows per status instead of every job finished in the last hour."""

    __tablename__ = "job_throughput"

    minute: Mapped[str] = mapped_column(String(16), primary_key=True)  # "YYYY-MM-DD HH:MM", UTC
    owner: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True, default=0)
    n: Mapped[int] = mapped_column(BigInteger, default=0)


class LoginAttempt(Base):
    """A failed login, kept for the rate limit's window. In the database, so every app server shares it."""

    __tablename__ = "login_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(128))  # "user:<name>" or "addr:<ip>"
    at: Mapped[datetime] = mapped_column(Timestamp())

    __table_args__ = (Index("ix_login_attempts_key_at", "key", "at"), Index("ix_login_attempts_at", "at"))


class Schedule(Base):
    """A periodic job (docs/schedules.md): a cron expression in ``timezone`` or a fixed interval. Firing
    moves ``next_fire_at``; every edit raises ``revision``, which a firing checks in its UPDATE."""

    __tablename__ = "schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(55), unique=True)  # fired jobs' owner is "schedule:<name>"
    type: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JsonType)
    priority: Mapped[int] = mapped_column(SmallInteger)
    max_retries: Mapped[int] = mapped_column(Integer)
    cron: Mapped[str | None] = mapped_column(String(255))
    interval_seconds: Mapped[int | None] = mapped_column(Integer)
    timezone: Mapped[str] = mapped_column(String(64))
    missed: Mapped[str] = mapped_column(String(16))  # fire_once | skip
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    revision: Mapped[int] = mapped_column(Integer, default=0)
    next_fire_at: Mapped[datetime | None] = mapped_column(Timestamp())
    last_fire_at: Mapped[datetime | None] = mapped_column(Timestamp())
    created_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(Timestamp())
    updated_at: Mapped[datetime] = mapped_column(Timestamp())

    __table_args__ = (Index("ix_schedules_next_fire_at", "next_fire_at"),)


class ScheduleFire(Base):
    """One fired slot of a schedule. Its key makes a slot fire once, however many servers try."""

    __tablename__ = "schedule_fires"

    schedule_id: Mapped[int] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"), primary_key=True)
    slot_at: Mapped[datetime] = mapped_column(Timestamp(), primary_key=True)
    job_id: Mapped[int | None] = mapped_column(BigId)  # None: the slot was passed over (docs/schedules.md)
    fired_at: Mapped[datetime] = mapped_column(Timestamp())
