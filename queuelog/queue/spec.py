"""What an enqueue asks for, and how long a failed job waits before its next attempt."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from queuelog.engines.records import Backoff, NewJob


@dataclass(frozen=True)
class JobSpec:
    """A validated request to enqueue one job. ``payload_json`` is ``payload`` serialized compactly."""

    type: str
    payload: dict[str, Any]
    payload_json: str
    priority: int = 0
    max_retries: int = 3
    idempotency_key: str | None = None
    run_at: datetime | None = None
    delay_seconds: float | None = None
    # Workflows (docs/workflows.md): existing jobs it waits for; earlier jobs of the same request it waits
    # for (indexes: a batch's refs); "run" to run whatever their outcome (None: a failure cancels it).
    depends_on: tuple[int, ...] = ()
    after: tuple[int, ...] = ()
    on_dependency_failure: str | None = None

    @cached_property
    def fingerprint(self) -> str:
        # The parameters a repeated request must match (IETF Idempotency-Key draft): the delay as given,
        # not the instant it resolves to, so that a retried request with the same body matches.
        canonical = json.dumps(
            [
                self.type,
                self.payload,
                self.priority,
                self.max_retries,
                self.run_at.isoformat() if self.run_at else None,
                self.delay_seconds,
                # only when given, so that the keys of jobs without dependencies match as they always did
                *(
                    [list(self.depends_on), list(self.after), self.on_dependency_failure]
                    if self._waits
                    else []
                ),
            ],
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def _waits(self) -> bool:
        return bool(self.depends_on or self.after or self.on_dependency_failure)

    def new_job(self, now: datetime) -> NewJob:
        """The job to insert at ``now``. A ``run_at`` in the past counts as now, so that nobody jumps the
        queue by backdating (docs/concepts.md#claim-order); the fingerprint goes with an idempotency key only."""
        if self.run_at is not None:
            available = max(self.run_at, now)
        elif self.delay_seconds:
            available = now + timedelta(seconds=self.delay_seconds)
        else:
            available = now
        fingerprint = self.fingerprint if self.idempotency_key else None
        return NewJob(
            self.type,
            self.payload_json,
            self.priority,
            self.max_retries,
            self.idempotency_key,
            fingerprint,
            available,
            self.depends_on,
            self.after,
            self.on_dependency_failure,
        )


def backoff_seconds(
    retry_count: int, base: float, cap: float, rand: Callable[[], float] = random.random
) -> float:
    """Delay before retry number ``retry_count`` (1 for the first retry).

    ``d = min(cap, base * 2 ** (retry_count - 1))``, then "equal jitter": half of ``d`` plus a random part
    of the other half, so retries spread out but never come sooner than ``d / 2``. ``base = 0`` retries at once.
    The engines receive the same parameters as a ``Backoff``.
    """
    return Backoff(base, cap, rand).seconds(retry_count)
