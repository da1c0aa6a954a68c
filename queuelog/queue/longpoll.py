"""Long polls: a claim that waits for work without holding a connection, a transaction or a query."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime

from queuelog.engines import Engine, JobRecord
from queuelog.queue.wakeups import WaitingPollsFull, Wakeups


class LongPolls:
    """``Queue``'s long polls. A waiting long poll sleeps until ``wakeups`` (queue/wakeups.py) wakes it:
    jobs made claimable in this process or another, a due time, or the safety-net probe."""

    engine: Engine
    clock: Callable[[], datetime]
    wakeups: Wakeups
    claim: Callable[..., list[JobRecord]]

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

        While it waits it holds no connection and runs no query: it claims again only when woken. A new
        long poll does not even claim first when a claim for the same types found nothing and no wake-up
        has come since (and signals reach this process). Raises ``WaitingPollsFull`` (after one plain
        claim that found nothing) when this process already has as many waiting long polls as it allows.
        """
        types = sorted(set(types)) if types else None
        key = tuple(types) if types else None
        deadline = time.monotonic() + wait_seconds
        if wait_seconds <= 0:
            return self.claim(worker, types=types, limit=limit, lease_seconds=lease_seconds)
        wakeups = self.wakeups
        try:
            with wakeups.waiting(types) as waiter:
                claim_now = not wakeups.known_empty(key)
                while True:
                    if claim_now:
                        generation = wakeups.generation()
                        waiter.event.clear()  # a wake-up from here on makes the next sleep return at once
                        jobs = self.claim(worker, types=types, limit=limit, lease_seconds=lease_seconds)
                        if jobs:
                            if len(jobs) >= limit:  # there may be more: the next waiter looks
                                wakeups.pass_on(types)
                            return jobs
                        wakeups.found_empty(key, generation)
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return []
                    claim_now = wakeups.sleep(waiter, remaining)
        except WaitingPollsFull:
            jobs = self.claim(worker, types=types, limit=limit, lease_seconds=lease_seconds)
            if jobs:
                return jobs
            raise

    def has_work(self, types: list[str] | None = None) -> bool:
        """Is anything claimable now (or a lease due to be settled)? A read, no lock."""
        return self.engine.claimable(now=self.clock(), types=types)
