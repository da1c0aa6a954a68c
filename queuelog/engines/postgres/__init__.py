"""The PostgreSQL engine: every statement it runs (sql.py) and the engine that runs them (engine.py).
Importing it imports psycopg."""

from queuelog.engines.postgres.engine import PostgresEngine, make_engine

__all__ = ["PostgresEngine", "make_engine"]
