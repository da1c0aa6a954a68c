"""The statements of the console's search, for both databases (the reads themselves: reads.py).

A search has two parts. The fields the jobs table has an index for (id, owner, status, type, priority:
``ix_jobs_owner_id``, ``ix_jobs_status_id``, ``ix_jobs_type_id``, the primary key) choose the candidates,
newest first; the other fields (worker, times, error text, a payload field) are checked on the newest
``scan`` candidates only: a first, index-only statement finds the lowest id of that window, and the page's
statement does not go below it. So a search costs at most ``scan`` rows however rare its
matches, and says so when it stopped at the end of its window (README, The pages).

Statements are built per set of fields present and cached; values are always bound. The two dialects
differ in parameter style, JSON access and text search, hence ``Dialect``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, NamedTuple

from queuelog.engines.base import JOB_COLUMNS
from queuelog.engines.records import JobSearch

EXACT = ("id", "owner", "status", "type", "priority")
STATUS_SETS = {  # the statuses each bulk action applies to (a fixed vocabulary: written into statements)
    "retry": ("failed", "cancelled"),
    "cancel": ("pending",),
    "delete": ("completed", "failed", "cancelled"),
}


class Dialect(NamedTuple):
    name: str

    def p(self, name: str) -> str:
        """A bound parameter."""
        return f":{name}" if self.name == "sqlite" else f"%({name})s"

    def error_holds(self) -> str:
        # Both lower() only fold ASCII on SQLite; instr/strpos take the text literally (no LIKE escapes).
        if self.name == "sqlite":
            return f"instr(lower(error), lower({self.p('error')})) > 0"
        return f"strpos(lower(error), lower({self.p('error')})) > 0"

    def ids_among(self) -> str:
        """The job is one of the given ids (bound as a JSON array on SQLite, an array on PostgreSQL)."""
        if self.name == "sqlite":
            return f"id IN (SELECT value FROM json_each({self.p('ids')}))"
        return f"id = ANY({self.p('ids')})"

    def payload_equals(self) -> str:
        """The payload's value at the path, as text, equals the value: strings as they are, numbers as
        written, true/false; objects, arrays and null never match."""
        path, value = self.p("payload_path"), self.p("payload_value")
        if self.name == "sqlite":
            return (
                f"(CASE json_type(payload, {path}) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'"
                f" WHEN 'object' THEN NULL WHEN 'array' THEN NULL WHEN 'null' THEN NULL"
                f" ELSE CAST(json_extract(payload, {path}) AS TEXT) END) = {value}"
            )
        return (
            f"(CASE jsonb_typeof(payload #> {path}) WHEN 'object' THEN NULL WHEN 'array' THEN NULL"
            f" WHEN 'null' THEN NULL ELSE payload #>> {path} END) = {value}"
        )


SCANNED = {
    "worker": lambda d: f"worker_id = {d.p('worker')}",
    "created_from": lambda d: f"created_at >= {d.p('created_from')}",
    "created_to": lambda d: f"created_at < {d.p('created_to')}",
    "finished_from": lambda d: f"finished_at >= {d.p('finished_from')}",
    "finished_to": lambda d: f"finished_at < {d.p('finished_to')}",
    "error": Dialect.error_holds,
    "payload_value": Dialect.payload_equals,
}


def present(search: JobSearch) -> tuple[str, ...]:
    """The names of the fields ``search`` looks at (a path without a value looks at nothing)."""
    names = [name for name in (*EXACT, "ids", *SCANNED) if getattr(search, name) is not None]
    if "payload_value" in names and not search.payload_path:
        names.remove("payload_value")
    return tuple(names)


def bind(search: JobSearch, dialect: str, bind_time: Any) -> dict[str, Any]:
    """The parameters of ``search``'s statement: times as the database stores them, the payload path as
    SQLite's JSON path (keys quoted) or PostgreSQL's text array."""
    params: dict[str, Any] = {}
    for name in present(search):
        value = getattr(search, name)
        params[name] = bind_time(value) if name.endswith(("_from", "_to")) else value
    if "ids" in params:
        params["ids"] = json.dumps(list(search.ids or ())) if dialect == "sqlite" else list(search.ids or ())
    if "payload_value" in params:
        keys = search.payload_path
        params["payload_path"] = "$" + "".join(f'."{k}"' for k in keys) if dialect == "sqlite" else list(keys)
    return params


def _exact(d: Dialect, names: tuple[str, ...]) -> list[str]:
    ids = [d.ids_among()] if "ids" in names else []  # the primary key's index, as ``id`` is
    return [f"{name} = {d.p(name)}" for name in names if name in EXACT] + ids


def _scanned(d: Dialect, names: tuple[str, ...]) -> list[str]:
    return [SCANNED[name](d) for name in names if name in SCANNED]


def _where(conditions: list[str]) -> str:
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def scans(names: tuple[str, ...]) -> bool:
    """Does a search of these fields check any on the window of candidates (or only through indexes)?"""
    return any(name in SCANNED for name in names)


@lru_cache(maxsize=256)
def search_statements(dialect: str, names: tuple[str, ...], keyset: bool, floor: bool) -> tuple[str, str]:
    """The window's statement (the lowest id and the number of the ``scan`` newest candidates below
    ``before_id``: an index-only walk) and the page's (``limit`` matches, newest first, not below
    ``floor`` when the window was full). Both walk one index from its newest end and stop early, so
    neither reads more than the window."""
    d = Dialect(dialect)
    window = _exact(d, names) + ([f"id < {d.p('before_id')}"] if keyset else [])
    ids = f"SELECT id FROM jobs{_where(window)} ORDER BY id DESC LIMIT {d.p('scan')}"
    conditions = window + _scanned(d, names) + ([f"id >= {d.p('floor')}"] if floor else [])
    page = f"SELECT {JOB_COLUMNS} FROM jobs{_where(conditions)} ORDER BY id DESC LIMIT {d.p('limit')}"
    return f"SELECT min(id), count(*) FROM ({ids}) AS w", page


@lru_cache(maxsize=256)
def count_statement(dialect: str, names: tuple[str, ...], action: str) -> str:
    """How many jobs up to ``ceiling`` match and are in ``action``'s statuses, counting at most ``cap``."""
    d = Dialect(dialect)
    statuses = ", ".join(f"'{s}'" for s in STATUS_SETS[action])
    conditions = [
        *_exact(d, names),
        *_scanned(d, names),
        f"status IN ({statuses})",
        f"id <= {d.p('ceiling')}",
    ]
    return f"SELECT count(*) FROM (SELECT 1 FROM jobs{_where(conditions)} LIMIT {d.p('cap')}) AS m"
