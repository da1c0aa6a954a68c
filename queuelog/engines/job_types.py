"""Managing the allowlist of job types (admins, the command line): both engines share this, because it
goes through the ORM models, which speak either database. The hot read of the allowlist is each engine's
own (``job_types``).

The objects returned are ``JobType`` models, detached from their session: the pages and the command line
read their attributes, and an ``add`` of a taken name raises SQLAlchemy's ``IntegrityError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from queuelog.db import Database
from queuelog.models import AuditLog, JobType, utcnow

if TYPE_CHECKING:
    from queuelog.engines.base import JobTypeAudit, JobTypeChanges


class OrmJobTypes:
    """The job type management operations of ``QueueEngine`` (contracts in base.py)."""

    db: Database

    def all_job_types(self) -> list[JobType]:
        with self.db.session() as session:
            return list(session.scalars(select(JobType).order_by(JobType.name)))

    def add_job_type(
        self, name: str, description: str, schema: dict[str, Any] | None, *, audit: AuditLog | None = None
    ) -> JobType:
        with self.db.session(write=True) as session, session.begin():
            job_type = JobType(name=name, description=description, payload_schema=schema)
            session.add(job_type)
            if audit is not None:
                session.add(audit)
        return job_type

    def update_job_type(
        self, name: str, changes: JobTypeChanges, *, audit: JobTypeAudit | None = None
    ) -> JobType | None:
        with self.db.session(write=True) as session, session.begin():
            # Locked while it changes (PostgreSQL; SQLite's write lock is taken already): a claim spending
            # the rate limit's bucket in between would otherwise keep tokens a changed rate clears, and two
            # admins changing the rate and its period at once would each write the other's old value.
            job_type = session.scalar(select(JobType).where(JobType.name == name).with_for_update())
            if job_type is None:
                return None
            if callable(changes):
                changes = changes(job_type)
            if audit is not None:
                session.add(audit(job_type, changes))
            for key, value in changes.items():
                setattr(job_type, key, value)
            job_type.updated_at = utcnow()
        return job_type

    def seed_job_types(self, names: list[str]) -> bool:
        with self.db.session() as session:  # a read first: a started database needs no write lock here
            if session.scalar(select(JobType.id).limit(1)) is not None:
                return False
        with self.db.session(write=True) as session, session.begin():
            if session.scalar(select(JobType.id).limit(1)) is not None:
                return False
            for name in names:
                session.add(JobType(name=name, description=""))
        return True
