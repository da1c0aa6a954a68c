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

import re
import time
from collections.abc import Sequence
from typing import NamedTuple

from queuelog import metrics
from queuelog.engines.records import BulkAudit, JobSearch, SearchPage
from queuelog.engines.search import STATUS_SETS
from queuelog.queue.core import Queue

ACTIONS = tuple(STATUS_SETS)  # retry, cancel, delete
BATCH = 500  # jobs per transaction of a bulk action
SCAN = 10_000  # candidates one search page examines at most
COUNT_CAP = 100_000  # a confirmation counts at most this many jobs
BUDGET_SECONDS = 2.0  # how long one request of a bulk action on a search works before it answers

# What a search may name, the same for the JSON API's GET /jobs and the jobs page (docs/console.md#search):
SEARCH_NAME_CHARS = 64  # an owner, a worker or a type
SEARCH_TEXT_CHARS = 200  # error text, a payload value
PATH_KEYS = 8  # a payload field's keys, each of 1 to SEARCH_NAME_CHARS characters
PATH_PATTERN = (
    rf'^[^."\\]{{1,{SEARCH_NAME_CHARS}}}(?:\.[^."\\]{{1,{SEARCH_NAME_CHARS}}}){{0,{PATH_KEYS - 1}}}$'
)


def payload_path(text: str) -> tuple[str, ...] | None:
    """The keys of a payload field written with dots (``customer.email``), or None when it is not one
    a search takes: 1 to ``PATH_KEYS`` keys, none empty or longer than ``SEARCH_NAME_CHARS``, without
    quotes or backslashes (``PATH_PATTERN``)."""
    return tuple(text.split(".")) if re.fullmatch(PATH_PATTERN, text) else None


def unpaired(path_given: bool, value_given: bool) -> str | None:
    """Which of a payload field's path and value is missing when only the other was given ("path" or
    "value"), or None: a search on a payload field needs both."""
    if path_given == value_given:
        return None
    return "value" if path_given else "path"


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

    def apply(
        self, action: str, job_ids: Sequence[int], actor: str, *, audit: BulkAudit | None = None
    ) -> int:
        """Apply ``action`` to the jobs ``job_ids`` in batches; how many changed. Jobs no longer in a
        state the action applies to are left alone. Each batch writes ``audit``'s row, with the number
        it changed, in its own transaction."""
        ids = sorted(set(job_ids), reverse=True)
        batches = [ids[i : i + BATCH] for i in range(0, len(ids), BATCH)] or [[]]
        return sum(len(self._batch(action, batch, actor, audit)) for batch in batches)

    def apply_matching(
        self,
        action: str,
        search: JobSearch,
        actor: str,
        *,
        below: int,
        audit: BulkAudit | None = None,
    ) -> Progress:
        """Apply ``action`` to the jobs matching ``search`` with ids below ``below``, newest first, for
        about ``budget`` seconds (at least one page of the search); returns how many changed and where
        to continue. Each batch writes ``audit``'s row in its own transaction; a call that found nothing
        to change writes one row that says so (0)."""
        if action == "cancel" and search.status is None and search.batch_id is None:
            search = search._replace(status="pending")  # the status it mostly applies to: use its index
        deadline = time.monotonic() + self.budget
        done, before, batches = 0, below, 0
        while True:
            page = self.search(search, before_id=before, limit=BATCH)
            eligible = [job.id for job in page.jobs if job.status in STATUS_SETS[action]]
            if eligible:
                done += len(self._batch(action, eligible, actor, audit))
                batches += 1
            if page.next_before is None or time.monotonic() >= deadline:
                if not batches:
                    self._batch(action, [], actor, audit)  # the audit row of a step that changed nothing
                return Progress(done, page.next_before)
            before = page.next_before

    def _batch(self, action: str, job_ids: Sequence[int], actor: str, audit: BulkAudit | None) -> list[int]:
        changed = self.engine.bulk(action, job_ids, actor, now=self.queue.clock(), audit=audit)
        if action == "retry" and changed:
            metrics.RETRIED.inc(len(changed))
            self.queue.wakeups.ready(None, count=len(changed))
        return changed
