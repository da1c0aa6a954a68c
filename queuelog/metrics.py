"""Prometheus metrics: counters and a claim-latency histogram kept by the queue layer, and gauges read
from the database (the trigger-kept ``job_counts`` table, and the job types' limits) at scrape time.

Under gunicorn, its settings (queuelog/gunicorn_conf.py) set ``PROMETHEUS_MULTIPROC_DIR`` before any worker imports this
module, so every process writes its counters to files in that folder and a scrape, whichever process
answers it, adds them all up. Run outside gunicorn, the counters are this process's own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from queuelog.engines import engine_for
from queuelog.models import BATCH_STATUSES, PRIORITY_NAMES

if TYPE_CHECKING:
    from queuelog.db import Database

_MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
_LOCAL = CollectorRegistry(auto_describe=True)


def _counter(name: str, help_text: str) -> Counter:
    return Counter(name, help_text, registry=None if _MULTIPROCESS else _LOCAL)


ENQUEUED = _counter("queuelog_jobs_enqueued", "Jobs enqueued (idempotent replays not counted).")
CLAIMED = _counter("queuelog_jobs_claimed", "Jobs handed to a worker.")
COMPLETED = _counter("queuelog_jobs_completed", "Jobs completed by their worker.")
FAILED = _counter("queuelog_jobs_failed", "Jobs that failed for good (no retries left, or not retryable).")
RETRIED = _counter(
    "queuelog_jobs_retried", "Jobs put back in the queue after a failure, a lease expiry or by an admin."
)
EXPIRED = _counter("queuelog_leases_expired", "Leases that ran out before their worker reported.")
CLAIM_SECONDS = Histogram(
    "queuelog_claim_duration_seconds",
    "Time a claim spends in the database (long-poll waiting not included).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
    registry=None if _MULTIPROCESS else _LOCAL,
)


class DatabaseCollector:
    """Gauges from the database, read when scraped: jobs by status and type, pending jobs by priority,
    the age of the oldest pending job, and batches by status. Each is an index lookup or a read of a
    small table."""

    def __init__(self, db: Database):
        self.engine = engine_for(db)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_status_type = GaugeMetricFamily(
            "queuelog_jobs", "Jobs by status and type.", labels=["status", "type"]
        )
        pending = GaugeMetricFamily("queuelog_jobs_pending", "Pending jobs by priority.", labels=["priority"])
        oldest = GaugeMetricFamily("queuelog_oldest_pending_age_seconds", "Age of the oldest pending job.")
        totals: dict[tuple[str, str], int] = {}
        priorities = dict.fromkeys(PRIORITY_NAMES.values(), 0)
        for row in self.engine.counts():
            totals[(row.status, row.type)] = totals.get((row.status, row.type), 0) + row.n
            if row.status == "pending":
                name = PRIORITY_NAMES.get(row.priority, str(row.priority))
                priorities[name] = priorities.get(name, 0) + row.n
        for (status, job_type), count in sorted(totals.items()):
            by_status_type.add_metric([status, job_type], count)
        for name, count in priorities.items():
            pending.add_metric([name], count)
        first = self.engine.oldest_pending()
        oldest.add_metric([], 0.0 if first is None else max(0.0, time.time() - first.timestamp()))
        yield by_status_type
        yield pending
        yield oldest
        yield self._batches()
        yield from self._flow_control()

    def _batches(self) -> GaugeMetricFamily:
        """Batches by status (docs/batches.md#metrics): every status has a sample, 0 when none is in it."""
        batches = GaugeMetricFamily("queuelog_batches", "Batches by status.", labels=["status"])
        counts = self.engine.batch_counts()
        for status in BATCH_STATUSES:
            batches.add_metric([status], counts.get(status, 0))
        return batches

    def _flow_control(self) -> Iterator[GaugeMetricFamily]:
        """Each type's limits (docs/flow-control.md), beside which ``queuelog_jobs{status="running"}`` shows
        how close it runs; paused types as 1. Types without a limit have no sample."""
        paused = GaugeMetricFamily(
            "queuelog_type_paused", "1 for a paused job type, else 0.", labels=["type"]
        )
        concurrency = GaugeMetricFamily(
            "queuelog_type_concurrency_limit", "Most jobs of the type running at once.", labels=["type"]
        )
        rate = GaugeMetricFamily(
            "queuelog_type_rate_limit", "Most claims of the type's jobs per rate period.", labels=["type"]
        )
        period = GaugeMetricFamily(
            "queuelog_type_rate_period_seconds", "The period of the type's rate limit.", labels=["type"]
        )
        for job_type in self.engine.all_job_types():
            paused.add_metric([job_type.name], 1.0 if job_type.paused else 0.0)
            if job_type.concurrency_limit is not None:
                concurrency.add_metric([job_type.name], job_type.concurrency_limit)
            if job_type.rate_limit is not None and job_type.rate_period is not None:
                rate.add_metric([job_type.name], job_type.rate_limit)
                period.add_metric([job_type.name], job_type.rate_period)
        yield from (paused, concurrency, rate, period)


def exposition(db: Database) -> bytes:
    """The Prometheus text exposition of every metric, from all app processes."""
    registry = CollectorRegistry(auto_describe=True)
    if _MULTIPROCESS:
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        for collector in (ENQUEUED, CLAIMED, COMPLETED, FAILED, RETRIED, EXPIRED, CLAIM_SECONDS):
            registry.register(collector)
    registry.register(DatabaseCollector(db))
    return generate_latest(registry)
