"""The SQLite engine: every statement it runs (sql.py) and the engine that runs them (engine.py)."""

from queuelog.engines.sqlite.engine import SQLiteEngine, make_engine

__all__ = ["SQLiteEngine", "make_engine"]
