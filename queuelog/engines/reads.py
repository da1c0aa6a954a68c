"""The engines' reads: jobs, history, counts, throughput, failures, the allowlist, API keys.

The reads are the same on both databases but for their statements and how a value comes back (SQLite
returns times as text, PostgreSQL as datetimes in the session's zone), so they are written once here over
the dialect's module of statements and decoders (``sqlite_sql`` or ``postgres_sql``), which each engine
names as ``sql``. Reads take no write lock, nor any lock a claim would wait for.

Counts and throughput come from the tables the triggers of migration 0003 keep (``job_counts``,
``job_throughput``): a few rows, whatever the size of the jobs table (README, Performance).
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from queuelog.db import Database
from queuelog.engines.base import EventRecord, JobRecord
from queuelog.engines.records import (
    CountRow,
    FailureRow,
    FinishedJob,
    HeldJob,
    JobSearch,
    JobTypeRow,
    KeyRow,
    SearchPage,
    ThroughputRow,
    WorkerKeyRow,
)
from queuelog.engines.search_sql import bind, count_statement, present, scans, search_statements


class EngineReads:
    """Read-only operations of ``QueueEngine`` (contracts in base.py), over ``sql``, the dialect's module:
    its statements (``GET``, ``EVENTS``, ``COUNTS``, ...) and decoders (``decode_job``, ``decode_time``,
    ``schema_text``, ``list_statement``)."""

    db: Database
    sql: ModuleType

    def _rows(self, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
        with self.db.cursor() as cur:
            return cur.execute(statement, params or {}).fetchall()

    def get(self, job_id: int) -> JobRecord | None:
        rows = self._rows(self.sql.GET, {"id": job_id})
        return self.sql.decode_job(rows[0]) if rows else None

    def list_jobs(
        self,
        *,
        owner: str | None = None,
        status: str | None = None,
        type: str | None = None,
        priority: int | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[JobRecord]:
        filters = {"owner": owner, "status": status, "type": type, "priority": priority}
        params: dict[str, Any] = {name: value for name, value in filters.items() if value is not None}
        statement = self.sql.list_statement(tuple(params), before_id is not None)
        rows = self._rows(statement, {**params, "before_id": before_id, "limit": limit})
        return [self.sql.decode_job(row) for row in rows]

    def events(self, job_id: int) -> list[EventRecord]:
        time = self.sql.decode_time
        return [
            EventRecord(i, time(at), event, actor, attempt, error)
            for i, at, event, actor, attempt, error in self._rows(self.sql.EVENTS, {"job_id": job_id})
        ]

    def counts(self, *, owner: str | None = None) -> list[CountRow]:
        rows = self._rows(self.sql.COUNTS[owner is not None], {"owner": owner})
        return [CountRow(status, job_type, priority, int(n)) for status, job_type, priority, n in rows]

    def oldest_pending(self, *, owner: str | None = None) -> datetime | None:
        rows = self._rows(self.sql.OLDEST[owner is not None], {"owner": owner})
        return self.sql.decode_time(rows[0][0]) if rows else None

    def throughput(self, *, since: datetime, owner: str | None = None) -> list[ThroughputRow]:
        minute = self.sql.MINUTE
        params = {"owner": owner, "since": since.astimezone(UTC).strftime(minute)}
        return [
            ThroughputRow(status, datetime.strptime(at, minute).replace(tzinfo=UTC), int(n))
            for status, at, n in self._rows(self.sql.THROUGHPUT[owner is not None], params)
        ]

    def failures(self, *, limit: int) -> list[FailureRow]:
        time = self.sql.decode_time
        return [
            FailureRow(job_id, time(at), error, job_type, status)
            for job_id, at, error, job_type, status in self._rows(self.sql.FAILURES, {"limit": limit})
        ]

    def job_types(self) -> list[JobTypeRow]:
        return [
            JobTypeRow(name, bool(enabled), bool(paused), self.sql.schema_text(schema))
            for name, enabled, paused, schema in self._rows(self.sql.JOB_TYPES)
        ]

    def api_key(self, digest: str) -> KeyRow | None:
        rows = self._rows(self.sql.API_KEY, {"digest": digest})
        if not rows:
            return None
        key_id, kind, name, last_used, username, role, active = rows[0]
        active = None if active is None else bool(active)
        return KeyRow(key_id, kind, name, self.sql.decode_time(last_used), username, role, active)

    # -- the console's reads (ConsoleReads in console.py) ------------------------------------------------

    def held_jobs(self, *, limit: int) -> list[HeldJob]:
        time = self.sql.decode_time
        return [
            HeldJob(job_id, job_type, worker, time(claimed), time(expires), progress, message)
            for job_id, job_type, worker, claimed, expires, progress, message in self._rows(
                self.sql.HELD_JOBS, {"limit": limit}
            )
        ]

    def held_counts(self) -> dict[str, int]:
        return {worker: int(n) for worker, n in self._rows(self.sql.HELD_COUNTS)}

    def recent_finished(self, status: str, *, since: datetime, limit: int) -> list[FinishedJob]:
        params = {"status": status, "since": self.sql.bind_time(since), "limit": limit}
        return self._finished(self._rows(self.sql.RECENT_FINISHED, params))

    def recent_of_type(self, job_type: str, *, limit: int) -> list[FinishedJob]:
        return self._finished(self._rows(self.sql.RECENT_OF_TYPE, {"type": job_type, "limit": limit}))

    def _finished(self, rows: list[Any]) -> list[FinishedJob]:
        time = self.sql.decode_time
        return [
            FinishedJob(job_id, job_type, status, worker, time(available), time(claimed), time(finished))
            for job_id, job_type, status, worker, available, claimed, finished in rows
        ]

    def worker_keys(self, *, since: datetime, limit: int) -> list[WorkerKeyRow]:
        time = self.sql.decode_time
        params = {"since": self.sql.bind_time(since), "limit": limit}
        return [
            WorkerKeyRow(name, time(created), time(used), time(revoked))
            for name, created, used, revoked in self._rows(self.sql.WORKER_KEYS, params)
        ]


class SearchReads:
    """The console's reads (contracts in console.py, ``SearchOperations``; statements in search_sql.py)."""

    db: Database
    sql: ModuleType
    name: str

    def search(self, search: JobSearch, *, before_id: int | None, limit: int, scan: int) -> SearchPage:
        names = present(search)
        params = {**bind(search, self.name, self.sql.bind_time), "before_id": before_id}
        keyset = before_id is not None
        with self.db.cursor() as cur:
            lowest, full = None, False
            if scans(names):
                window, _ = search_statements(self.name, names, keyset, False)
                lowest, examined = cur.execute(window, {**params, "scan": scan}).fetchone()
                full = lowest is not None and examined >= scan
            _, page = search_statements(self.name, names, keyset, full)
            rows = cur.execute(page, {**params, "floor": lowest, "limit": limit + 1}).fetchall()
        jobs = [self.sql.decode_job(row) for row in rows[:limit]]
        if len(rows) > limit:
            return SearchPage(jobs, jobs[-1].id, False)
        return SearchPage(jobs, lowest if full else None, full)

    def count_matching(self, search: JobSearch, *, action: str, ceiling: int, cap: int) -> int:
        statement = count_statement(self.name, present(search), action)
        params = {**bind(search, self.name, self.sql.bind_time), "ceiling": ceiling, "cap": cap}
        with self.db.cursor() as cur:
            return int(cur.execute(statement, params).fetchone()[0])

    def newest_id(self) -> int:
        with self.db.cursor() as cur:
            row = cur.execute("SELECT max(id) FROM jobs").fetchone()
        return int(row[0] or 0)
