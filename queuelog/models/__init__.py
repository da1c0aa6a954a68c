"""The tables, as typed SQLAlchemy models. Alembic migrations build exactly this schema.

Job state changes never go through these classes: the queue layer (``queuelog.queue``) writes jobs with
guarded SQL. The models serve the admin code, the pages and the migrations' autogenerate check.

One module a topic, all of it importable from here: base.py (column types, constants, ``Base``), people.py,
jobs.py, schedules.py and leases.py.
"""

from queuelog.models.base import (
    BATCH_STATUSES,
    KEY_KINDS,
    PRIORITIES,
    PRIORITY_NAMES,
    ROLES,
    STATUSES,
    Base,
    BigId,
    JsonType,
    Timestamp,
    utcnow,
)
from queuelog.models.jobs import (
    FINISHED,
    Batch,
    ClaimRequest,
    Job,
    JobCount,
    JobDependency,
    JobEvent,
    JobThroughput,
    JobType,
)
from queuelog.models.leases import LeaderLease
from queuelog.models.people import ApiKey, AuditLog, LoginAttempt, User
from queuelog.models.schedules import Schedule, ScheduleFire

__all__ = [
    "BATCH_STATUSES",
    "Batch",
    "JobDependency",
    "ClaimRequest",
    "FINISHED",
    "KEY_KINDS",
    "PRIORITIES",
    "PRIORITY_NAMES",
    "ROLES",
    "STATUSES",
    "ApiKey",
    "AuditLog",
    "Base",
    "BigId",
    "Job",
    "JobCount",
    "JobEvent",
    "JobThroughput",
    "LeaderLease",
    "JobType",
    "JsonType",
    "LoginAttempt",
    "Schedule",
    "ScheduleFire",
    "Timestamp",
    "User",
    "utcnow",
]
