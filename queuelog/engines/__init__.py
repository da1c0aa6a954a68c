"""One engine per database behind one interface: all of the queue's SQL.

- engine.py: ``Engine``, the protocol the queue layer holds, in sections (jobs, running jobs, reads and
  search, console figures, bulk actions, schedules, the allowlist); records.py: the records it speaks in.
- sqlite/ and postgres/: one implementation per database, each with every statement it runs (sql.py) and
  the engine that runs them (engine.py). ``engine_for(db)`` picks one from the Database's dialect
  (``Queue`` does so once).
- dialect.py: ``Dialect``, what the shared code needs to know of a database; shared.py: the operations
  that are the same on both (the reads, the console's search and figures, the allowlist's and the
  schedules' management, firing a schedule's slot), written once over it; search.py: the search's
  statements, built over it.
"""

from __future__ import annotations

from queuelog.db import Database
from queuelog.engines.engine import Engine
from queuelog.engines.records import (
    JOB_COLUMNS,
    JOB_FIELDS,
    Backoff,
    Claimed,
    EventRecord,
    JobRecord,
    KeyConflict,
    KeyRow,
    NewJob,
    ReportedJob,
    Unchanged,
)


def engine_for(db: Database) -> Engine:
    """The engine for ``db``'s database. Cheap: an engine holds nothing but ``db``, and threads may
    share one."""
    if db.dialect == "postgresql":
        from queuelog.engines.postgres import make_engine  # imports psycopg

        return make_engine(db)
    from queuelog.engines.sqlite import make_engine as make_sqlite_engine

    return make_sqlite_engine(db)


__all__ = [
    "JOB_COLUMNS",
    "JOB_FIELDS",
    "Backoff",
    "Claimed",
    "Engine",
    "EventRecord",
    "JobRecord",
    "KeyConflict",
    "KeyRow",
    "NewJob",
    "ReportedJob",
    "Unchanged",
    "engine_for",
]
