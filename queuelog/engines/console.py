"""The admin console's operations (docs/console.md), which every engine offers beside ``QueueEngine``'s
(queuelog/engines/base.py): searches and bulk actions (``SearchOperations``; the statements in
search_sql.py) and the bounded reads of the workers and figures pages (``ConsoleReads``; reads.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from queuelog.engines.records import FinishedJob, HeldJob, JobSearch, SearchPage, WorkerKeyRow


class SearchOperations(Protocol):
    """The console's reads and bulk writes, which every engine offers beside ``QueueEngine``'s."""

    def search(self, search: JobSearch, *, before_id: int | None, limit: int, scan: int) -> SearchPage:
        """Jobs matching ``search``, newest first, with ids below ``before_id``: at most ``limit`` of
        them, found among at most ``scan`` candidates (the newest rows below ``before_id`` that match the
        indexed fields), so that no search reads more than ``scan`` rows whatever it looks for."""
        ...

    def count_matching(self, search: JobSearch, *, action: str, ceiling: int, cap: int) -> int:
        """How many jobs with ids up to ``ceiling`` match ``search`` and are in a status ``action``
        (``retry``, ``cancel``, ``delete``) applies to, counting at most ``cap`` (a bulk action's
        confirmation)."""
        ...

    def newest_id(self) -> int:
        """The highest job id there is, 0 when there are no jobs."""
        ...

    def bulk(self, action: str, job_ids: Sequence[int], actor: str, *, now: datetime) -> list[int]:
        """Apply ``action`` to the jobs ``job_ids`` in one short transaction and return the ids it
        changed: ``retry`` (failed or cancelled jobs back to pending, retry count 0), ``cancel`` (pending
        jobs) with a history row by ``actor`` for each, or ``delete`` (finished jobs, with their
        history). The status each action needs is part of the statement: a job in another state is left
        alone, whatever happened to it since it was chosen."""
        ...


class ConsoleReads(Protocol):
    """The admin console's reads (the workers page and the per-type figures; docs/console.md), which both
    engines implement beside ``QueueEngine`` (in reads.py). Each is bounded by its ``limit`` (or by the
    running jobs) and served by an index, whatever the size of the jobs table."""

    def held_jobs(self, *, limit: int) -> list[HeldJob]:
        """Running jobs, the soonest lease expiry first (through the partial index of running jobs)."""
        ...

    def held_counts(self) -> dict[str, int]:
        """How many jobs each worker holds now (running jobs only)."""
        ...

    def recent_finished(self, status: str, *, since: datetime, limit: int) -> list[FinishedJob]:
        """The ``limit`` jobs that became ``status`` (completed or failed) most recently, at or after
        ``since``, newest first (through the index on status and finish time)."""
        ...

    def recent_of_type(self, job_type: str, *, limit: int) -> list[FinishedJob]:
        """The ``limit`` newest jobs (highest ids) of ``job_type``, whatever their status, newest first."""
        ...

    def worker_keys(self, *, since: datetime, limit: int) -> list[WorkerKeyRow]:
        """Worker keys used at or after ``since`` (revoked or not), the most recently used first."""
        ...
