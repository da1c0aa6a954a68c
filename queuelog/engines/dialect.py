"""``Dialect``: what the code both engines share (shared.py, search.py) needs to know of one database, typed.

It is the one mechanism for the differences between the databases: each engine's folder builds its own
(``sqlite/sql.py``, ``postgres/sql.py``: ``DIALECT``) from its own statements, parameter style, binders and
decoders, and the shared code reads nothing else. Statements that are not the same on both databases (the
claim, every transition, bulk actions) are not here at all: each engine runs its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from queuelog.engines.records import JobRecord


@dataclass(frozen=True, eq=False)  # hashed by identity: the statement caches of search.py key on it
class Dialect:
    """One database's parameter style, value conversions and the statements of the shared operations."""

    name: str  # the Database's dialect: "sqlite" or "postgresql"
    param: Callable[[str], str]  # a bound parameter by name, in the driver's style

    # -- values: how a parameter is bound, how a column comes back --------------------------------------
    bind_time: Callable[[datetime], Any]
    decode_time: Callable[[Any], Any]  # an aware UTC datetime; None stays None
    decode_job: Callable[[Sequence[Any]], JobRecord]  # a ``jobs`` row in ``JOB_COLUMNS`` order
    bind_json: Callable[[str | None], Any]  # JSON text already serialized
    schema_text: Callable[[Any], str | None]  # a stored payload schema as JSON text, or None
    bind_ids: Callable[[Sequence[int]], Any]  # a list of job ids, as ``ids_among`` takes it
    bind_path: Callable[[Sequence[str]], Any]  # a payload path (keys), as ``payload_equals`` takes it
    minute: str  # ``job_throughput``'s minutes, as strftime writes them

    # -- the reads (shared.py) ----------------------------------------------------------------------------
    get: str
    list_statement: Callable[[tuple[str, ...], bool], str]
    events: str
    counts: Mapping[bool, str]  # by "only one owner's"
    oldest: Mapping[bool, str]
    throughput: Mapping[bool, str]
    failures: str
    job_types: str
    api_key: str
    newest_id: str

    # -- the console's figures (shared.py) ----------------------------------------------------------------
    held_jobs: str
    held_counts: str
    recent_finished: str
    recent_of_type: str
    worker_keys: str

    # -- the search's conditions on the scanned fields (search.py) --------------------------------------
    error_holds: str  # the error contains :error, ASCII case folded
    ids_among: str  # the job is one of :ids
    payload_equals: str  # the payload's value at :payload_path, as text, is :payload_value

    # -- firing a schedule's slot (shared.py) -------------------------------------------------------------
    advance_schedule: str
    touch_schedule: str
    claim_slot: str
    set_slot_job: str
    forget_slots: str
    audit: str
