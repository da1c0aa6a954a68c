"""The statements of the console's search, built once for both databases over their ``Dialect`` (the
search itself: shared.py).

A search has two parts. The fields the jobs table has an index for (id, owner, status, type, priority:
``ix_jobs_owner_id``, ``ix_jobs_status_id``, ``ix_jobs_type_id``, the primary key) choose the candidates,
newest first; the other fields (worker, times, error text, a payload field) are checked on the newest
``scan`` candidates only: a first, index-only statement finds the lowest id of that window, and the page's
statement does not go below it. So a search costs at most ``scan`` rows however rare its
matches, and says so when it stopped at the end of its window (docs/console.md#search).

Statements are built per set of fields present and cached; values are always bound. The two dialects
differ in parameter style, JSON access and text search: each engine's ``Dialect`` gives its own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from queuelog.engines.dialect import Dialect
from queuelog.engines.records import JOB_COLUMNS, JobSearch

EXACT = ("id", "owner", "status", "type", "priority", "batch_id")  # batch_id: ix_jobs_batch
STATUS_SETS = {  # the statuses each bulk action applies to (a fixed vocabulary: written into statements)
    "retry": ("failed", "cancelled"),
    "cancel": ("pending", "waiting"),
    "delete": ("completed", "failed", "cancelled"),
}


SCANNED: dict[str, Callable[[Dialect], str]] = {
    "worker": lambda d: f"worker_id = {d.param('worker')}",
    "created_from": lambda d: f"created_at >= {d.param('created_from')}",
    "created_to": lambda d: f"created_at < {d.param('created_to')}",
    "finished_from": lambda d: f"finished_at >= {d.param('finished_from')}",
    "finished_to": lambda d: f"finished_at < {d.param('finished_to')}",
    "error": lambda d: d.error_holds,
    "payload_value": lambda d: d.payload_equals,
}


def present(search: JobSearch) -> tuple[str, ...]:
    """The names of the fields ``search`` looks at (a path without a value looks at nothing)."""
    names = [name for name in (*EXACT, "ids", *SCANNED) if getattr(search, name) is not None]
    if "payload_value" in names and not search.payload_path:
        names.remove("payload_value")
    return tuple(names)


def bind(search: JobSearch, d: Dialect) -> dict[str, Any]:
    """The parameters of ``search``'s statement: times, ids and the payload path as the dialect binds them."""
    params: dict[str, Any] = {}
    for name in present(search):
        value = getattr(search, name)
        params[name] = d.bind_time(value) if name.endswith(("_from", "_to")) else value
    if "ids" in params:
        params["ids"] = d.bind_ids(search.ids or ())
    if "payload_value" in params:
        params["payload_path"] = d.bind_path(search.payload_path)
    return params


def _exact(d: Dialect, names: tuple[str, ...]) -> list[str]:
    ids = [d.ids_among] if "ids" in names else []  # the primary key's index, as ``id`` is
    return [f"{name} = {d.param(name)}" for name in names if name in EXACT] + ids


def _scanned(d: Dialect, names: tuple[str, ...]) -> list[str]:
    return [SCANNED[name](d) for name in names if name in SCANNED]


def _where(conditions: list[str]) -> str:
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def scans(names: tuple[str, ...]) -> bool:
    """Does a search of these fields check any on the window of candidates (or only through indexes)?"""
    return any(name in SCANNED for name in names)


@lru_cache(maxsize=256)
def search_statements(d: Dialect, names: tuple[str, ...], keyset: bool, floor: bool) -> tuple[str, str]:
    """The window's statement (the lowest id and the number of the ``scan`` newest candidates below
    ``before_id``: an index-only walk) and the page's (``limit`` matches, newest first, not below
    ``floor`` when the window was full). Both walk one index from its newest end and stop early, so
    neither reads more than the window."""
    window = _exact(d, names) + ([f"id < {d.param('before_id')}"] if keyset else [])
    ids = f"SELECT id FROM jobs{_where(window)} ORDER BY id DESC LIMIT {d.param('scan')}"
    conditions = window + _scanned(d, names) + ([f"id >= {d.param('floor')}"] if floor else [])
    page = f"SELECT {JOB_COLUMNS} FROM jobs{_where(conditions)} ORDER BY id DESC LIMIT {d.param('limit')}"
    return f"SELECT min(id), count(*) FROM ({ids}) AS w", page


@lru_cache(maxsize=256)
def count_statement(d: Dialect, names: tuple[str, ...], action: str) -> str:
    """How many jobs up to ``ceiling`` match and are in ``action``'s statuses, counting at most ``cap``."""
    statuses = ", ".join(f"'{s}'" for s in STATUS_SETS[action])
    conditions = [
        *_exact(d, names),
        *_scanned(d, names),
        f"status IN ({statuses})",
        f"id <= {d.param('ceiling')}",
    ]
    return f"SELECT count(*) FROM (SELECT 1 FROM jobs{_where(conditions)} LIMIT {d.param('cap')}) AS m"
