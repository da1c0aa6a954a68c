"""Keeping held jobs' leases: a heartbeat for each every third of the lease's length."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queuelog.worker.client import LeaseLost, QueueClient, RequestRefused, TransientError

log = logging.getLogger("queuelog.worker")


@dataclass
class Held:
    """A claimed job, from its claim until its report is settled."""

    job: dict[str, Any]
    lost: bool = False  # a heartbeat was refused: the lease expired and the job may run elsewhere


def heartbeat_loop(client: QueueClient, lease_seconds: int, held: Callable[[], list[Held]]) -> None:
    """Extend the lease of every job ``held()`` returns, every ``lease_seconds / 3``; never returns."""
    interval = lease_seconds / 3
    while True:
        time.sleep(interval)
        for entry in held():
            if entry.lost:
                continue
            job_id = entry.job["id"]
            try:
                client.heartbeat(job_id, entry.job["lease_token"], lease_seconds)
            except LeaseLost as exc:
                log.warning("job %s: lease lost (%s); it may run elsewhere too", job_id, exc)
                entry.lost = True
            except (TransientError, RequestRefused) as exc:
                log.warning("heartbeat for job %s failed: %s", job_id, exc)
