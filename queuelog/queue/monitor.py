"""Read-only views for the admin console (docs/console.md): the workers page and the per-type figures.

Every figure comes from bounded reads (the console figures of ``Engine``, queuelog/engines/engine.py): the
running jobs, and samples of the newest finished jobs. When a sample is full it covers less than its window; the views say
which stretch of time they cover instead of pretending to cover all of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from queuelog.engines.records import FinishedJob, HeldJob, WorkerKeyRow, counts_by_type
from queuelog.models import STATUSES
from queuelog.queue.core import Queue

SEEN_WITHIN = timedelta(days=1)  # a worker is listed when its key was used this recently
WORKER_SAMPLE = 1000  # newest completed (and failed) jobs read for the workers page
TYPE_SAMPLE = 500  # newest jobs of each type read for its figures
HELD_READ = 500  # running jobs read at most, soonest lease expiry first (the count per worker is exact)
HELD_SHOWN = 10  # of which each worker lists at most this many
WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


def percentile(values: Sequence[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile of ``values`` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass
class WorkerView:
    name: str
    key: WorkerKeyRow | None = None
    held: list[HeldJob] = field(default_factory=list)
    held_count: int = 0
    last_claim: datetime | None = None
    last_report: datetime | None = None
    completed: int = 0
    failed: int = 0

    @property
    def failure_rate(self) -> float | None:
        done = self.completed + self.failed
        return self.failed / done if done else None

    @property
    def revocable(self) -> bool:
        return self.key is not None and self.key.revoked_at is None


@dataclass
class Workers:
    workers: list[WorkerView]
    since: datetime  # the figures count jobs finished from here on (the last hour, or less: see ``partial``)
    partial: bool  # the sample filled up before the hour's start
    minutes: float  # the span the figures cover, in minutes


@dataclass
class WindowFigures:
    completed: int
    failed: int
    run_p50: float | None  # seconds from claim to finish
    run_p95: float | None
    wait_p50: float | None  # seconds from available to claimed
    wait_p95: float | None

    @property
    def failure_rate(self) -> float | None:
        done = self.completed + self.failed
        return self.failed / done if done else None


@dataclass
class TypeFigures:
    name: str
    by_status: dict[str, int]
    windows: dict[str, WindowFigures]
    hourly: list[dict[str, Any]]  # the last 24 hours: {"minute", "completed", "failed"} per hour
    sampled: int  # jobs read
    covers_since: datetime | None  # set when the sample is full: jobs finished earlier may be missing

    @property
    def active(self) -> int:
        return self.by_status.get("pending", 0) + self.by_status.get("running", 0)


class ConsoleStats:
    """The workers page's and the figures page's views, from the queue's engine."""

    def __init__(self, queue: Queue):
        self.queue = queue
        self.engine = queue.engine

    def workers(self, now: datetime | None = None) -> Workers:
        """Every worker seen within a day (by its key's last use) or holding a job: the jobs it holds,
        its last claim and report, and its completed and failed jobs over the last hour."""
        now = now or self.queue.clock()
        views: dict[str, WorkerView] = {}

        def view(name: str) -> WorkerView:
            return views.setdefault(name, WorkerView(name))

        for key in self.engine.worker_keys(since=now - SEEN_WITHIN, limit=500):
            view(key.name).key = key
        for name, n in self.engine.held_counts().items():
            view(name).held_count = n
        for job in self.engine.held_jobs(limit=HELD_READ):
            worker = view(job.worker_id)
            if len(worker.held) < HELD_SHOWN:
                worker.held.append(job)
            if worker.last_claim is None or job.claimed_at > worker.last_claim:
                worker.last_claim = job.claimed_at
        since = now - WINDOWS["hour"]
        samples = [
            self.engine.recent_finished(s, since=since, limit=WORKER_SAMPLE) for s in ("completed", "failed")
        ]
        # Finished jobs: each has its finish time.
        full = [rows[-1].finished_at for rows in samples if len(rows) == WORKER_SAMPLE]
        covered = max([since] + [at for at in full if at is not None])
        for done in (done for rows in samples for done in rows):
            if done.worker_id is None or done.finished_at is None or done.finished_at < covered:
                continue
            worker = view(done.worker_id)
            if worker.last_report is None or done.finished_at > worker.last_report:
                worker.last_report = done.finished_at
            if done.claimed_at is not None and (
                worker.last_claim is None or done.claimed_at > worker.last_claim
            ):
                worker.last_claim = done.claimed_at
            if done.status == "completed":
                worker.completed += 1
            else:
                worker.failed += 1
        ordered = sorted(views.values(), key=lambda w: (-w.held_count, w.name))
        minutes = max((now - covered).total_seconds() / 60, 1 / 60)
        return Workers(ordered, covered, covered > since, minutes)

    def types(self, now: datetime | None = None) -> list[TypeFigures]:
        """Per job type: jobs by status (exact), and over the last hour and day its completed and failed
        jobs, failure rate and p50/p95 of run time and queue wait, from its newest jobs."""
        now = now or self.queue.clock()
        by_type = counts_by_type(self.queue.engine.counts())
        names = sorted(set(by_type) | {t.name for t in self.queue.types.all()})
        none = dict.fromkeys(STATUSES, 0)
        return [self._type(name, by_type.get(name, none), now) for name in names]

    def busiest(
        self, by_type: dict[str, dict[str, int]] | None = None, limit: int = 5
    ) -> list[tuple[str, dict[str, int]]]:
        """The types with the most jobs pending or running now (exact counts), busiest first; from
        ``by_type`` (all owners' counts, as ``counts_by_type`` gives them) when the caller has read them."""
        if by_type is None:
            by_type = counts_by_type(self.queue.engine.counts())
        active = [(name, c) for name, c in by_type.items() if c["pending"] + c["running"] > 0]
        active.sort(key=lambda item: (-(item[1]["pending"] + item[1]["running"]), item[0]))
        return active[:limit]

    def _type(self, name: str, by_status: dict[str, int], now: datetime) -> TypeFigures:
        rows = self.engine.recent_of_type(name, limit=TYPE_SAMPLE)
        windows = {label: _window(rows, now - span) for label, span in WINDOWS.items()}
        return TypeFigures(
            name,
            by_status,
            windows,
            _hourly(rows, now),
            len(rows),
            _covers_since(rows) if len(rows) == TYPE_SAMPLE else None,
        )


