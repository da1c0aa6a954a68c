"""What the producer client sends and one kind of answer it reads: job bodies (``POST /jobs`` and each
item of ``POST /jobs/batch``, docs/api-reference.md) and a page of ``GET /jobs``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from queuelog.wire.job import Job


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
    depends_on: list[int] | None = None,
    on_dependency_failure: str | None = None,
) -> dict[str, Any]:
    """The JSON body of one job; parameters left None are left out (the server's defaults apply).
    ``depends_on``: ids of jobs it waits for (docs/workflows.md); ``on_dependency_failure``: "cancel"
    (the server's default) or "run"."""
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
