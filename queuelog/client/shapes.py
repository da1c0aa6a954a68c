"""What the producer client sends and the answers it reads besides jobs: job bodies (``POST /jobs``, each
item of ``POST /jobs/batch`` and of ``POST /batches``, docs/api-reference.md), a page of ``GET /jobs``,
and batches (docs/batches.md)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from queuelog.wire.job import Job, parse_time


@dataclass(frozen=True)
class JobPage:
    """One page of ``GET /jobs``, newest first; ``next_cursor`` asks for the next (None on the last)."""

    jobs: list[Job]
    next_cursor: str | None
    window_full: bool = (
        False  # the page examined its whole search window (docs/api.md#searching-and-paging-the-list)
    )

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs)

    def __len__(self) -> int:
        return len(self.jobs)


def rfc3339(value: datetime | str, name: str = "run_at") -> str:
    """A time as the API takes it: an aware datetime in UTC with ``Z``; text is sent as it is."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (give it a tzinfo) or RFC 3339 text")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def job_body(
    type: str,
    payload: dict[str, Any] | None = None,
    *,
    priority: str | None = None,
    max_retries: int | None = None,
    run_at: datetime | str | None = None,
    delay_seconds: float | None = None,
    idempotency_key: str | None = None,
    depends_on: Iterable[int | str] | None = None,
    on_dependency_failure: str | None = None,
) -> dict[str, Any]:
    """The JSON body of one job; parameters left None are left out (the server's defaults apply).
    ``depends_on``: ids of jobs it waits for, and inside a batch also the ``ref`` of an earlier member
    (docs/batches.md); ``on_dependency_failure``: "cancel" (the server's default) or "run"."""
    body: dict[str, Any] = {"type": type}
    if payload is not None:
        body["payload"] = payload
    if priority is not None:
        body["priority"] = priority
    if max_retries is not None:
        body["max_retries"] = max_retries
    if run_at is not None:
        body["run_at"] = rfc3339(run_at)
    if delay_seconds is not None:
        body["delay_seconds"] = delay_seconds
    if idempotency_key is not None:
        body["idempotency_key"] = idempotency_key
    if depends_on is not None:
        body["depends_on"] = list(depends_on)
    if on_dependency_failure is not None:
        body["on_dependency_failure"] = on_dependency_failure
    return body


def callback_body(
    type: str,
    payload: dict[str, Any] | None = None,
    *,
    priority: str | None = None,
    max_retries: int | None = None,
) -> dict[str, Any]:
    """The JSON body of a batch's callback job (``on_success``, ``on_finish``): pending as the batch
    finishes, so it takes no start time, dependencies or key of its own."""
    return job_body(type, payload, priority=priority, max_retries=max_retries)


def member_body(item: Mapping[str, Any]) -> dict[str, Any]:
    """One job of ``POST /batches``: the arguments of ``enqueue`` plus an optional ``ref``, the name that
    later members give in their ``depends_on``."""
    fields = dict(item)
    ref = fields.pop("ref", None)
    body = job_body(**fields)
    if ref is not None:
        body["ref"] = ref
    return body


BATCH_FINISHED = frozenset({"succeeded", "finished_with_failures"})


@dataclass(frozen=True)
class Batch:
    """A batch as the server showed it (``GET /batches/{id}``; docs/batches.md). ``jobs`` holds its
    members' ids in the order they were enqueued; ``counts`` its members by job status."""

    id: int
    description: str | None = None
    owner: str | None = None
    status: str | None = None  # running, succeeded, finished_with_failures
    total: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    jobs: list[int] = field(default_factory=list)
    on_success_job: int | None = None  # the callbacks' jobs, once made
    on_finish_job: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Batch:
        """The batch of an API answer; unknown fields stay in ``raw``."""
        values = {name: data[name] for name in _BATCH_FIELDS if name in data}
        for name in ("created_at", "updated_at", "finished_at"):
            if name in values:
                values[name] = parse_time(values[name])
        return cls(**values, raw=data)

    @property
    def finished(self) -> bool:
        """Every member is finished: ``succeeded`` or ``finished_with_failures``."""
        return self.status in BATCH_FINISHED

    @property
    def done(self) -> int:
        """How many members are finished (completed, failed or cancelled)."""
        return sum(self.counts.get(status, 0) for status in ("completed", "failed", "cancelled"))


@dataclass(frozen=True)
class BatchPage:
    """One page of ``GET /batches``, newest first; ``next_cursor`` asks for the next (None on the last)."""

    batches: list[Batch]
    next_cursor: str | None

    def __iter__(self) -> Iterator[Batch]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


_BATCH_FIELDS = tuple(f.name for f in fields(Batch) if f.name != "raw")
