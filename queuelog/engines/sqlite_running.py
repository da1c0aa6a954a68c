"""The SQLite engine's operations on running jobs (contracts in running.py): cancellation requests, a
worker carrying one out, progress reports and snoozes (docs/running-jobs.md).

Each is one guarded statement in a ``BEGIN IMMEDIATE`` transaction with its history row, as in sqlite.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from queuelog.engines.base import JOB_COLUMNS, JobRecord
from queuelog.engines.records import Unchanged
from queuelog.engines.sqlite_sql import EVENT, bind_time, decode_job

_HOLDER = "id = :id AND status = 'running' AND worker_id = :worker AND lease_token = :token"
_CANCELLING = "cancel_requested_at IS NOT NULL"
REQUEST_CANCEL = {
    own: "UPDATE jobs SET cancel_requested_at = :now, cancel_requested_by = :actor, updated_at = :now"
    f" WHERE id = :id AND status = 'running' AND cancel_requested_at IS NULL{mine} RETURNING {JOB_COLUMNS}"
    for own, mine in ((False, ""), (True, " AND owner = :owner"))
}
# A job whose cancellation was requested ends cancelled; the request is cleared, so that a job retried
# later does not start out cancelled again (its history keeps who asked).
_END_CANCELLED = (
    "status = 'cancelled', finished_at = :now, updated_at = :now, lease_token = NULL, lease_expires_at = NULL,"
    " cancel_requested_at = NULL, cancel_requested_by = NULL"
)
CANCEL_HELD = (
    f"UPDATE jobs SET {_END_CANCELLED}, error = coalesce(:error, error) WHERE {_HOLDER} AND {_CANCELLING}"
    f" RETURNING {JOB_COLUMNS}"
)
# Run before expired leases are settled (EXPIRE), in the same transaction: a job nobody stopped after its
# cancellation was requested is not retried.
EXPIRE_CANCELLED = (
    f"UPDATE jobs INDEXED BY ix_jobs_lease SET {_END_CANCELLED} WHERE status = 'running'"
    f" AND lease_expires_at < :now AND {_CANCELLING} RETURNING {JOB_COLUMNS}"
)
# max(): with app servers whose clocks differ a little, a report still counts for the attempt it is for.
PROGRESS = (
    "UPDATE jobs SET lease_expires_at = :expires, updated_at = :now, progress_percent = :percent,"
    f" progress_note = :message, progress_at = max(:now, claimed_at) WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
)
# Every SET expression reads the row as it was, so each CASE sees the request the statement clears.
SNOOZE = (
    f"UPDATE jobs SET status = CASE WHEN {_CANCELLING} THEN 'cancelled' ELSE 'pending' END,"
    f" finished_at = CASE WHEN {_CANCELLING} THEN :now ELSE NULL END,"
    f" available_at = CASE WHEN {_CANCELLING} THEN available_at ELSE :available_at END,"
    f" snooze_count = CASE WHEN {_CANCELLING} THEN snooze_count ELSE snooze_count + 1 END,"
    " cancel_requested_at = NULL, cancel_requested_by = NULL, updated_at = :now, lease_token = NULL,"
    f" lease_expires_at = NULL WHERE {_HOLDER} AND (snooze_count < :max_snoozes OR {_CANCELLING})"
    f" RETURNING {JOB_COLUMNS}"
)


class SQLiteRunning:
    """``RunningOperations`` on SQLite; ``SQLiteEngine`` provides ``db`` and ``_guarded``."""

    db: Any
    _guarded: Any

    def request_cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        ts = bind_time(now)
        params = {"id": job_id, "now": ts, "actor": actor, "owner": owner}
        with self.db.cursor(write=True) as cur:
            job = self._guarded(cur, REQUEST_CANCEL[owner is not None], params)
            if not isinstance(job, Unchanged):
                cur.execute(EVENT, (job_id, ts, "cancel_requested", actor, job.retry_count + 1, None))
        return job

    def cancel_held(
        self, job_id: int, worker: str, token: str, *, now: datetime, error: str | None = None
    ) -> JobRecord | Unchanged:
        ts = bind_time(now)
        params = {"id": job_id, "worker": worker, "token": token, "now": ts, "error": error}
        with self.db.cursor(write=True) as cur:
            job = self._guarded(cur, CANCEL_HELD, params)
            if not isinstance(job, Unchanged):
                cur.execute(EVENT, (job_id, ts, "cancelled", worker, job.retry_count + 1, error))
        return job

    def _expire_cancelled(self, cur: Any, ts: str) -> None:
        """End cancelled, by ``system``, the running jobs whose cancellation was requested and whose lease
        expired before ``ts``: part of settling expired leases, in its transaction."""
        jobs = [decode_job(row) for row in cur.execute(EXPIRE_CANCELLED, {"now": ts}).fetchall()]
        if jobs:
            cur.executemany(EVENT, [(j.id, ts, "cancelled", "system", j.retry_count + 1, None) for j in jobs])

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
            "now": bind_time(now),
            "expires": bind_time(now + timedelta(seconds=lease_seconds)),
            "percent": percent,
            "message": message,
        }
        with self.db.cursor(write=True) as cur:
            return self._guarded(cur, PROGRESS, params)

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
        ts = bind_time(now)
        params = {
            "id": job_id,
            "worker": worker,
            "token": token,
            "now": ts,
            "available_at": bind_time(now + timedelta(seconds=delay_seconds)),
            "max_snoozes": max_snoozes,
        }
        with self.db.cursor(write=True) as cur:
            job = self._guarded(cur, SNOOZE, params)
            if not isinstance(job, Unchanged):
                event = "cancelled" if job.status == "cancelled" else "snoozed"
                cur.execute(EVENT, (job_id, ts, event, worker, job.retry_count + 1, None))
        return job
