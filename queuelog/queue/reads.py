"""Reading jobs and their history: what the API's and the pages' lists and job pages show."""

from __future__ import annotations

from typing import Any

from queuelog.queue.dialects import JOB_COLUMNS


class QueueReads:
    """Read-only queries over the jobs; ``Queue`` inherits them (it provides ``db``, ``d`` and ``_sql``)."""

    def get(self, job_id: int) -> dict[str, Any] | None:
        with self.db.cursor() as cur:
            row = self._one(cur, "get", {"id": job_id})
        return None if row is None else self.d.job(row)

    def events(self, job_id: int) -> list[dict[str, Any]]:
        with self.db.cursor() as cur:
            rows = self._all(cur, "events", {"job_id": job_id})
        return [
            {
                "id": r[0],
                "at": self.db.parse_time(r[1]),
                "event": r[2],
                "actor": r[3],
                "attempt": r[4],
                "error": r[5],
            }
            for r in rows
        ]

    def list_jobs(
        self,
        *,
        owner: str | None = None,
        status: str | None = None,
        type: str | None = None,
        priority: int | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Jobs newest first, filtered; ``before_id`` continues a previous page (keyset pagination)."""
        filters = {"owner": owner, "status": status, "type": type, "priority": priority}
        where = [f"{name} = :{name}" for name, value in filters.items() if value is not None]
        params: dict[str, Any] = {name: value for name, value in filters.items() if value is not None}
        if before_id is not None:
            where.append("id < :before_id")
            params["before_id"] = before_id
        params["limit"] = limit
        sql = f"SELECT {JOB_COLUMNS} FROM jobs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT :limit"
        with self.db.cursor() as cur:
            cur.execute(self.d.sql(sql), params)
            rows = cur.fetchall()
        return [self.d.job(row) for row in rows]
