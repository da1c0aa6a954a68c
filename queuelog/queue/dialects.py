"""What differs between SQLite and PostgreSQL in the queue layer, side by side.

The queue layer runs its statements through ``Connection.exec_driver_sql``: the SQL goes to the driver as
written, with no per-call compilation, which is what keeps the hot path within reach of a raw driver loop.
Statements are written once with ``:name`` parameters; the PostgreSQL dialect rewrites them to psycopg's
``%(name)s`` style when the module is loaded. Both claims pick jobs in the order of the partial index
``ix_jobs_claim``: priority (highest first), then ``available_at``, then ``id``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from queuelog.db import _NAMED_PARAM

JOB_COLUMNS = (
    "id, type, payload, priority, status, retry_count, max_retries, idempotency_key, owner, worker_id,"
    " lease_token, claimed_at, lease_expires_at, available_at, created_at, updated_at, finished_at,"
    " result, error"
)
JOB_FIELDS = tuple(name.strip() for name in JOB_COLUMNS.split(","))
_TIME_FIELDS = frozenset(
    {"claimed_at", "lease_expires_at", "available_at", "created_at", "updated_at", "finished_at"}
)
_TIME_INDEXES = tuple(i for i, name in enumerate(JOB_FIELDS) if name in _TIME_FIELDS)
_PAYLOAD, _RESULT = JOB_FIELDS.index("payload"), JOB_FIELDS.index("result")

# The claim's inner query. `{types}` becomes a filter on the requested types, or nothing.
_PICK = (
    "SELECT id FROM jobs{claim_index} WHERE status = 'pending' AND available_at <= :now{types}"
    " AND type NOT IN (SELECT name FROM job_types WHERE paused = :true)"
    " ORDER BY priority DESC, available_at, id LIMIT :limit"
)
_CLAIM_SET = (
    "status = 'running', worker_id = :worker, lease_token = :token, claimed_at = :now,"
    " lease_expires_at = :expires, updated_at = :now"
)


_SQLITE_HINTS = {"claim_index": " INDEXED BY ix_jobs_claim", "lease_index": " INDEXED BY ix_jobs_lease"}


class SQLiteDialect:
    """SQLite: times as SQLAlchemy's sortable text format, JSON as text, the claim under BEGIN IMMEDIATE."""

    name = "sqlite"

    # Without statistics SQLite prefers ix_jobs_status_id for `status = 'pending'` and then sorts every
    # pending row; naming the partial indexes keeps a claim's cost flat at any backlog (BASELINE.md).
    HINTS = _SQLITE_HINTS
    SELF_LOGGING = False  # the queue layer adds history rows and backoff inside the transaction

    # `+status` keeps SQLite from choosing the status index for the outer condition: without statistics
    # it would otherwise walk every pending row (BASELINE.md). The write lock is already held (BEGIN
    # IMMEDIATE), so the inner pick and the update see the same rows.
    PICK = {
        typed: _PICK.format(
            claim_index=_SQLITE_HINTS["claim_index"],
            types=" AND type IN (SELECT value FROM json_each(:types))" if typed else "",
        )
        for typed in (False, True)
    }
    CLAIM = {
        typed: f"UPDATE jobs SET {_CLAIM_SET} WHERE id IN ({pick}) AND +status = 'pending' RETURNING {JOB_COLUMNS}"
        for typed, pick in PICK.items()
    }

    # A whole batch in one statement: the items arrive as one JSON array of [id, lease_token, result]
    # and are joined to the jobs they name by primary key (the "+" keeps the status index out of it).
    COMPLETE_MANY = (
        "UPDATE jobs SET status = 'completed', result = b.result, error = NULL, finished_at = :now, updated_at = :now,"
        " lease_token = NULL, lease_expires_at = NULL FROM (SELECT json_extract(value, '$[0]') AS id,"
        " json_extract(value, '$[1]') AS token, json_extract(value, '$[2]') AS result FROM json_each(:items)) AS b"
        " WHERE jobs.id = b.id AND +jobs.status = 'running' AND +jobs.worker_id = :worker"
        " AND jobs.lease_token = b.token RETURNING " + ", ".join(f"jobs.{c}" for c in JOB_FIELDS)
    )

    @staticmethod
    def complete_many_params(items: list[tuple[int, str, str | None]]) -> dict[str, Any]:
        # The results are already JSON text: splice them in rather than parse and serialize them again.
        parts = (f"[{int(i)},{json.dumps(token)},{result or 'null'}]" for i, token, result in items)
        return {"items": "[" + ",".join(parts) + "]"}

    @staticmethod
    def sql(statement: str) -> str:
        return statement

    @staticmethod
    def time(value: datetime) -> str:
        # The format SQLAlchemy's SQLite DateTime uses, so the ORM and this layer read each other's rows.
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")

    @staticmethod
    def json(text: str | None) -> Any:
        """Bind a JSON document that the caller has already serialized."""
        return text

    @staticmethod
    def types(names: list[str]) -> str:
        return json.dumps(names)

    @staticmethod
    def job(row: Any) -> dict[str, Any]:
        values = list(row)
        for i in _TIME_INDEXES:
            if values[i] is not None:
                values[i] = datetime.fromisoformat(values[i] + "+00:00")  # 7x faster than .replace(tzinfo=)
        values[_PAYLOAD] = json.loads(values[_PAYLOAD])
        if values[_RESULT] is not None:
            values[_RESULT] = json.loads(values[_RESULT])
        return dict(zip(JOB_FIELDS, values, strict=True))


