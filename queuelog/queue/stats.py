"""Read-only views of the queue for the pages: counts, throughput, and failures grouped by cause."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from queuelog.models import PRIORITY_NAMES, STATUSES
from queuelog.queue.core import Queue

_VOLATILE = [
    (re.compile(r"\(held by [^)]*\)"), "(held by …)"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
]


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

    @property
    def failed_jobs(self) -> list[int]:
        return sorted(i for i, status in self.jobs.items() if status == "failed")

    @property
    def pending_jobs(self) -> list[int]:
        return sorted(i for i, status in self.jobs.items() if status == "pending")


class QueueStats:
    def __init__(self, queue: Queue):
        self.queue = queue
        self.db = queue.db
        self.d = queue.d

    def _rows(self, sql: str, params: dict[str, Any]) -> list[Any]:
        with self.db.cursor() as cur:
            cur.execute(self.db.sql(sql), params)
            return cur.fetchall()

    def overview(self, owner: str | None = None, now: datetime | None = None) -> dict[str, Any]:
        """Counts by status, pending by priority, the oldest pending job's creation, and per-minute
        completions and failures over the last hour."""
        now = now or self.queue.clock()
        params = {"owner": owner} if owner else {}
        mine = " AND owner = :owner" if owner else ""
        by_status = dict.fromkeys(STATUSES, 0)
        by_priority = {name: 0 for name in PRIORITY_NAMES.values()}
        # job_counts is kept by triggers: a few rows, whatever the size of the jobs table.
        for status, priority, count in self._rows(
            f"SELECT status, priority, sum(n) FROM job_counts WHERE 1 = 1{mine} GROUP BY status, priority",
            params,
        ):
            by_status[status] = by_status.get(status, 0) + int(count)
            if status == "pending":
                name = PRIORITY_NAMES.get(priority, str(priority))
                by_priority[name] = by_priority.get(name, 0) + int(count)
        # Ids grow with time, so the lowest pending id is the oldest pending job (an index seek).
        oldest_rows = self._rows(
            f"SELECT created_at FROM jobs WHERE status = 'pending'{mine} ORDER BY id LIMIT 1", params
        )
        oldest = oldest_rows[0][0] if oldest_rows else None
        since = now - timedelta(minutes=60)
        # job_throughput is kept by triggers: at most 60 minutes x 2 statuses (x shards) rows to read.
        rows = self._rows(
            f"SELECT status, minute, sum(n) FROM job_throughput WHERE minute >= :since{mine} GROUP BY status, minute",
            {**params, "since": since.strftime("%Y-%m-%d %H:%M")},
        )
        per_minute = {(status, label): int(count) for status, label, count in rows}
        start = since.replace(second=0, microsecond=0) + timedelta(minutes=1)
        series = []
        for i in range(60):
            moment = start + timedelta(minutes=i)
            label = moment.strftime("%Y-%m-%d %H:%M")
            series.append(
                {
                    "minute": moment,
                    "completed": per_minute.get(("completed", label), 0),
                    "failed": per_minute.get(("failed", label), 0),
                }
            )
        return {
            "by_status": by_status,
            "pending_by_priority": by_priority,
            "oldest_pending": self.db.parse_time(oldest),
            "throughput": series,
        }

    def error_groups(self, *, recent: int = 5000) -> list[ErrorGroup]:
        """Failed attempts among the ``recent`` newest failure events, grouped by job type and signature,
        newest group first."""
        rows = self._rows(
            "SELECT e.job_id, e.at, e.error, j.type, j.status FROM job_events e JOIN jobs j ON j.id = e.job_id"
            " WHERE e.error IS NOT NULL ORDER BY e.id DESC LIMIT :limit",
            {"limit": recent},
        )
        groups: dict[str, ErrorGroup] = {}
        for job_id, at, error, job_type, status in rows:
            signature = error_signature(error)
            key = hashlib.sha1(f"{job_type}\0{signature}".encode()).hexdigest()[:16]
            group = groups.get(key)
            if group is None:  # rows come newest first: the first one seen is the group's latest
                group = groups[key] = ErrorGroup(
                    key, job_type, signature, self.db.parse_time(at), error, job_id
                )
            group.failures += 1
            group.jobs[job_id] = status
        return sorted(groups.values(), key=lambda g: g.latest_at, reverse=True)

    def error_group(self, group_id: str) -> ErrorGroup | None:
        return next((g for g in self.error_groups() if g.id == group_id), None)
