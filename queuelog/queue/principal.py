"""Who is acting, and what they may do: the access rules, written once (docs/api.md#authentication-and-errors,
docs/operations.md#api-keys-and-who-may-do-what). The JSON API asks the principal behind the API key, the pages the one behind the login.

- Admins see and may cancel every job (a running one: ask its worker to stop it), see the error text of failed attempts, may use any priority and
  retry failed or cancelled jobs.
- A producer (any user) sees and may cancel its own jobs, with their idempotency keys, up to ``medium``.
- A worker sees only the jobs it holds (running, leased to it), and none of their errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queuelog.models import PRIORITIES
from queuelog.queue.errors import Code, NotAllowed

PRODUCER_MAX_PRIORITY = PRIORITIES["medium"]
ADMIN_MAX_PRIORITY = max(PRIORITIES.values())


@dataclass(frozen=True)
class Principal:
    """A worker key, or a user (through a producer key or a login)."""

    kind: str  # "worker" or "user"
    name: str  # the worker's name (its worker_id), or the username
    role: str | None = None  # for users: "admin" or "producer"

    @classmethod
    def of_user(cls, user: Any) -> Principal:
        """The principal of a logged-in user (a ``User``: its ``username`` and ``role``)."""
        return cls("user", user.username, user.role)

    @property
    def is_admin(self) -> bool:
        return self.kind == "user" and self.role == "admin"

    @property
    def is_worker(self) -> bool:
        return self.kind == "worker"

    @property
    def is_user(self) -> bool:
        """Any user, admin or producer: who may enqueue, list and cancel."""
        return self.kind == "user"

    # -- which jobs ---------------------------------------------------------------------------------------

    @property
    def owner_scope(self) -> str | None:
        """The owner whose jobs lists and counts show: None for an admin (every job), else the user's own."""
        return None if self.is_admin else self.name

    def owns(self, job: Mapping[str, Any]) -> bool:
        return self.is_user and job["owner"] == self.name

    def holds(self, job: Mapping[str, Any]) -> bool:
        """Is this the worker holding the job (running, leased to it)?"""
        return self.is_worker and job["status"] == "running" and job["worker_id"] == self.name

    def may_see(self, job: Mapping[str, Any] | None) -> bool:
        """Admins see every job, users their own, a worker the jobs it holds."""
        return job is not None and (self.is_admin or self.owns(job) or self.holds(job))

    @property
    def sees_errors(self) -> bool:
        """Whether the error text of failed attempts is shown (it may hold what redaction missed)."""
        return self.is_admin

    def sees_idempotency_key(self, job: Mapping[str, Any]) -> bool:
        return self.is_admin or self.owns(job)

    # -- what it may do -----------------------------------------------------------------------------------

    @property
    def priority_ceiling(self) -> int:
        """The highest priority this principal may enqueue at: any for admins, up to medium for others."""
        return ADMIN_MAX_PRIORITY if self.is_admin else PRODUCER_MAX_PRIORITY

    def check_priority(self, priority: int, field: str = "priority") -> None:
        """Refuse (``Code.PRIORITY_NOT_ALLOWED``) a priority above the ceiling."""
        if priority > self.priority_ceiling:
            raise NotAllowed(Code.PRIORITY_NOT_ALLOWED, field=field, ceiling=self.priority_ceiling)

    @property
    def cancel_scope(self) -> str | None:
        """The owner the queue layer limits a cancellation to (None: any job, for admins)."""
        return self.owner_scope

    def may_cancel(self, job: Mapping[str, Any]) -> bool:
        """Admins cancel any pending or waiting job, users their own; likewise they ask for a running
        job's cancellation, once (docs/running-jobs.md)."""
        cancellable = job["status"] in ("pending", "waiting") or (
            job["status"] == "running" and not job["cancel_requested"]
        )
        return cancellable and (self.is_admin or self.owns(job))

    @property
    def may_retry_jobs(self) -> bool:
        """Only admins put failed or cancelled jobs back."""
        return self.is_admin

    def may_retry(self, job: Mapping[str, Any]) -> bool:
        return self.may_retry_jobs and job["status"] in ("failed", "cancelled")