class PostgresDialect:
    """PostgreSQL: timestamptz, jsonb, and a claim that skips rows other workers have locked."""

    name = "postgresql"

    HINTS = {"claim_index": "", "lease_index": ""}  # the planner matches the partial indexes by itself

    # The CTE fences the pick: its rows are locked (skipping any another claim holds) before the update
    # touches them, so concurrent claims never wait on each other nor hand out the same job.
    PICK = {
        typed: _PICK.format(claim_index="", types=" AND type = ANY(:types)" if typed else "")
        for typed in (False, True)
    }
    # The claim, with lease expiry and history rows, is one statement: see statements.POSTGRES["claim"].
    SELF_LOGGING = True  # transitions write their own history rows (and compute their own backoff)

    # One round trip for a whole batch: the items arrive as arrays and are joined to the jobs they name;
    # the holder guard is the same as for a single complete.
    COMPLETE_MANY = (
        "WITH done AS (UPDATE jobs SET status = 'completed', result = b.result::jsonb, error = NULL, finished_at = %(now)s,"
        " updated_at = %(now)s, lease_token = NULL, lease_expires_at = NULL"
        " FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(results)s::text[]) AS b(id, token, result)"
        " WHERE jobs.id = b.id AND jobs.status = 'running' AND jobs.worker_id = %(worker)s"
        " AND jobs.lease_token = b.token RETURNING " + ", ".join(f"jobs.{c}" for c in JOB_FIELDS) + "),"
        " logged AS (INSERT INTO job_events (job_id, at, event, actor, attempt, error)"
        " SELECT id, %(now)s, 'completed', %(worker)s, retry_count + 1, NULL FROM done)"
        f" SELECT {JOB_COLUMNS} FROM done"
    )

    @staticmethod
    def complete_many_params(items: list[tuple[int, str, str | None]]) -> dict[str, Any]:
        return {
            "ids": [i for i, _, _ in items],
            "tokens": [t for _, t, _ in items],
            "results": [r for _, _, r in items],
        }

    @staticmethod
    def sql(statement: str) -> str:
        return _NAMED_PARAM.sub(r"%(\1)s", statement)

    @staticmethod
    def time(value: datetime) -> datetime:
        return value

    @staticmethod
    def json(text: str | None) -> Any:
        from psycopg.types.json import Jsonb

        # Jsonb would serialize again; hand it the text we already have.
        return None if text is None else Jsonb(text, dumps=_identity)

    @staticmethod
    def types(names: list[str]) -> list[str]:
        return names

    @staticmethod
    def job(row: Any) -> dict[str, Any]:
        values = list(row)
        for i in _TIME_INDEXES:
            if values[i] is not None:
                values[i] = values[i].astimezone(UTC)  # psycopg answers in the session's time zone
        return dict(zip(JOB_FIELDS, values, strict=True))


def _identity(text: str) -> str:
    return text


def dialect_for(name: str) -> type[SQLiteDialect] | type[PostgresDialect]:
    return {"sqlite": SQLiteDialect, "postgresql": PostgresDialect}[name]
