"""The PostgreSQL engine's operations on running jobs (contracts in running.py): cancellation requests, a
worker carrying one out, progress reports and snoozes (docs/running-jobs.md).

Each is one autocommitted statement that writes its own history row (a data-modifying CTE), as in
postgres_sql.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from queuelog.engines.base import JOB_COLUMNS, JobRecord
from queuelog.engines.postgres import retry_aborted
from queuelog.engines.postgres_sql import LOCK_LIMITED
from queuelog.engines.records import Unchanged

_HOLDER = "id = %(id)s AND status = 'running' AND worker_id = %(worker)s AND lease_token = %(token)s"
_EVENT = "INSERT INTO job_events (job_id, at, event, actor, attempt, error) SELECT id, %(now)s, "
_CANCELLING = "cancel_requested_at IS NOT NULL"
REQUEST_CANCEL = {
    own: "WITH r AS (UPDATE jobs SET cancel_requested_at = %(now)s, cancel_requested_by = %(actor)s,"
    " updated_at = %(now)s WHERE id = %(id)s AND status = 'running' AND cancel_requested_at IS NULL"
    f"{mine} RETURNING {JOB_COLUMNS}), e AS ({_EVENT}'cancel_requested', %(actor)s, retry_count + 1, NULL"
    f" FROM r) SELECT {JOB_COLUMNS} FROM r"
    for own, mine in ((False, ""), (True, " AND owner = %(owner)s"))
}
# A job whose cancellation was requested ends cancelled; the request is cleared, so that a job retried
# later does not start out cancelled again (its history keeps who asked).
_END_CANCELLED = (
    "status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s, lease_token = NULL,"
    " lease_expires_at = NULL, cancel_requested_at = NULL, cancel_requested_by = NULL"
)
CANCEL_HELD = (
    f"WITH c AS (UPDATE jobs SET {_END_CANCELLED}, error = coalesce(%(error)s, error)"
    f" WHERE {_HOLDER} AND {_CANCELLING} RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}'cancelled', %(worker)s, retry_count + 1, %(error)s FROM c) SELECT {JOB_COLUMNS} FROM c"
)
# Run just before expired leases are settled (EXPIRE, CLAIM), with the same time: a job nobody stopped
# after its cancellation was requested is not retried.
_SETTLE_CANCELLED = (
    f"WITH x AS (UPDATE jobs SET {_END_CANCELLED} WHERE status = 'running' AND lease_expires_at < %(now)s"
    f" AND {_CANCELLING} RETURNING {JOB_COLUMNS}),"
    f" xe AS ({_EVENT}'cancelled', 'system', retry_count + 1, NULL FROM x)"
)
EXPIRE_CANCELLED = f"{_SETTLE_CANCELLED} SELECT {JOB_COLUMNS} FROM x"
# The claim's first statement: the same, and the limited types' rows locked (LOCK_LIMITED), in one
# statement of the claim's transaction; the claim statement that follows sees both (docs/flow-control.md).
SETTLE_AND_LOCK = {typed: f"{_SETTLE_CANCELLED} {lock}" for typed, lock in LOCK_LIMITED.items()}
# greatest(): with app servers whose clocks differ a little, a report still counts for its attempt.
PROGRESS = (
    "UPDATE jobs SET lease_expires_at = %(expires)s, updated_at = %(now)s, progress_percent = %(percent)s,"
    " progress_note = %(message)s, progress_at = greatest(%(now)s, claimed_at)"
    f" WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
)
# Every SET expression reads the row as it was, so each CASE sees the request the statement clears.
SNOOZE = (
    f"WITH s AS (UPDATE jobs SET status = CASE WHEN {_CANCELLING} THEN 'cancelled' ELSE 'pending' END,"
    f" finished_at = CASE WHEN {_CANCELLING} THEN %(now)s END,"
    f" available_at = CASE WHEN {_CANCELLING} THEN available_at ELSE %(available_at)s END,"
    f" snooze_count = CASE WHEN {_CANCELLING} THEN snooze_count ELSE snooze_count + 1 END,"
    " cancel_requested_at = NULL, cancel_requested_by = NULL, updated_at = %(now)s, lease_token = NULL,"
    f" lease_expires_at = NULL WHERE {_HOLDER} AND (snooze_count < %(max_snoozes)s OR {_CANCELLING})"
    f" RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}CASE WHEN status = 'cancelled' THEN 'cancelled' ELSE 'snoozed' END, %(worker)s,"
    f" retry_count + 1, NULL FROM s) SELECT {JOB_COLUMNS} FROM s"
)


class PostgresRunning:
    """``RunningOperations`` on PostgreSQL; ``PostgresEngine`` provides ``_guarded``."""

    _guarded: Any

    @retry_aborted
    def request_cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        params = {"id": job_id, "now": now, "actor": actor, "owner": owner}
        return self._guarded(REQUEST_CANCEL[owner is not None], params)

    @retry_aborted
    def cancel_held(
        self, job_id: int, worker: str, token: str, *, now: datetime, error: str | None = None
    ) -> JobRecord | Unchanged:
        params = {"id": job_id, "worker": worker, "token": token, "now": now, "error": error}
        return self._guarded(CANCEL_HELD, params)

    @retry_aborted
    def report_progress(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        lease_seconds: float,
        percent: int | None,
        message: str | None,
    ) -> JobRecord | Unchanged:
        params = {
            "id": job_id,
            "worker": worker,
            "token": token,
            "now": now,
            "expires": now + timedelta(seconds=lease_seconds),
            "percent": percent,
            "message": message,
        }
        return self._guarded(PROGRESS, params)

    @retry_aborted
    def snooze(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        delay_seconds: float,
        max_snoozes: int,
    ) -> JobRecord | Unchanged:
        params = {
            "id": job_id,
            "worker": worker,
            "token": token,
            "now": now,
            "available_at": now + timedelta(seconds=delay_seconds),
            "max_snoozes": max_snoozes,
        }
        return self._guarded(SNOOZE, params)
