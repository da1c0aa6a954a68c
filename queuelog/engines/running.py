"""The operations on running jobs beyond the lease holder's reports: a person's request to cancel one, the
worker carrying it out, progress reports and snoozes (docs/running-jobs.md).

``QueueEngine`` (base.py) includes this protocol; each engine implements it in a module of its own
(``sqlite_running.py``, ``postgres_running.py``), with every guard inside its one statement.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from queuelog.engines.base import JobRecord
    from queuelog.engines.records import Unchanged


class RunningOperations(Protocol):
    """Cancellation, progress and snoozes of running jobs, as ``QueueEngine`` offers them."""

    def request_cancel(
        self, job_id: int, actor: str, *, now: datetime, owner: str | None = None
    ) -> JobRecord | Unchanged:
        """Record ``actor``'s request to cancel a running job (only ``owner``'s when given) whose
        cancellation was not requested yet; its history gets ``cancel_requested`` by ``actor``. The job
        keeps running until its worker stops it (``cancel_held``), fails or snoozes it (it ends cancelled),
        or its lease expires (it ends cancelled, by ``system``)."""
        ...

    def cancel_held(
        self, job_id: int, worker: str, token: str, *, now: datetime, error: str | None = None
    ) -> JobRecord | Unchanged:
        """End a job ``worker`` holds under ``token`` whose cancellation was requested: cancelled, its
        lease and request cleared, ``cancelled`` by ``worker`` in its history (with ``error`` when the
        worker reported a failure)."""
        ...

    def report_progress(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        lease_seconds: float,
        percent: int | None,
        message: str | None,
    ) -> JobRecord | Unchanged:
        """A heartbeat that also stores the attempt's progress (``percent`` 0..100 and ``message``, either
        None): one guarded statement, no history row."""
        ...

    def snooze(
        self,
        job_id: int,
        worker: str,
        token: str,
        *,
        now: datetime,
        delay_seconds: float,
        max_snoozes: int,
    ) -> JobRecord | Unchanged:
        """Hand a held job back, pending again at ``now + delay_seconds`` with its retry count unchanged
        and its snooze count + 1, when it was snoozed fewer than ``max_snoozes`` times (``snoozed`` in its
        history). A job whose cancellation was requested ends cancelled instead, whatever its count."""
        ...
