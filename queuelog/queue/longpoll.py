"""Long polls: a claim that waits for work without holding a connection or a transaction."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime

from queuelog.engines import Engine, JobRecord


class LongPolls:
    """``Queue``'s long polls. Enqueues and retries in this process wake waiting long polls at once (a
    condition variable, ``_arrivals``); jobs enqueued by other processes are found by a cheap read-only
    probe every ``poll_interval`` seconds."""

    engine: Engine
    clock: Callable[[], datetime]
    poll_interval: float
    _arrivals: threading.Condition
    claim: Callable[..., list[JobRecord]]

    def _notify_arrival(self) -> None:
        with self._arrivals:
            self._arrivals.notify_all()

    def claim_wait(
        self,
        worker: str,
        *,
        wait_seconds: float,
        types: Iterable[str] | None = None,
        limit: int = 1,
        lease_seconds: int | None = None,
    ) -> list[JobRecord]:
        """Claim; when nothing is claimable, wait up to ``wait_seconds`` for work (a long poll).

        No connection or transaction is held while waiting: the wait is on a condition variable, woken by
        enqueues in this process, with a cheap read-only probe every ``poll_interval`` for the others.
        """
        types = list(types) if types else None
        deadline = time.monotonic() + wait_seconds
        while True:
            jobs = self.claim(worker, types=types, limit=limit, lease_seconds=lease_seconds)
            if jobs or time.monotonic() >= deadline:
                return jobs
            while (remaining := deadline - time.monotonic()) > 0:
                with self._arrivals:
                    self._arrivals.wait(min(self.poll_interval, remaining))
                if self.has_work(types):
                    break

    def has_work(self, types: list[str] | None = None) -> bool:
        """Is anything claimable now (or a lease due to be settled)? A read, no lock."""
        return self.engine.claimable(now=self.clock(), types=types)
