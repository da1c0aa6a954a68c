"""The queue layer's part for workflows (docs/workflows.md): batches of jobs, their callbacks, and jobs added
to a batch by a worker that holds one of its members. Jobs with dependencies are enqueued by ``Queue``
itself (core.py); the database work is the engine's (queuelog/engines/workflows.py).

Policy only: which types may be enqueued (the allowlist and its schemas), which refusal a caller sees.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from queuelog import metrics
from queuelog.engines import Engine, JobRecord
from queuelog.engines.records import (
    BatchConflict,
    BatchRecord,
    Callback,
    DependencyMissing,
    KeyConflict,
    NewBatch,
)
from queuelog.queue.errors import (
    Code,
    IdempotencyKeyReused,
    InvalidState,
    InvalidValues,
    JobNotFound,
    JobValidationError,
    NotLeaseHolder,
    refuse_each,
)
from queuelog.queue.spec import JobSpec
from queuelog.queue.types import ITEM, JobTypeRules
from queuelog.queue.wakeups import Wakeups

MAX_BATCH_JOBS = 1000
MAX_DEPENDENCIES = 100


def dependency_refusal(exc: DependencyMissing, *, listed: bool = True) -> JobValidationError:
    """The 422 naming each dependency that does not exist or that the caller may not see, as
    ``jobs[i].depends_on[j]`` (``depends_on[j]`` for one job enqueued alone: ``listed`` false)."""
    refusals = [
        JobValidationError(
            Code.DEPENDENCY_NOT_FOUND,
            field=f"jobs[{index}].depends_on[{position}]" if listed else f"depends_on[{position}]",
            job_id=job_id,
        )
        for index, position, job_id in exc.missing
    ]
    return InvalidValues(refusals) if len(refusals) > 1 else refusals[0]


class Workflows:
    """Mixed into ``Queue`` (core.py), which provides the engine, the clock and the allowlist."""

    engine: Engine
    clock: Callable[[], datetime]
    types: JobTypeRules
    wakeups: Wakeups

    def create_batch(
        self,
        owner: str,
        specs: list[JobSpec],
        *,
        description: str = "",
        on_success: JobSpec | None = None,
        on_finish: JobSpec | None = None,
        idempotency_key: str | None = None,
        fingerprint: str | None = None,
        scope: str | None = None,
    ) -> tuple[BatchRecord, bool]:
        """Enqueue ``specs`` as one batch, all or none; ``(batch, created)``. A replay of the same key and
        fingerprint answers the batch it made (``created`` False)."""
        refusals = self.types.refusals(specs, ITEM)  # every item's and callback's, all at once
        for name, callback in (("on_success", on_success), ("on_finish", on_finish)):
            if callback is not None:
                refusals += self.types.refusals([callback], f"{name}.".format)  # format ignores the index
        refuse_each(refusals)
        now = self.clock()
        batch = NewBatch(
            description,
            [spec.new_job(now) for spec in specs],
            _callback(on_success),
            _callback(on_finish),
            idempotency_key,
            fingerprint,
        )
        try:
            made, created = self.engine.create_batch(owner, batch, now=now, scope=scope)
        except DependencyMissing as exc:
            raise dependency_refusal(exc) from None
        except BatchConflict as exc:
            raise IdempotencyKeyReused(
                Code.IDEMPOTENCY_KEY_REUSED, field="Idempotency-Key", job_id=exc.batch.id
            ) from None
        except KeyConflict as exc:
            raise IdempotencyKeyReused(
                Code.IDEMPOTENCY_KEY_REUSED, field=f"jobs[{exc.index}].idempotency_key", job_id=exc.job.id
            ) from None
        if created:
            metrics.ENQUEUED.inc(made.total)
            self.wakeups.ready(None, count=made.total)
        return made, created

    def get_batch(self, batch_id: int, *, owner: str | None = None) -> BatchRecord:
        """The batch (only ``owner``'s when given); ``BATCH_NOT_FOUND`` otherwise."""
        batch = self.engine.get_batch(batch_id)
        if batch is None or (owner is not None and batch.owner != owner):
            raise JobNotFound(Code.BATCH_NOT_FOUND, batch_id=batch_id)
        return batch

    def list_batches(
        self,
        *,
        owner: str | None = None,
        status: str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[BatchRecord]:
        """Batches newest first, filtered; ``before_id`` continues a previous page."""
        return self.engine.list_batches(owner=owner, status=status, before_id=before_id, limit=limit)

    def cancel_batch(self, batch_id: int, actor: str, *, owner: str | None = None) -> BatchRecord:
        """Cancel the batch's pending and waiting members; ask the workers of its running ones to stop."""
        batch = self.engine.cancel_batch(batch_id, actor, now=self.clock(), owner=owner)
        if batch is None:
            raise JobNotFound(Code.BATCH_NOT_FOUND, batch_id=batch_id)
        return batch

    def retry_batch(self, batch_id: int, actor: str) -> BatchRecord:
        """Retry the batch's failed and cancelled members (admins); the batch runs again."""
        batch = self.engine.retry_batch(batch_id, actor, now=self.clock())
        if batch is None:
            raise JobNotFound(Code.BATCH_NOT_FOUND, batch_id=batch_id)
        self.wakeups.ready(None, count=batch.total)
        return batch

    def add_to_batch(
        self, batch_id: int, worker: str, lease_token: str, specs: list[JobSpec]
    ) -> list[JobRecord]:
        """Add jobs to a batch, for a worker holding one of its running members under ``lease_token``."""
        self.types.check(specs, listed=True)
        now = self.clock()
        try:
            added = self.engine.add_to_batch(
                batch_id, worker, lease_token, [spec.new_job(now) for spec in specs], now=now
            )
        except DependencyMissing as exc:
            raise dependency_refusal(exc) from None
        if added == "not_holder":
            raise NotLeaseHolder(Code.BATCH_NOT_HELD, batch_id=batch_id)
        if added == "finished":
            raise InvalidState(Code.BATCH_FINISHED, batch_id=batch_id)
        assert not isinstance(added, str)
        metrics.ENQUEUED.inc(len(added))
        self.wakeups.ready(None, count=len(added))
        return added

    def dependents(self, job_id: int, *, limit: int = 100) -> list[int]:
        """The ids of the jobs that depend on ``job_id``, lowest first."""
        return self.engine.dependents(job_id, limit=limit)


def _callback(spec: JobSpec | None) -> Callback | None:
    if spec is None:
        return None
    return Callback(spec.type, spec.payload_json, spec.priority, spec.max_retries)


def batch_fingerprint(body: Any) -> str:
    """The fingerprint of a batch request's body (its parsed JSON, canonical)."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
