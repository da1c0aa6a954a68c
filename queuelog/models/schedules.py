"""Periodic schedules and the slots they fired (docs/schedules.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
)
from sqlalchemy.orm import Mapped, mapped_column

from queuelog.models.base import (
    Base,
    BigId,
    JsonType,
    Timestamp,
)


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
