"""Job types, jobs, their history rows and the trigger-kept counters."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from queuelog.models.base import (
    Base,
    BigId,
    JsonType,
    Timestamp,
    utcnow,
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
    # Workflows (docs/workflows.md): the batch the job is a member of, or the batch whose callback it is;
    # how many jobs were enqueued depending on it (a job without any finishes as it always did); the ids it
    # depends on and those still unfinished while it waits, as JSON arrays (NULL: none); "run" when it runs
    # whatever its dependencies' outcome (NULL: a failed or cancelled dependency cancels it).
    batch_id: Mapped[int | None] = mapped_column(BigInteger)
    callback_of: Mapped[int | None] = mapped_column(BigInteger)
    dependents: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    depends_on: Mapped[str | None] = mapped_column(Text)
    waiting_on: Mapped[str | None] = mapped_column(Text)
    on_dependency_failure: Mapped[str | None] = mapped_column(String(8))
    # The lease token of the report (complete or fail) that ended the last attempt: the same report sent
    # again answers as the first did (docs/operations.md#outages).
    reported_token: Mapped[str | None] = mapped_column(String(64))
    # Whether the running job took a slot of its type's concurrency limit: PostgreSQL's claim marks it, so
    # that the wake-up trigger acts on the end of such a job only (migration 0015). SQLite, which wakes
    # its claims in process, leaves it false.
    holds_slot: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    __table_args__ = (
        # Claim order, and only over pending rows: the claim's cost stays flat however many jobs have
        # finished, and `complete` keeps using the primary key (docs/performance.md#claims-stay-flat-at-any-backlog).
        Index(
            "ix_jobs_claim",
            text("priority DESC"),
            "available_at",
            "id",
            sqlite_where=text("status = 'pending'"),
            postgresql_where=text("status = 'pending'"),
        ),
        # The same order within each type: a claim that must pass over some types (at their limit, out of
        # rate tokens, paused, or not in a worker's list) seeks each other type's first jobs here instead of
        # reading the passed-over jobs one by one (docs/flow-control.md).
        Index(
            "ix_jobs_claim_by_type",
            "type",
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
        # every index the new row belongs to (docs/performance.md#writes-one-transaction-one-round-trip).
        Index(
            "ix_jobs_finished",
            "finished_at",
            sqlite_where=text(FINISHED),
            postgresql_where=text(FINISHED),
        ),
        # A batch's members, in the order they were enqueued.
        Index(
            "ix_jobs_batch",
            "batch_id",
            "id",
            sqlite_where=text("batch_id IS NOT NULL"),
            postgresql_where=text("batch_id IS NOT NULL"),
        ),
        # Ids are never reused, even after the newest jobs are pruned: a job id names one job forever.
        {"sqlite_autoincrement": True},
    )


class ClaimRequest(Base):
    """A claim that carried a request id: the same worker's retry with that id, while the lease lasts,
    answers the jobs leased under ``token`` (docs/operations.md#outages)."""

    __tablename__ = "claim_requests"

    worker: Mapped[str] = mapped_column(String(64), primary_key=True)
    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    token: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime] = mapped_column(Timestamp(), index=True)


class JobEvent(Base):
    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    # No foreign key: every history row is written by the statement (or transaction) that changes its job,
    # and pruning deletes a job's history with it (queuelog/engines/). A foreign key would check every
    # history row against jobs: a sizeable part of a batch's cost on PostgreSQL (docs/performance.md#claims-stay-flat-at-any-backlog).
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


class JobDependency(Base):
    """Job ``job_id`` waits for job ``depends_on_id`` (docs/workflows.md). Read both ways: a job's
    dependencies by the primary key, a finished job's dependents by ``ix_job_dependencies_depends_on_id``."""

    __tablename__ = "job_dependencies"

    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    depends_on_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)

    __table_args__ = (Index("ix_job_dependencies_depends_on_id", "depends_on_id", "job_id"),)


class Batch(Base):
    """A batch of jobs (docs/workflows.md): ``total`` members, of which ``finished`` are finished and
    ``failed`` ended failed or cancelled, kept by the transitions themselves so that the one that finishes
    the last member sees it at once. ``on_success`` and ``on_finish`` are the callbacks' job bodies (JSON);
    ``on_success_job`` and ``on_finish_job`` the jobs they made, once."""

    __tablename__ = "batches"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    owner: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(24))
    total: Mapped[int] = mapped_column(Integer)
    finished: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    fingerprint: Mapped[str | None] = mapped_column(String(64))
    on_success: Mapped[str | None] = mapped_column(Text)
    on_finish: Mapped[str | None] = mapped_column(Text)
    on_success_job: Mapped[int | None] = mapped_column(BigInteger)
    on_finish_job: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(Timestamp())
    updated_at: Mapped[datetime] = mapped_column(Timestamp())
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp())

    __table_args__ = (
        Index("ix_batches_owner_id", "owner", "id"),
        Index("ix_batches_status_id", "status", "id"),
        Index(
            "uq_batches_owner_idempotency_key",
            "owner",
            "idempotency_key",
            unique=True,
            sqlite_where=text("idempotency_key IS NOT NULL"),
            postgresql_where=text("idempotency_key IS NOT NULL"),
        ),
        {"sqlite_autoincrement": True},
    )
