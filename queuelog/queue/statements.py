"""The queue layer's SQL, written once with ``:name`` parameters.

``BASE`` holds the statements both engines run. On PostgreSQL, ``POSTGRES`` replaces the transitions with
single statements that also write the job's history row (data-modifying CTEs) and, for a failure or a
lease expiry, compute the retry backoff; each then runs as one autocommitted statement, one round trip.
SQLite, in process and without data-modifying CTEs, runs the base statements in one ``BEGIN IMMEDIATE``
transaction and lets the queue layer add the history rows and the backoff.
"""

from __future__ import annotations

from queuelog.queue.dialects import _CLAIM_SET, JOB_COLUMNS, JOB_FIELDS, PostgresDialect

_HOLDER = "id = :id AND status = 'running' AND worker_id = :worker AND lease_token = :token"
_RETRYING = ":retryable = 1 AND retry_count < max_retries"

BASE = {
    "get": f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = :id",
    "by_key": f"SELECT {JOB_COLUMNS}, fingerprint FROM jobs WHERE owner = :owner AND idempotency_key = :key",
    "insert": (
        "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, idempotency_key,"
        " fingerprint, owner, available_at, created_at, updated_at) VALUES (:type, :payload, :priority,"
        " 'pending', 0, :max_retries, :key, :fingerprint, :owner, :available_at, :now, :now)"
        f" RETURNING {JOB_COLUMNS}"
    ),
    "insert_idempotent": (
        "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, idempotency_key,"
        " fingerprint, owner, available_at, created_at, updated_at) VALUES (:type, :payload, :priority,"
        " 'pending', 0, :max_retries, :key, :fingerprint, :owner, :available_at, :now, :now)"
        f" ON CONFLICT DO NOTHING RETURNING {JOB_COLUMNS}"
    ),
    "event": (
        "INSERT INTO job_events (job_id, at, event, actor, attempt, error)"
        " VALUES (:job_id, :at, :event, :actor, :attempt, :error)"
    ),
    "events": "SELECT id, at, event, actor, attempt, error FROM job_events WHERE job_id = :job_id ORDER BY id",
    "complete": (
        "UPDATE jobs SET status = 'completed', result = :result, error = NULL, finished_at = :now, updated_at = :now,"
        f" lease_token = NULL, lease_expires_at = NULL WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
    ),
    "heartbeat": (
        f"UPDATE jobs SET lease_expires_at = :expires, updated_at = :now WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
    ),
    "fail": (
        f"UPDATE jobs SET status = CASE WHEN {_RETRYING} THEN 'pending' ELSE 'failed' END,"
        f" retry_count = CASE WHEN {_RETRYING} THEN retry_count + 1 ELSE retry_count END,"
        f" finished_at = CASE WHEN {_RETRYING} THEN NULL ELSE :now END,"
        " available_at = :now, updated_at = :now, error = :error, lease_token = NULL, lease_expires_at = NULL"
        f" WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
    ),
    "lease_due": "SELECT id FROM jobs{lease_index} WHERE status = 'running' AND lease_expires_at < :now LIMIT 1",
    "prune": (
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status IN ('completed', 'failed', 'cancelled')"
        " AND finished_at < :cutoff LIMIT :batch)"
    ),
    "prune_throughput": "DELETE FROM job_throughput WHERE minute < :minute",
    "set_available": "UPDATE jobs SET available_at = :available_at WHERE id = :id",
    # An expired lease counts as a retryable failure by the system.
    "expire": (
        "UPDATE jobs{lease_index} SET status = CASE WHEN retry_count < max_retries THEN 'pending' ELSE 'failed' END,"
        " finished_at = CASE WHEN retry_count < max_retries THEN NULL ELSE :now END,"
        " retry_count = CASE WHEN retry_count < max_retries THEN retry_count + 1 ELSE retry_count END,"
        " available_at = :now, updated_at = :now, error = :error, lease_token = NULL, lease_expires_at = NULL"
        f" WHERE status = 'running' AND lease_expires_at < :now RETURNING {JOB_COLUMNS}"
    ),
    "cancel": (
        "UPDATE jobs SET status = 'cancelled', finished_at = :now, updated_at = :now"
        f" WHERE id = :id AND status = 'pending' RETURNING {JOB_COLUMNS}"
    ),
    "cancel_own": (
        "UPDATE jobs SET status = 'cancelled', finished_at = :now, updated_at = :now"
        f" WHERE id = :id AND status = 'pending' AND owner = :owner RETURNING {JOB_COLUMNS}"
    ),
    "retry": (
        "UPDATE jobs SET status = 'pending', retry_count = 0, available_at = :now, finished_at = NULL,"
        " updated_at = :now WHERE id = :id AND status IN ('failed', 'cancelled')"
        f" RETURNING {JOB_COLUMNS}"
    ),
}


def statements(dialect) -> dict[str, str]:
    """The queue layer's statements, ready for ``dialect``'s driver."""
    merged = {**BASE, **(POSTGRES if dialect.name == "postgresql" else {})}
    return {name: dialect.sql(text.format(**dialect.HINTS)) for name, text in merged.items()}


# -- PostgreSQL: each transition in one statement, history row included -------------------------------

