"""Prometheus metrics: counters and a claim-latency histogram kept by the queue layer, and gauges read
from the database (the trigger-kept ``job_counts`` table) at scrape time.

Under gunicorn, ``gunicorn.conf.py`` sets ``PROMETHEUS_MULTIPROC_DIR`` before any worker imports this
module, so every process writes its counters to files in that folder and a scrape, whichever process
answers it, adds them all up. Run outside gunicorn, the counters are this process's own.
"""

from __future__ import annotations

import os
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from queuelog.models import PRIORITY_NAMES

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
    and the age of the oldest pending job. Each is an index lookup or a read of a small table."""

    def __init__(self, db: Any):
        self.db = db

    def collect(self):
        by_status_type = GaugeMetricFamily(
            "queuelog_jobs", "Jobs by status and type.", labels=["status", "type"]
        )
        pending = GaugeMetricFamily("queuelog_jobs_pending", "Pending jobs by priority.", labels=["priority"])
        oldest = GaugeMetricFamily("queuelog_oldest_pending_age_seconds", "Age of the oldest pending job.")
        with self.db.cursor() as cur:
            cur.execute(
                "SELECT status, type, priority, sum(n) FROM job_counts GROUP BY status, type, priority"
            )
            rows = cur.fetchall()
            cur.execute("SELECT created_at FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1")
            first = cur.fetchall()
        totals: dict[tuple[str, str], int] = {}
        priorities = dict.fromkeys(PRIORITY_NAMES.values(), 0)
        for status, job_type, priority, count in rows:
            totals[(status, job_type)] = totals.get((status, job_type), 0) + int(count)
            if status == "pending":
                name = PRIORITY_NAMES.get(priority, str(priority))
                priorities[name] = priorities.get(name, 0) + int(count)
        for (status, job_type), count in sorted(totals.items()):
            by_status_type.add_metric([status, job_type], count)
        for name, count in priorities.items():
            pending.add_metric([name], count)
        age = 0.0
        if first:
            age = max(0.0, time.time() - self.db.parse_time(first[0][0]).timestamp())
        oldest.add_metric([], age)
        yield by_status_type
        yield pending
        yield oldest


def exposition(db: Any) -> bytes:
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
