"""Keeping held jobs' leases: a heartbeat for each every third of the lease's length. A heartbeat also
carries the handler's latest progress report, and tells the handler when the job's cancellation was
requested (docs/running-jobs.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from queuelog.worker.client import LeaseLost, QueueClient, RequestRefused, TransientError

log = logging.getLogger("queuelog.worker")
MAX_PROGRESS_MESSAGE = 200  # characters, as the server allows
PROGRESS_INTERVAL = 1.0  # seconds: a handler's progress reports are sent at most this often


@dataclass
class Held:
    """A claimed job, from its claim until its report is settled."""

    job: dict[str, Any]
    lost: bool = False  # a heartbeat was refused: the lease expired and the job may run elsewhere
    cancel_requested: threading.Event = field(default_factory=threading.Event)
    progress: tuple[int | None, str | None] | None = None  # reported by the handler, not sent yet
    sent_at: float = 0.0  # time.monotonic() of the last heartbeat that was answered
    # One heartbeat of this job at a time (the heartbeat thread's and the handler's), so that they
    # arrive in the order their progress was reported.
    sending: threading.Lock = field(default_factory=threading.Lock)

    def beat(self, client: QueueClient, lease_seconds: int) -> None:
        """Extend the lease, with the progress reported since the last heartbeat. Raises what the
        client raises; LeaseLost marks the job lost."""
        with self.sending:
            progress, self.progress = self.progress, None
            percent, message = progress or (None, None)
            try:
                answer = client.heartbeat(
                    self.job["id"], self.job["lease_token"], lease_seconds, progress=percent, message=message
                )
            except LeaseLost:
                self.lost = True
                raise
            except (TransientError, RequestRefused):
                if self.progress is None:
                    self.progress = progress  # send it with the next heartbeat
                raise
            self.sent_at = time.monotonic()
        if answer.get("cancel_requested") and not self.cancel_requested.is_set():
            # The compact JobState says that it was asked, not by whom (the job's history does).
            log.info("job %s: its cancellation was requested", self.job["id"])
            self.cancel_requested.set()

    def report_progress(
        self, client: QueueClient, lease_seconds: int, percent: int | None, message: str | None
    ) -> None:
        """Keep a handler's progress report; send it now unless one was sent less than
        ``PROGRESS_INTERVAL`` ago (then the next report or heartbeat carries it)."""
        if percent is not None and (type(percent) is not int or not 0 <= percent <= 100):
            raise ValueError(f"progress must be an integer from 0 to 100, not {percent!r}")
        if message is not None and not (
            isinstance(message, str) and 1 <= len(message) <= MAX_PROGRESS_MESSAGE
        ):
            raise ValueError(f"a progress message must be 1 to {MAX_PROGRESS_MESSAGE} characters")
        self.progress = (percent, message)
        if self.lost or time.monotonic() - self.sent_at < PROGRESS_INTERVAL:
            return
        try:
            self.beat(client, lease_seconds)
        except LeaseLost as exc:
            log.warning("job %s: lease lost (%s); it may run elsewhere too", self.job["id"], exc)
        except (TransientError, RequestRefused) as exc:
            log.warning("progress report for job %s failed: %s", self.job["id"], exc)


@dataclass(frozen=True)
class Line:
    """A handler's job's line back to the server (``queuelog.wire.job.Running``): its held entry's flag,
    progress reports and jobs added to its batch, sent through the worker's client."""

    held: Held | None
    client: QueueClient
    lease_seconds: int

    def stop_requested(self) -> bool:
        return self.held is not None and self.held.cancel_requested.is_set()

    def report(self, percent: int | None, message: str | None) -> None:
        if self.held is not None:
            self.held.report_progress(self.client, self.lease_seconds, percent, message)

    def add_to_batch(self, batch_id: int, jobs: list[dict[str, Any]]) -> list[int]:
        if self.held is None:
            raise RuntimeError("this job is no longer held by its worker")
        return self.client.add_to_batch(batch_id, self.held.job["lease_token"], jobs)


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
                entry.beat(client, lease_seconds)
            except LeaseLost as exc:
                log.warning("job %s: lease lost (%s); it may run elsewhere too", job_id, exc)
            except (TransientError, RequestRefused) as exc:
                log.warning("heartbeat for job %s failed: %s", job_id, exc)
