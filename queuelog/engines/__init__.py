"""One engine per database behind one interface (``QueueEngine``, base.py): all of the queue's SQL.

``engine_for(db)`` picks the engine from the Database's dialect (``Queue`` does so once): ``SQLiteEngine``
(sqlite.py, sqlite_sql.py) or ``PostgresEngine`` (postgres.py, postgres_sql.py), side by side with the
same method names. reads.py holds the reads, written once over each dialect's statements; records.py what
the engines take and give beside jobs; job_types.py the allowlist's management, shared through the ORM.
"""

from __future__ import annotations

from queuelog.db import Database
from queuelog.engines.base import JOB_COLUMNS, JOB_FIELDS, EventRecord, JobRecord, QueueEngine
from queuelog.engines.records import Backoff, Claimed, KeyConflict, NewJob, Unchanged


def engine_for(db: Database) -> QueueEngine:
    """The engine for ``db``'s database. Cheap: an engine holds nothing but ``db``, and threads may
    share one."""
    if db.dialect == "postgresql":
        from queuelog.engines.postgres import PostgresEngine  # imports psycopg

        return PostgresEngine(db)
    from queuelog.engines.sqlite import SQLiteEngine

    return SQLiteEngine(db)


__all__ = [
    "JOB_COLUMNS",
    "JOB_FIELDS",
    "Backoff",
    "Claimed",
    "EventRecord",
    "JobRecord",
    "KeyConflict",
    "NewJob",
    "QueueEngine",
    "Unchanged",
    "engine_for",
]
