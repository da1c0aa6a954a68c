"""Leases on roles that one process of the cluster plays at a time (queuelog/maintenance.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from queuelog.models.base import Base, Timestamp


class LeaderLease(Base):
    """Who holds a role (``name``, e.g. the schema's maintenance) until when. A holder renews its lease
    well before ``expires_at``; anyone may take a lease that has run out. No session state is involved, so
    the election works through PgBouncer in transaction mode (docs/operations.md#pgbouncer)."""

    __tablename__ = "leader_leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime] = mapped_column(Timestamp())