_RETURNING = ", ".join(f"jobs.{c}" for c in JOB_FIELDS)
_EVENT = "INSERT INTO job_events (job_id, at, event, actor, attempt, error) SELECT id, :now, "
# Backoff for retry number n = retry_count + 1 (retry_count is the value before the update):
# d = min(cap, base * 2^(n-1)); wait d/2 + jitter * d/2 (see queuelog.queue.core.backoff_seconds).
_BACKOFF = "make_interval(secs => least(:cap, :base * power(2, retry_count)) * (0.5 + {jitter} * 0.5))"

# Lease expiry: a retryable failure by "system", with its backoff and history row.
_PG_EXPIRE = (
    "UPDATE jobs{lease_index} SET status = CASE WHEN retry_count < max_retries THEN 'pending' ELSE 'failed' END,"
    " finished_at = CASE WHEN retry_count < max_retries THEN NULL ELSE :now END,"
    " retry_count = CASE WHEN retry_count < max_retries THEN retry_count + 1 ELSE retry_count END,"
    f" available_at = CASE WHEN retry_count < max_retries THEN :now + {_BACKOFF.format(jitter='random()')}"
    " ELSE :now END, updated_at = :now, error = :error, lease_token = NULL, lease_expires_at = NULL"
    f" WHERE status = 'running' AND lease_expires_at < :now RETURNING {JOB_COLUMNS}"
)
_PG_EXPIRE_LOG = (
    f"{_EVENT}'lease_expired', 'system', CASE WHEN status = 'pending' THEN retry_count ELSE retry_count + 1 END,"
    " 'lease expired (held by ' || worker_id || ')' FROM x"
)


def _postgres_claim(pick: str) -> str:
    """Settle expired leases, pick and lease jobs, and log both, in one statement. The jobs whose lease
    expired here are pending again from this statement on (the pick, reading the statement's snapshot,
    leaves them for the next claim). Rows come back tagged 'claimed' or 'expired'."""
    return (
        f"WITH x AS ({_PG_EXPIRE}), xe AS ({_PG_EXPIRE_LOG}),"
        f" picked AS ({pick} FOR UPDATE SKIP LOCKED),"
        f" claimed AS (UPDATE jobs SET {_CLAIM_SET} FROM picked WHERE jobs.id = picked.id RETURNING {_RETURNING}),"
        f" logged AS ({_EVENT}'claimed', :worker, retry_count + 1, NULL FROM claimed)"
        f" SELECT 'claimed', {JOB_COLUMNS} FROM claimed UNION ALL SELECT 'expired', {JOB_COLUMNS} FROM x"
    )


POSTGRES = {
    "insert": (
        f"WITH j AS ({BASE['insert']}), e AS ({_EVENT}'enqueued', owner, 0, NULL FROM j) SELECT {JOB_COLUMNS} FROM j"
    ),
    "insert_idempotent": (
        f"WITH j AS ({BASE['insert_idempotent']}), e AS ({_EVENT}'enqueued', owner, 0, NULL FROM j)"
        f" SELECT {JOB_COLUMNS} FROM j"
    ),
    "complete": (
        f"WITH d AS ({BASE['complete']}), e AS ({_EVENT}'completed', :worker, retry_count + 1, NULL FROM d)"
        f" SELECT {JOB_COLUMNS} FROM d"
    ),
    "fail": (
        f"WITH f AS (UPDATE jobs SET status = CASE WHEN {_RETRYING} THEN 'pending' ELSE 'failed' END,"
        f" retry_count = CASE WHEN {_RETRYING} THEN retry_count + 1 ELSE retry_count END,"
        f" finished_at = CASE WHEN {_RETRYING} THEN NULL ELSE :now END,"
        f" available_at = CASE WHEN {_RETRYING} THEN :now + {_BACKOFF.format(jitter=':jitter')} ELSE :now END,"
        " updated_at = :now, error = :error, lease_token = NULL, lease_expires_at = NULL"
        f" WHERE {_HOLDER} RETURNING {JOB_COLUMNS}),"
        f" e AS ({_EVENT}CASE WHEN status = 'pending' THEN 'retry_scheduled' ELSE 'failed' END, :worker,"
        " CASE WHEN status = 'pending' THEN retry_count ELSE retry_count + 1 END, :error FROM f)"
        f" SELECT {JOB_COLUMNS} FROM f"
    ),
    "expire": f"WITH x AS ({_PG_EXPIRE}), xe AS ({_PG_EXPIRE_LOG}) SELECT {JOB_COLUMNS} FROM x",
    "claim": _postgres_claim(PostgresDialect.PICK[False]),
    "claim_typed": _postgres_claim(PostgresDialect.PICK[True]),
    "cancel": (
        f"WITH c AS ({BASE['cancel']}), e AS ({_EVENT}'cancelled', :actor, retry_count, NULL FROM c)"
        f" SELECT {JOB_COLUMNS} FROM c"
    ),
    "cancel_own": (
        f"WITH c AS ({BASE['cancel_own']}), e AS ({_EVENT}'cancelled', :actor, retry_count, NULL FROM c)"
        f" SELECT {JOB_COLUMNS} FROM c"
    ),
    "retry": (
        f"WITH r AS ({BASE['retry']}), e AS ({_EVENT}'retried', :actor, 0, NULL FROM r) SELECT {JOB_COLUMNS} FROM r"
    ),
}
