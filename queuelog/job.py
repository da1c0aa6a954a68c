"""A job and its history as the JSON API answers them, for Python programs.

One definition serves both clients: the worker hands a ``Job`` to each handler, and the producer client
(``queuelog.client``) returns them from enqueue, get, list and wait. Standard library only. The fields are
those of the API's job answer (README, "Jobs"; ``tests/client/test_types.py`` checks that they match the
declared answer). An answer may leave fields out (a caller who may not see ``error``, say): those are
None, and ``raw`` keeps the answer as it came, unknown fields included.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

FINISHED = frozenset({"completed", "failed", "cancelled"})

_TIMES = ("claimed_at", "lease_expires_at", "available_at", "created_at", "updated_at", "finished_at")


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time of the API ("2026-12-01T10:13:58.546478Z") as an aware datetime."""
    return None if value is None else datetime.fromisoformat(value)


@dataclass(frozen=True)
class Job:
    """A job as the server showed it to this caller. Times are aware datetimes in UTC."""

    id: int
    type: str
    payload: dict[str, Any] = field(default_factory=dict)
    priority: str | None = None  # low, medium, high, critical
    status: str | None = None  # pending, running, completed, failed, cancelled
    retry_count: int = 0  # failed attempts so far
    max_retries: int | None = None
    owner: str | None = None
    worker_id: str | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    available_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    result: dict[str, Any] | None = None
    idempotency_key: str | None = None  # shown to the owner and admins only
    error: str | None = None  # the last error, redacted; shown to admins only
    lease_token: str | None = None  # in a claim's answer only
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        """The job of an API answer."""
        values = {name: data[name] for name in _FIELDS if name in data}
        for name in _TIMES:
            if name in values:
                values[name] = parse_time(values[name])
        return cls(**values, raw=data)

    @property
    def attempt(self) -> int:
        """The attempt counted from 1: the one running (what a handler is told), the next one of a pending
        job, the last one of a finished job."""
        return self.retry_count + 1

    @property
    def finished(self) -> bool:
        """Completed, failed or cancelled: nothing will happen to it unless an admin retries it."""
        return self.status in FINISHED


@dataclass(frozen=True)
class Event:
    """One change in a job's history (``GET /jobs/{id}/events``)."""

    id: int
    event: str  # enqueued, claimed, completed, retry_scheduled, failed, cancelled, ...
    actor: str  # a user, a worker, or "system"
    attempt: int
    at: datetime | None
    error: str | None = None  # shown to admins only

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Event:
        """The event of an API answer."""
        return cls(
            id=data["id"],
            event=data["event"],
            actor=data["actor"],
            attempt=data["attempt"],
            at=parse_time(data.get("at")),
            error=data.get("error"),
        )


_FIELDS = tuple(f.name for f in fields(Job) if f.name != "raw")
