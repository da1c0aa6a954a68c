"""Read-only views of the queue for the pages: counts, throughput, and failures grouped by cause."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from queuelog.engines.records import counts_by_type
from queuelog.models import PRIORITY_NAMES, STATUSES
from queuelog.queue.core import Queue

_VOLATILE = [
    (re.compile(r"\(held by [^)]*\)"), "(held by …)"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
]


TREND_HOURS = 24
_PLACEHOLDERS = re.compile(r"<n>|<hex>|<uuid>|\(held by …\)")


@lru_cache(maxsize=4096)
def error_signature(error: str) -> str:
    """What makes two errors "the same": the last line of a traceback (the exception and its message),
    with numbers, ids, hex strings and worker names blanked out."""
    lines = [line.strip() for line in (error or "").strip().splitlines() if line.strip()]
    text = lines[-1] if lines else ""
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return text[:300]


@dataclass
class ErrorGroup:
    id: str
    type: str
    signature: str
    latest_at: datetime
    sample_error: str
    sample_job_id: int
    failures: int = 0
    jobs: dict[int, str] = field(default_factory=dict)  # job id -> its status now
    first_at: datetime | None = None  # the oldest failure of the group among those read
    hours: list[int] = field(default_factory=lambda: [0] * TREND_HOURS)  # failures per hour, oldest first

    @property
    def search_text(self) -> str:
        """The longest literal piece of the signature: a search of the jobs' errors for it (with the type)
        finds the group's jobs whose latest error it is."""
        pieces = _PLACEHOLDERS.split(self.signature)
        return max((p.strip() for p in pieces), key=len, default="")[:200]

    @property
    def failed_jobs(self) -> list[int]:
        return sorted(i for i, status in self.jobs.items() if status == "failed")

    @property
    def pending_jobs(self) -> list[int]:
        return sorted(i for i, status in self.jobs.items() if status == "pending")


class QueueStats:
    """The dashboard's overview and the errors page's groups, from the queue's engine."""

    def __init__(self, queue: Queue):
        self.queue = queue
        self.engine = queue.engine

    def overview(self, owner: str | None = None, now: datetime | None = None) -> dict[str, Any]:
        """Counts by status, by type and status, pending by priority, the oldest pending job's creation,
        and per-minute completions and failures over the last hour."""
        now = now or self.queue.clock()
        by_status = dict.fromkeys(STATUSES, 0)
        by_priority = {name: 0 for name in PRIORITY_NAMES.values()}
        counts = self.engine.counts(owner=owner)
        for row in counts:
            by_status[row.status] = by_status.get(row.status, 0) + row.n
            if row.status == "pending":
                name = PRIORITY_NAMES.get(row.priority, str(row.priority))
                by_priority[name] = by_priority.get(name, 0) + row.n
        since = now - timedelta(minutes=60)
        per_minute = {
            (row.status, row.minute): row.n for row in self.engine.throughput(since=since, owner=owner)
        }
        start = since.replace(second=0, microsecond=0) + timedelta(minutes=1)
        series = []
        for i in range(60):
            moment = start + timedelta(minutes=i)
            series.append(
                {
                    "minute": moment,
                    "completed": per_minute.get(("completed", moment), 0),
                    "failed": per_minute.get(("failed", moment), 0),
                }
            )
        return {
            "by_status": by_status,
            "by_type": counts_by_type(counts),
            "pending_by_priority": by_priority,
            "oldest_pending": self.engine.oldest_pending(owner=owner),
            "throughput": series,
        }

    def error_groups(self, *, recent: int = 5000, now: datetime | None = None) -> list[ErrorGroup]:
        """Failed attempts among the ``recent`` newest failure events, grouped by job type and signature,
        newest group first, each with its first and last failure and its failures per hour over the 24
        hours before ``now``."""
        now = now or self.queue.clock()
        groups: dict[str, ErrorGroup] = {}
        for row in self.engine.failures(limit=recent):
            signature = error_signature(row.error)
            key = hashlib.sha1(f"{row.type}\0{signature}".encode()).hexdigest()[:16]
            group = groups.get(key)
            if group is None:  # rows come newest first: the first one seen is the group's latest
                group = groups[key] = ErrorGroup(key, row.type, signature, row.at, row.error, row.job_id)
            group.failures += 1
            group.first_at = row.at  # rows come newest first: the last one seen is the first
            group.jobs[row.job_id] = row.status
            hours_ago = int((now - row.at).total_seconds() // 3600)
            if 0 <= hours_ago < TREND_HOURS:
                group.hours[TREND_HOURS - 1 - hours_ago] += 1
        return sorted(groups.values(), key=lambda g: g.latest_at, reverse=True)

    def error_group(self, group_id: str) -> ErrorGroup | None:
        return next((g for g in self.error_groups() if g.id == group_id), None)
