"""The allowlist of job types: which names may be enqueued, their payload schemas, pausing."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from sqlalchemy import select

from queuelog.models import JobType, utcnow
from queuelog.queue.errors import JobValidationError

if TYPE_CHECKING:
    from queuelog.db import Database
    from queuelog.queue.spec import JobSpec

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"


@lru_cache(maxsize=256)
def _validator(schema_text: str):
    schema = json.loads(schema_text)
    cls = validators.validator_for(schema)
    return cls(schema)


def check_schema(schema: Any) -> str | None:
    """Return why ``schema`` is not a usable JSON Schema, or None when it is."""
    if not isinstance(schema, dict):
        return "must be a JSON object"
    try:
        validators.validator_for(schema).check_schema(schema)
    except schema_errors.SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    return None


class JobTypeRules:
    """Reads the allowlist and checks specs against it; admin changes go through the same object.

    The allowlist is read at most once per ``ttl`` seconds per process (it is tiny and read on every
    enqueue). A change made through this object takes effect at once in this process; in other app
    processes it takes effect within ``ttl`` seconds.
    """

    def __init__(self, db: Database, ttl: float = 2.0):
        self.db = db
        self.ttl = ttl
        self._cache: tuple[float, dict[str, tuple[bool, str | None]]] | None = None

    def invalidate(self) -> None:
        self._cache = None

    def _load(self) -> dict[str, tuple[bool, str | None]]:
        now = time.monotonic()
        if self._cache is not None and now - self._cache[0] < self.ttl:
            return self._cache[1]
        with self.db.cursor() as cur:
            cur.execute("SELECT name, enabled, payload_schema FROM job_types")
            rows = cur.fetchall()
        out = {}
        for name, enabled, schema in rows:
            if schema is not None and not isinstance(schema, str):
                schema = json.dumps(schema, sort_keys=True)  # jsonb arrives parsed
            out[name] = (bool(enabled), None if schema in (None, "null") else schema)
        self._cache = (now, out)
        return out

    def check(self, specs: Sequence[JobSpec]) -> None:
        """Raise ``JobValidationError`` unless every spec names an enabled type and fits its schema."""
        rules = self._load()
        allowed = sorted(name for name, (enabled, _) in rules.items() if enabled)
        many = len(specs) > 1
        for index, spec in enumerate(specs):
            prefix = f"jobs[{index}]." if many else ""
            enabled, schema = rules.get(spec.type, (False, None))
            if not enabled:
                raise JobValidationError(
                    [
                        {
                            "field": f"{prefix}type",
                            "message": f"unknown or disabled job type {spec.type!r}; allowed: {', '.join(allowed)}",
                            "allowed": allowed,
                        }
                    ]
                )
            if schema is not None:
                error = next(iter(sorted(_validator(schema).iter_errors(spec.payload), key=str)), None)
                if error is not None:
                    path = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
                    raise JobValidationError([{"field": f"{prefix}payload{path}", "message": error.message}])

    # -- management (admins, CLI) -------------------------------------------------------------------

    def all(self) -> list[JobType]:
        with self.db.session() as session:
            return list(session.scalars(select(JobType).order_by(JobType.name)))

    def add(self, name: str, description: str = "", schema: dict | None = None) -> JobType:
        with self.db.session(write=True) as session, session.begin():
            job_type = JobType(name=name, description=description, payload_schema=schema)
            session.add(job_type)
        self.invalidate()
        return job_type

    def update(self, name: str, **changes: Any) -> JobType:
        """Change ``description``, ``payload_schema``, ``enabled`` or ``paused`` of an existing type."""
        with self.db.session(write=True) as session, session.begin():
            job_type = session.scalar(select(JobType).where(JobType.name == name))
            if job_type is None:
                raise LookupError(name)
            for key, value in changes.items():
                setattr(job_type, key, value)
            job_type.updated_at = utcnow()
        self.invalidate()
        return job_type

    def seed(self, names: str) -> None:
        """Fill an empty allowlist from a comma-separated list (``QUEUELOG_JOB_TYPES``)."""
        with self.db.session(write=True) as session, session.begin():
            if session.scalar(select(JobType.id).limit(1)) is not None:
                return
            for name in dict.fromkeys(n.strip() for n in names.split(",") if n.strip()):
                session.add(JobType(name=name, description=""))
        self.invalidate()
