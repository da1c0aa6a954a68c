"""The admin console's policy: how far a search looks, and bulk actions in bounded batches.

A bulk action is carried out in batches of ``BATCH`` jobs, each one short transaction in the engine
(``bulk``), so that a large action never holds SQLite's write lock or a PostgreSQL transaction for long.
An action on chosen ids does them all at once (the pages send at most a page of ids). An action on
everything matching a search walks the matches from the newest down, in pages of the search, for at most
``budget`` seconds per call and returns where it stopped: the page that asked shows the count done so far
and a button to go on (docs/console.md#bulk-actions-admins). Jobs enqueued after the confirmation are never touched: the
walk starts at the newest id the confirmation counted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

from queuelog import metrics
from queuelog.engines.records import JobSearch, SearchPage
from queuelog.engines.search import STATUS_SETS
from queuelog.queue.core import Queue

ACTIONS = tuple(STATUS_SETS)  # retry, cancel, delete
BATCH = 500  # jobs per transaction of a bulk action
SCAN = 10_000  # candidates one search page examines at most
COUNT_CAP = 100_000  # a confirmation counts at most this many jobs
BUDGET_SECONDS = 2.0  # how long one request of a bulk action on a search works before it answers


class Progress(NamedTuple):
    """How far a bulk action on a search got: ``done`` jobs changed by this call, and the id to continue
    below (None when every match has been seen)."""

    done: int
    next_before: int | None


class Console:
    """Search and bulk actions over a ``Queue``'s engine."""

    def __init__(self, queue: Queue, *, scan: int = SCAN, budget: float = BUDGET_SECONDS):
        self.queue = queue
        self.engine = queue.engine
        self.scan = scan
        self.budget = budget

    def search(self, search: JobSearch, *, before_id: int | None, limit: int) -> SearchPage:
        """A page of jobs matching ``search``, newest first, examining at most ``scan`` candidates."""
        return self.engine.search(search, before_id=before_id, limit=limit, scan=self.scan)

    def newest_id(self) -> int:
        """The newest job's id (0 when there are none): the ceiling of a bulk action confirmed now."""
        return self.engine.newest_id()

    def count(self, search: JobSearch, action: str, *, ceiling: int) -> int:
        """How many jobs up to ``ceiling`` match and are in a state ``action`` applies to, counting at
        most ``COUNT_CAP + 1``: a count above ``COUNT_CAP`` means "more than ``COUNT_CAP``"."""
        return self.engine.count_matching(search, action=action, ceiling=ceiling, cap=COUNT_CAP + 1)

    def apply(self, action: str, job_ids: Sequence[int], actor: str) -> int:
        """Apply ``action`` to the jobs ``job_ids`` in batches; how many changed. Jobs no longer in a
        state the action applies to are left alone."""
        ids = sorted(set(job_ids), reverse=True)
        return sum(len(self._batch(action, ids[i : i + BATCH], actor)) for i in range(0, len(ids), BATCH))

    def apply_matching(
        self,
        action: str,
        search: JobSearch,
        actor: str,
        *,
        below: int,
    ) -> Progress:
        """Apply ``action`` to the jobs matching ``search`` with ids below ``below``, newest first, for
        about ``budget`` seconds (at least one page of the search); returns how many changed and where
        to continue."""
        if action == "cancel" and search.status is None:
            search = search._replace(status="pending")  # the one status it applies to: use its index
        deadline = time.monotonic() + self.budget
        done, before = 0, below
        while True:
            page = self.search(search, before_id=before, limit=BATCH)
            eligible = [job.id for job in page.jobs if job.status in STATUS_SETS[action]]
            if eligible:
                done += len(self._batch(action, eligible, actor))
            if page.next_before is None:
                return Progress(done, None)
            before = page.next_before
            if time.monotonic() >= deadline:
                return Progress(done, before)

    def _batch(self, action: str, job_ids: Sequence[int], actor: str) -> list[int]:
        changed = self.engine.bulk(action, job_ids, actor, now=self.queue.clock())
        if action == "retry" and changed:
            metrics.RETRIED.inc(len(changed))
            self.queue.wakeups.ready(None, count=len(changed))
        return changed
