"""The SQLite engine's reads: jobs, history, counts, throughput, failures, the allowlist, API keys.
``SQLiteEngine`` (sqlite.py) inherits them. Reads take no write lock.

Counts and throughput come from the tables the triggers of migration 0003 keep (``job_counts``,
``job_throughput``): a few rows, whatever the size of the jobs table (README, Performance).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from queuelog.db import Database
from queuelog.engines.base import EventRecord, JobRecord
from queuelog.engines.records import CountRow, FailureRow, JobTypeRow, KeyRow, ThroughputRow
from queuelog.engines.sqlite_sql import (
    API_KEY,
    COUNTS,
    EVENTS,
    FAILURES,
    GET,
    JOB_TYPES,
    MINUTE,
    OLDEST,
    THROUGHPUT,
    decode_job,
    list_statement,
    parse_time,
)


class SQLiteReads:
    """Read-only operations of ``QueueEngine`` on SQLite (contracts in base.py)."""

    db: Database

    def _rows(self, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
        with self.db.cursor() as cur:
            return cur.execute(statement, params or {}).fetchall()

    def get(self, job_id: int) -> JobRecord | None:
        rows = self._rows(GET, {"id": job_id})
        return decode_job(rows[0]) if rows else None

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
        statement = list_statement(tuple(params), before_id is not None)
        rows = self._rows(statement, {**params, "before_id": before_id, "limit": limit})
        return [decode_job(row) for row in rows]

    def events(self, job_id: int) -> list[EventRecord]:
        return [
            EventRecord(i, parse_time(at), event, actor, attempt, error)
            for i, at, event, actor, attempt, error in self._rows(EVENTS, {"job_id": job_id})
        ]

    def counts(self, *, owner: str | None = None) -> list[CountRow]:
        rows = self._rows(COUNTS[owner is not None], {"owner": owner})
        return [CountRow(status, job_type, priority, int(n)) for status, job_type, priority, n in rows]

    def oldest_pending(self, *, owner: str | None = None) -> datetime | None:
        rows = self._rows(OLDEST[owner is not None], {"owner": owner})
        return parse_time(rows[0][0]) if rows else None

    def throughput(self, *, since: datetime, owner: str | None = None) -> list[ThroughputRow]:
        params = {"owner": owner, "since": since.astimezone(UTC).strftime(MINUTE)}
        return [
            ThroughputRow(status, datetime.strptime(minute, MINUTE).replace(tzinfo=UTC), int(n))
            for status, minute, n in self._rows(THROUGHPUT[owner is not None], params)
        ]

    def failures(self, *, limit: int) -> list[FailureRow]:
        return [
            FailureRow(job_id, parse_time(at), error, job_type, status)
            for job_id, at, error, job_type, status in self._rows(FAILURES, {"limit": limit})
        ]

    def job_types(self) -> list[JobTypeRow]:
        return [
            JobTypeRow(name, bool(enabled), bool(paused), None if schema in (None, "null") else schema)
            for name, enabled, paused, schema in self._rows(JOB_TYPES)
        ]

    def api_key(self, digest: str) -> KeyRow | None:
        rows = self._rows(API_KEY, {"digest": digest})
        if not rows:
            return None
        key_id, kind, name, last_used, username, role, active = rows[0]
        return KeyRow(
            key_id,
            kind,
            name,
            parse_time(last_used),
            username,
            role,
            None if active is None else bool(active),
        )