def _covers_since(rows: Sequence[FinishedJob]) -> datetime | None:
    """When the earliest finished job of a full sample finished: older jobs may be missing from it."""
    return min((r.finished_at for r in rows if r.finished_at is not None), default=None)


def _window(rows: Iterable[FinishedJob], since: datetime) -> WindowFigures:
    completed = failed = 0
    runs: list[float] = []
    waits: list[float] = []
    for job in rows:
        if job.claimed_at is not None and job.claimed_at >= since:
            waits.append(max(0.0, (job.claimed_at - job.available_at).total_seconds()))
        if job.finished_at is None or job.finished_at < since or job.status not in ("completed", "failed"):
            continue
        completed += job.status == "completed"
        failed += job.status == "failed"
        if job.claimed_at is not None:
            runs.append(max(0.0, (job.finished_at - job.claimed_at).total_seconds()))
    return WindowFigures(
        completed,
        failed,
        percentile(runs, 50),
        percentile(runs, 95),
        percentile(waits, 50),
        percentile(waits, 95),
    )


def _hourly(rows: Iterable[FinishedJob], now: datetime) -> list[dict[str, Any]]:
    """Completed and failed jobs per hour over the last 24 hours, oldest hour first."""
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
    series: list[dict[str, Any]] = [
        {"minute": start + timedelta(hours=i), "completed": 0, "failed": 0} for i in range(24)
    ]
    for job in rows:
        if job.finished_at is None or job.finished_at < start or job.status not in ("completed", "failed"):
            continue
        slot = int((job.finished_at - start).total_seconds() // 3600)
        if 0 <= slot < 24:
            series[slot][job.status] += 1
    return series
