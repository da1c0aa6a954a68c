"""What the engines' reads return beside jobs and events: counts, throughput, failures, the allowlist
and API keys, as typed rows."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class CountRow(NamedTuple):
    """Jobs per status, type and priority (from the trigger-kept ``job_counts``; exact)."""

    status: str
    type: str
    priority: int
    n: int


class ThroughputRow(NamedTuple):
    """Jobs that became ``status`` (completed or failed) during the UTC minute starting at ``minute``."""

    status: str
    minute: datetime
    n: int


class FailureRow(NamedTuple):
    """A history row that carries an error, with its job's type and current status."""

    job_id: int
    at: datetime
    error: str
    type: str
    status: str


class JobTypeRow(NamedTuple):
    """One entry of the allowlist; ``payload_schema`` is the schema as canonical JSON text, or None."""

    name: str
    enabled: bool
    paused: bool
    payload_schema: str | None


class KeyRow(NamedTuple):
    """An unrevoked API key with its user (``username`` is None for worker keys and orphaned keys)."""

    id: int
    kind: str
    name: str
    last_used_at: datetime | None
    username: str | None
    role: str | None
    active: bool | None
