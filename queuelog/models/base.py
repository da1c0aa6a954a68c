"""The column types, constants and declarative base every model shares (queuelog/models/)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Integer,
    MetaData,
    TypeDecorator,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase

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
STATUSES = ("waiting", "pending", "running", "completed", "failed", "cancelled")
BATCH_STATUSES = ("running", "succeeded", "finished_with_failures")
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
