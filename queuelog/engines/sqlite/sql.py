"""Every statement of the SQLite engine, its binding and row decoding, and its ``DIALECT`` for the shared
operations (the engine itself: engine.py; the shared operations: queuelog/engines/shared.py).

Times are stored as text in the format SQLAlchemy's DateTime uses on SQLite (sortable, UTC), so that the
ORM and the engine read each other's rows; JSON as text. Statements go to sqlite3 as written, with its
own ``:name`` parameters. The claim picks jobs in the order of the partial index ``ix_jobs_claim``:
priority (highest first), then ``available_at``, then ``id``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from queuelog.engines.dialect import Dialect
from queuelog.engines.records import BATCH_COLUMNS, JOB_COLUMNS, JOB_FIELDS, JobRecord
from queuelog.engines.workflows import Flows

_HOLDER = "id = :id AND status = 'running' AND worker_id = :worker AND lease_token = :token"
_RETRYING = ":retryable = 1 AND retry_count < max_retries"
_NEW = (
    "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, idempotency_key,"
    " fingerprint, owner, available_at, created_at, updated_at) VALUES (:type, :payload, :priority,"
    " 'pending', 0, :max_retries, :key, :fingerprint, :owner, :available_at, :now, :now)"
)
INSERT = f"{_NEW} RETURNING {JOB_COLUMNS}"
INSERT_IDEMPOTENT = f"{_NEW} ON CONFLICT DO NOTHING RETURNING {JOB_COLUMNS}"
BY_KEY = f"SELECT {JOB_COLUMNS}, fingerprint FROM jobs WHERE owner = :owner AND idempotency_key = :key"
# History rows are bound as tuples (job_id, at, event, actor, attempt, error): executemany takes them as
# they are built.
EVENT = "INSERT INTO job_events (job_id, at, event, actor, attempt, error) VALUES (?, ?, ?, ?, ?, ?)"
# The history rows of one transition of many jobs (an enqueue, claim or completion of a batch): alike but
# for each job's id and attempt, which arrive as one JSON array of [job_id, attempt] pairs. One statement
# costs about half of executemany's binding row by row (100 rows: 93 against 168 us, the array's building
# included), while the writers' lock is held.
EVENTS_ALIKE = (
    "INSERT INTO job_events (job_id, at, event, actor, attempt, error) SELECT json_extract(value, '$[0]'),"
    " :at, :event, :actor, json_extract(value, '$[1]'), NULL FROM json_each(:jobs)"
)

# Flow control (docs/flow-control.md). A limited type's room is how many of its jobs one claim may take
# now: its concurrency limit less its running jobs (counted in the partial index ix_jobs_running_type), and the
# whole tokens of its rate limit's bucket, refilled for the time since it was last spent. Only limited types
# are counted; the write lock is held, so the count and the claim see the same rows.
# Seconds since the bucket was last spent, to the millisecond: julianday() differences carry about 40 µs
# of rounding error, which would make a refill due at exactly :now come a little short.
_SINCE = "max(0.0, round((julianday(:now) - julianday(coalesce(rate_checked_at, :now))) * 86400.0, 3))"
TOKENS = f"min(rate_limit, coalesce(rate_tokens, rate_limit) + {_SINCE} * rate_limit / rate_period)"
_RUNNING = "(SELECT count(*) FROM jobs r INDEXED BY ix_jobs_running_type WHERE r.status = 'running' AND r.type = t.name)"
_UNLIMITED = "1000000000"
_LIMITED = "concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL"
_ROOM_OF = f"min(coalesce(concurrency_limit - {_RUNNING}, {_UNLIMITED}), coalesce(CAST({TOKENS} AS INTEGER), {_UNLIMITED}))"
_ROOM = f"room AS MATERIALIZED (SELECT name, {_ROOM_OF} AS room FROM job_types t WHERE {_LIMITED})"
# The types passed over: paused ones, and (while any type has a limit) those without room.
_PAUSED = "SELECT name FROM job_types WHERE paused = 1"
_HELD = {False: _PAUSED, True: f"{_PAUSED} UNION ALL SELECT name FROM room WHERE room < 1"}
# A batch takes at most a type's room of its jobs (the window), so it may bring fewer jobs than asked.
_WITHIN_ROOM = (
    "SELECT id FROM (SELECT id, type, row_number() OVER (PARTITION BY type ORDER BY priority DESC, available_at, id)"
    " AS n FROM ({picked})) AS c WHERE n <= coalesce((SELECT room FROM room WHERE name = c.type), n)"
)
_CLAIM = (
    "UPDATE jobs SET status = 'running', worker_id = :worker, lease_token = :token, claimed_at = :now,"
    " lease_expires_at = :expires, updated_at = :now WHERE id IN ({picked}) AND +status = 'pending'"
    f" RETURNING {JOB_COLUMNS}"
)
# The claim, in claim order, two ways; the write lock is held (BEGIN IMMEDIATE), so the pick and the
# update see the same rows, and `+status` keeps the status index out of the outer condition (docs/performance.md#claims-stay-flat-at-any-backlog). Without statistics SQLite would take ix_jobs_status_id for `status = 'pending'` and sort
# every pending row: naming the partial indexes keeps a claim's cost flat at any backlog.
#
# In order: down ix_jobs_claim, passing over the jobs of paused types and of types without room. Its cost
# is one seek while no pending job is of such a type, which the claim's probe (CLAIM_PROBE) checks first;
# otherwise it would read every such job that comes first in claim order, row by row.
_IN_ORDER = (
    "SELECT {columns} FROM jobs INDEXED BY ix_jobs_claim WHERE status = 'pending' AND available_at <= :now"
    " AND type NOT IN ({held}) ORDER BY priority DESC, available_at, id LIMIT :limit"
)
# By type: the claim order of each type's pending jobs (ix_jobs_claim_by_type), merged. The types taken
# are a worker's list, or every type with a pending job, found by skipping through the index one type at
# a time; a paused type or one without room is passed over without reading its jobs. SQLite merges the
# types' runs in its sorter and stops reading each type's run once it can no longer make the first :limit
# (tests/engines/test_sqlite_plans.py counts the work), so a claim costs a seek or two per type, however
# many jobs wait.
_KINDS = {
    False: "kinds(name) AS (SELECT (SELECT type FROM jobs INDEXED BY ix_jobs_claim_by_type WHERE status = 'pending'"
    " ORDER BY type LIMIT 1) UNION ALL SELECT (SELECT type FROM jobs INDEXED BY ix_jobs_claim_by_type"
    " WHERE status = 'pending' AND type > kinds.name ORDER BY type LIMIT 1) FROM kinds WHERE name IS NOT NULL)",
    True: "kinds(name) AS (SELECT DISTINCT value FROM json_each(:types))",
}
_BY_TYPE = (
    "SELECT {columns} FROM kinds JOIN jobs AS j INDEXED BY ix_jobs_claim_by_type ON j.type = kinds.name"
    f" WHERE j.status = 'pending' AND j.available_at <= :now AND kinds.name NOT IN ({_HELD[True]})"
    " ORDER BY j.priority DESC, j.available_at, j.id LIMIT :limit"
)
CLAIM_BY_TYPE = {
    typed: f"WITH RECURSIVE {_ROOM}, {kinds} "
    + _CLAIM.format(
        picked=_WITHIN_ROOM.format(picked=_BY_TYPE.format(columns="j.id, j.type, j.priority, j.available_at"))
    )
    for typed, kinds in _KINDS.items()
}
# CLAIM_IN_ORDER[limited]. While no type has a limit (the claim reads LIMITED under the write lock, so
# that no limit can be set in between), the claim passes over paused types only, and costs what it did
# before flow control.
CLAIM_IN_ORDER = {
    True: f"WITH {_ROOM} "
    + _CLAIM.format(
        picked=_WITHIN_ROOM.format(
            picked=_IN_ORDER.format(columns="id, type, priority, available_at", held=_HELD[True])
        )
    ),
    False: _CLAIM.format(picked=_IN_ORDER.format(columns="id", held=_HELD[False])),
}
LIMITED = f"SELECT 1 FROM job_types WHERE {_LIMITED} LIMIT 1"
# A pending job of a paused type or of a type without room: the claim in order would read past it.
WAITING = (
    f"SELECT 1 FROM job_types t WHERE (paused = 1 OR (({_LIMITED}) AND {_ROOM_OF} < 1)) AND EXISTS (SELECT 1"
    " FROM jobs INDEXED BY ix_jobs_claim_by_type WHERE status = 'pending' AND type = t.name)"
)
# After a claim, in its transaction: the rate-limited types among the jobs taken (a JSON array of their
# types, one per job) spend one token per job from their refilled bucket.
SPEND = (
    f"UPDATE job_types AS t SET rate_tokens = {TOKENS} - (SELECT count(*) FROM json_each(:taken) WHERE value = t.name),"
    " rate_checked_at = max(coalesce(rate_checked_at, :now), :now)"  # a server whose clock is behind: never back
    " WHERE rate_limit IS NOT NULL AND name IN (SELECT value FROM json_each(:taken))"
)
# An expired lease is a retryable failure by the system; the backoff is added per row afterwards.
EXPIRE = (
    "UPDATE jobs INDEXED BY ix_jobs_lease"
    " SET status = CASE WHEN retry_count < max_retries THEN 'pending' ELSE 'failed' END,"
    " finished_at = CASE WHEN retry_count < max_retries THEN NULL ELSE :now END,"
    " retry_count = CASE WHEN retry_count < max_retries THEN retry_count + 1 ELSE retry_count END,"
    " available_at = :now, updated_at = :now, error = 'lease expired', lease_token = NULL,"
    f" lease_expires_at = NULL WHERE status = 'running' AND lease_expires_at < :now RETURNING {JOB_COLUMNS}"
)
LEASE_DUE = "SELECT id FROM jobs INDEXED BY ix_jobs_lease WHERE status = 'running' AND lease_expires_at < :now LIMIT 1"
# Whether a claim now would find a job (by type) or a lease to settle: the long poll's safety-net probe,
# one read without the write lock.
CLAIMABLE = {
    typed: f"WITH RECURSIVE {_ROOM}, {kinds} SELECT EXISTS ({_BY_TYPE.format(columns='j.id')}) OR EXISTS ({LEASE_DUE})"
    for typed, kinds in _KINDS.items()
}
# What a claim needs to know before it picks, in one statement: whether any lease has run out (almost never:
# then neither EXPIRE_CANCELLED nor EXPIRE runs), whether any type has a limit (LIMITED), and whether the
# claim in order would have jobs to pass over (WAITING).
CLAIM_PROBE = f"SELECT EXISTS ({LEASE_DUE}), EXISTS ({LIMITED}), EXISTS ({WAITING})"
SET_AVAILABLE = "UPDATE jobs SET available_at = :available_at WHERE id = :id"
COMPLETE = (
    "UPDATE jobs SET status = 'completed', result = :result, error = NULL, finished_at = :now, updated_at = :now,"
    f" reported_token = :token, lease_token = NULL, lease_expires_at = NULL WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
)
# A whole batch in one statement: the items arrive as one JSON array of [id, lease_token, result] and
# are joined to the jobs they name by primary key (the "+" keeps the status index out of it).
_COMPLETE_ITEMS = (
    "UPDATE jobs SET status = 'completed', result = b.result, error = NULL, finished_at = :now, updated_at = :now,"
    " reported_token = b.token, lease_token = NULL, lease_expires_at = NULL FROM (SELECT"
    " json_extract(value, '$[0]') AS id,"
    " json_extract(value, '$[1]') AS token, json_extract(value, '$[2]') AS result FROM json_each(:items)) AS b"
    " WHERE jobs.id = b.id AND +jobs.status = 'running' AND +jobs.worker_id = :worker"
    " AND jobs.lease_token = b.token RETURNING "
)
COMPLETE_MANY = _COMPLETE_ITEMS + ", ".join(f"jobs.{c}" for c in JOB_FIELDS)
# The same for a caller that needs no job back (a compact answer): only what the history row, the answer
# and the workflows need. Each column a RETURNING carries is materialized while the writers' lock is held:
# all 30 cost a batch of 100 about 0.22 ms more (docs/performance.md#writes-one-transaction-one-round-trip).
EACH_FIELDS = ("id", "status", "retry_count", "dependents", "batch_id")
COMPLETE_EACH = _COMPLETE_ITEMS + ", ".join(f"jobs.{c}" for c in EACH_FIELDS)
HEARTBEAT = (
    f"UPDATE jobs SET lease_expires_at = :expires, updated_at = :now WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
)
# A failure of a job whose cancellation was requested (docs/running-jobs.md) ends it cancelled, never
# retried, in the same statement: a failure nobody asked to cancel costs nothing more. Every SET expression
# reads the row as it was, so each CASE sees the request the statement clears.
_CANCELLING = "cancel_requested_at IS NOT NULL"
_RETRY = f"cancel_requested_at IS NULL AND {_RETRYING}"
FAIL = (
    f"UPDATE jobs SET status = CASE WHEN {_CANCELLING} THEN 'cancelled' WHEN {_RETRYING} THEN 'pending'"
    " ELSE 'failed' END,"
    f" retry_count = CASE WHEN {_RETRY} THEN retry_count + 1 ELSE retry_count END,"
    f" finished_at = CASE WHEN {_RETRY} THEN NULL ELSE :now END,"
    " cancel_requested_at = NULL, cancel_requested_by = NULL,"
    " available_at = :now, updated_at = :now, error = :error, reported_token = :token, lease_token = NULL,"
    f" lease_expires_at = NULL WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
)
# A waiting job (docs/workflows.md) is cancelled like a pending one.
_CANCEL = (
    "UPDATE jobs SET status = 'cancelled', finished_at = :now, updated_at = :now, waiting_on = NULL"
    " WHERE id = :id AND status IN ('pending', 'waiting')"
)
CANCEL = {
    False: f"{_CANCEL} RETURNING {JOB_COLUMNS}",
    True: f"{_CANCEL} AND owner = :owner RETURNING {JOB_COLUMNS}",
}
# A job with dependencies waits on them again (docs/workflows.md); the engine then releases it at once
# when they are all finished.
_AGAIN = "CASE WHEN depends_on IS NULL THEN 'pending' ELSE 'waiting' END"
RETRY = (
    f"UPDATE jobs SET status = {_AGAIN}, retry_count = 0, available_at = :now, finished_at = NULL,"
    f" updated_at = :now WHERE id = :id AND status IN ('failed', 'cancelled') RETURNING {JOB_COLUMNS}"
)
# A batch of old finished jobs, through the partial index ix_jobs_finished (named: without statistics
# SQLite would take ix_jobs_status_id and sort), in the index's order: the history and the jobs are deleted
# by two statements of one write transaction, which therefore pick the same jobs.
_PRUNABLE = (
    "SELECT id FROM jobs INDEXED BY ix_jobs_finished WHERE status IN ('completed', 'failed', 'cancelled')"
    " AND finished_at < :cutoff ORDER BY finished_at, id LIMIT :batch"
)
PRUNE_HISTORY = f"DELETE FROM job_events WHERE job_id IN ({_PRUNABLE})"
PRUNE_DEPENDENCIES = f"DELETE FROM job_dependencies WHERE job_id IN ({_PRUNABLE})"  # docs/workflows.md
PRUNE = f"DELETE FROM jobs WHERE id IN ({_PRUNABLE})"
PRUNE_THROUGHPUT = "DELETE FROM job_throughput WHERE minute < :minute"


# -- running jobs (docs/running-jobs.md): each one guarded statement, with its history row ----------

REQUEST_CANCEL = {
    own: "UPDATE jobs SET cancel_requested_at = :now, cancel_requested_by = :actor, updated_at = :now"
    f" WHERE id = :id AND status = 'running' AND cancel_requested_at IS NULL{mine} RETURNING {JOB_COLUMNS}"
    for own, mine in ((False, ""), (True, " AND owner = :owner"))
}
# A job whose cancellation was requested ends cancelled; the request is cleared, so that a job retried
# later does not start out cancelled again (its history keeps who asked).
_END_CANCELLED = (
    "status = 'cancelled', finished_at = :now, updated_at = :now, lease_token = NULL, lease_expires_at = NULL,"
    " cancel_requested_at = NULL, cancel_requested_by = NULL"
)
CANCEL_HELD = (
    f"UPDATE jobs SET {_END_CANCELLED}, error = coalesce(:error, error) WHERE {_HOLDER} AND {_CANCELLING}"
    f" RETURNING {JOB_COLUMNS}"
)
# Run before expired leases are settled (EXPIRE), in the same transaction: a job nobody stopped after its
# cancellation was requested is not retried.
EXPIRE_CANCELLED = (
    f"UPDATE jobs INDEXED BY ix_jobs_lease SET {_END_CANCELLED} WHERE status = 'running'"
    f" AND lease_expires_at < :now AND {_CANCELLING} RETURNING {JOB_COLUMNS}"
)
# max(): with app servers whose clocks differ a little, a report still counts for the attempt it is for.
PROGRESS = (
    "UPDATE jobs SET lease_expires_at = :expires, updated_at = :now, progress_percent = :percent,"
    f" progress_note = :message, progress_at = max(:now, claimed_at) WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
)
# Every SET expression reads the row as it was, so each CASE sees the request the statement clears.
SNOOZE = (
    f"UPDATE jobs SET status = CASE WHEN {_CANCELLING} THEN 'cancelled' ELSE 'pending' END,"
    f" finished_at = CASE WHEN {_CANCELLING} THEN :now ELSE NULL END,"
    f" available_at = CASE WHEN {_CANCELLING} THEN available_at ELSE :available_at END,"
    f" snooze_count = CASE WHEN {_CANCELLING} THEN snooze_count ELSE snooze_count + 1 END,"
    " cancel_requested_at = NULL, cancel_requested_by = NULL, updated_at = :now, lease_token = NULL,"
    f" lease_expires_at = NULL WHERE {_HOLDER} AND (snooze_count < :max_snoozes OR {_CANCELLING})"
    f" RETURNING {JOB_COLUMNS}"
)


def bind_json(text: str | None) -> str | None:
    """A JSON document the caller has already serialized: stored as the text it is."""
    return text


def bind_items(items: Sequence[tuple[int, str, str | None]]) -> dict[str, str]:
    """``COMPLETE_MANY``'s parameter: the results are JSON text already, spliced in, not parsed again."""
    parts = (f"[{int(i)},{json.dumps(token)},{result or 'null'}]" for i, token, result in items)
    return {"items": "[" + ",".join(parts) + "]"}


GET = f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = :id"
# A report its guard refused: the job, and whether the refused report repeats the one that ended the
# attempt (the same worker and lease token, the job no longer running): then it answers as that one did.
REPORTED = (
    f"SELECT {JOB_COLUMNS}, coalesce(reported_token = :token AND worker_id = :worker AND status <> 'running', 0)"
    " FROM jobs WHERE id = :id"
)
# Claim request ids (docs/operations.md#outages): the token a worker's earlier claim with this id leased
# its jobs under, while that lease lasts; the jobs still running under it; the request kept after a claim
# that leased anything, and the requests whose leases are over dropped.
CLAIM_REQUEST = "SELECT token FROM claim_requests WHERE worker = :worker AND request_id = :request_id AND expires_at > :now"
REQUESTED = (
    f"SELECT {JOB_COLUMNS} FROM jobs WHERE lease_token = :token AND status = 'running' AND worker_id = :worker"
    " AND lease_expires_at > :now"
)
DROP_CLAIM_REQUESTS = "DELETE FROM claim_requests WHERE expires_at <= :now"
KEEP_CLAIM_REQUEST = (
    "INSERT INTO claim_requests (worker, request_id, token, expires_at) VALUES (:worker, :request_id, :token,"
    " :expires)"
)


@lru_cache(maxsize=64)
def list_statement(columns: tuple[str, ...], keyset: bool) -> str:
    """The jobs list, newest first: equal to each parameter named in ``columns``, and below
    ``:before_id`` when ``keyset``; ``:limit`` rows."""
    where = [f"{name} = :{name}" for name in columns] + (["id < :before_id"] if keyset else [])
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {JOB_COLUMNS} FROM jobs{condition} ORDER BY id DESC LIMIT :limit"


EVENTS = "SELECT id, at, event, actor, attempt, error FROM job_events WHERE job_id = :job_id ORDER BY id"
_MINE = {False: "", True: " AND owner = :owner"}
COUNTS = {
    own: f"SELECT status, type, priority, sum(n) FROM job_counts WHERE 1 = 1{mine} GROUP BY status, type, priority"
    for own, mine in _MINE.items()
}
# Ids grow with time, so the lowest pending id is the oldest pending job: an index seek.
OLDEST = {
    own: f"SELECT created_at FROM jobs WHERE status = 'pending'{mine} ORDER BY id LIMIT 1"
    for own, mine in _MINE.items()
}
THROUGHPUT = {
    own: f"SELECT status, minute, sum(n) FROM job_throughput WHERE minute >= :since{mine} GROUP BY status, minute"
    for own, mine in _MINE.items()
}
# Through the partial index of history rows that carry an error.
FAILURES = (
    "SELECT e.job_id, e.at, e.error, j.type, j.status FROM job_events e JOIN jobs j ON j.id = e.job_id"
    " WHERE e.error IS NOT NULL ORDER BY e.id DESC LIMIT :limit"
)
JOB_TYPES = "SELECT name, enabled, paused, payload_schema FROM job_types ORDER BY name"
API_KEY = (
    "SELECT k.id, k.kind, k.name, k.last_used_at, u.username, u.role, u.active"
    " FROM api_keys k LEFT JOIN users u ON u.id = k.user_id"
    " WHERE k.key_hash = :digest AND k.revoked_at IS NULL"
)
MINUTE = "%Y-%m-%d %H:%M"  # job_throughput's minutes, as the triggers write them (UTC)


def bind_time(value: datetime) -> str:
    """A time as stored: SQLAlchemy's SQLite format, so that the ORM and this engine read each other's rows."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def parse_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value + "+00:00")  # 7x .replace(tzinfo=)


decode_time = parse_time


def schema_text(schema: str | None) -> str | None:
    """A payload schema as stored (JSON text; the ORM writes JSON null as "null")."""
    return None if schema in (None, "null") else schema


_TIMES = tuple(i for i, name in enumerate(JOB_FIELDS) if name.endswith("_at"))
_record = JobRecord._make
_fromisoformat = datetime.fromisoformat


def decode_job(row: Sequence[Any]) -> JobRecord:
    """A ``jobs`` row in ``JOB_COLUMNS`` order: times from text; JSON stays the text it is stored as."""
    values = list(row)
    for i in _TIMES:
        if values[i] is not None:
            values[i] = _fromisoformat(values[i] + "+00:00")
    return _record(values)


# -- bulk actions (the console): a batch of ids as one JSON array, each action's status in the statement --

_IDS = "id IN (SELECT value FROM json_each(:ids))"
BULK = {
    "retry": f"UPDATE jobs SET status = {_AGAIN}, retry_count = 0, available_at = :now, finished_at = NULL,"
    f" updated_at = :now WHERE {_IDS} AND status IN ('failed', 'cancelled') RETURNING {JOB_COLUMNS}",
    "cancel": "UPDATE jobs SET status = 'cancelled', finished_at = :now, updated_at = :now, waiting_on = NULL"
    f" WHERE {_IDS} AND status IN ('pending', 'waiting') RETURNING {JOB_COLUMNS}",
    "delete": f"DELETE FROM jobs WHERE {_IDS} AND status IN ('completed', 'failed', 'cancelled') RETURNING id",
}
BULK_EVENT = {"retry": "retried", "cancel": "cancelled"}  # the history row each writes (delete: none)
BULK_DELETE_HISTORY = f"DELETE FROM job_events WHERE job_{_IDS}"  # a deleted job's history goes with it


# -- the console's figures (shared.py) ----------------------------------------------------------------

_SAMPLE = "SELECT id, type, status, worker_id, available_at, claimed_at, finished_at FROM jobs"
# Running jobs only: through the partial index of leases (or the status index), never the whole table.
# The running attempt's progress only: a report older than the claim belongs to an earlier attempt.
_HELD_PROGRESS = "CASE WHEN progress_at >= claimed_at THEN {} END"
HELD_JOBS = (
    "SELECT id, type, worker_id, claimed_at, lease_expires_at,"
    f" {_HELD_PROGRESS.format('progress_percent')}, {_HELD_PROGRESS.format('progress_note')}"
    " FROM jobs WHERE status = 'running' ORDER BY lease_expires_at LIMIT :limit"
)
HELD_COUNTS = "SELECT worker_id, count(*) FROM jobs WHERE status = 'running' GROUP BY worker_id"
# Through ix_jobs_status_finished_at, from its newest end.
# Through the partial index of finished jobs (ix_jobs_finished), whose condition the statement repeats in
# words: SQLite uses a partial index only when the WHERE clause implies its condition as written.
RECENT_FINISHED = (
    f"{_SAMPLE} WHERE status = :status AND status IN ('completed', 'failed', 'cancelled')"
    " AND finished_at >= :since ORDER BY finished_at DESC LIMIT :limit"
)
# Through ix_jobs_type_id, from its newest end.
RECENT_OF_TYPE = f"{_SAMPLE} WHERE type = :type ORDER BY id DESC LIMIT :limit"
# api_keys holds one row per key ever made: a few hundred at most.
WORKER_KEYS = (
    "SELECT name, created_at, last_used_at, revoked_at FROM api_keys WHERE kind = 'worker'"
    " AND last_used_at >= :since ORDER BY last_used_at DESC LIMIT :limit"
)


# -- firing a schedule's slot (shared.py) ---------------------------------------------------------------

ADVANCE_SCHEDULE = (
    "UPDATE schedules SET next_fire_at = :next, last_fire_at = COALESCE(:last, last_fire_at) WHERE id = :id"
    " AND revision = :revision AND next_fire_at = :due AND NOT paused RETURNING id"
)
TOUCH_SCHEDULE = (
    "UPDATE schedules SET last_fire_at = :slot WHERE id = :id RETURNING id"  # "run now": it exists
)
CLAIM_SLOT = (
    "INSERT INTO schedule_fires (schedule_id, slot_at, job_id, fired_at) VALUES (:id, :slot, NULL, :now)"
    " ON CONFLICT DO NOTHING RETURNING schedule_id"
)
SET_SLOT_JOB = "UPDATE schedule_fires SET job_id = :job WHERE schedule_id = :id AND slot_at = :slot"
FORGET_SLOTS = "DELETE FROM schedule_fires WHERE schedule_id = :id AND slot_at < :horizon"
AUDIT = "INSERT INTO audit_log (at, actor, action, target, detail) VALUES (:now, :actor, :action, :target, :detail)"


def _param(name: str) -> str:
    return f":{name}"


def _bind_ids(ids: Sequence[int]) -> str:
    return json.dumps([int(i) for i in ids])


def _bind_path(keys: Sequence[str]) -> str:
    """A payload path as SQLite's JSON path, each key quoted."""
    return "$" + "".join(f'."{k}"' for k in keys)


DIALECT = Dialect(
    name="sqlite",
    param=_param,
    bind_time=bind_time,
    decode_time=parse_time,
    decode_job=decode_job,
    bind_json=bind_json,
    schema_text=schema_text,
    bind_ids=_bind_ids,
    bind_path=_bind_path,
    minute=MINUTE,
    get=GET,
    list_statement=list_statement,
    events=EVENTS,
    counts=COUNTS,
    oldest=OLDEST,
    throughput=THROUGHPUT,
    failures=FAILURES,
    job_types=JOB_TYPES,
    api_key=API_KEY,
    newest_id="SELECT max(id) FROM jobs",
    held_jobs=HELD_JOBS,
    held_counts=HELD_COUNTS,
    recent_finished=RECENT_FINISHED,
    recent_of_type=RECENT_OF_TYPE,
    worker_keys=WORKER_KEYS,
    # Both lower() only fold ASCII on SQLite; instr takes the text literally (no LIKE escapes).
    error_holds="instr(lower(error), lower(:error)) > 0",
    ids_among="id IN (SELECT value FROM json_each(:ids))",
    # Strings as they are, numbers as written, true/false; objects, arrays and null never match.
    payload_equals=(
        "(CASE json_type(payload, :payload_path) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'"
        " WHEN 'object' THEN NULL WHEN 'array' THEN NULL WHEN 'null' THEN NULL"
        " ELSE CAST(json_extract(payload, :payload_path) AS TEXT) END) = :payload_value"
    ),
    advance_schedule=ADVANCE_SCHEDULE,
    touch_schedule=TOUCH_SCHEDULE,
    claim_slot=CLAIM_SLOT,
    set_slot_job=SET_SLOT_JOB,
    forget_slots=FORGET_SLOTS,
    audit=AUDIT,
)


# -- workflows (queuelog/engines/workflows.py; docs/workflows.md) ------------------------------------------
# Lists of ids arrive as one JSON array (:ids, :own). The write lock is held: what a statement reads, no
# other writer changes before the transaction ends.

_IN = "(SELECT value FROM json_each(:{}))"
_TAKE = f"UPDATE jobs SET dependents = dependents + 1 WHERE id IN {_IN.format('ids')}"
_FLOW_NEW = (
    "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, idempotency_key, fingerprint,"
    " owner, available_at, created_at, updated_at, finished_at, batch_id, callback_of, depends_on, waiting_on,"
    " on_dependency_failure) VALUES (:type, :payload, :priority, :status, 0, :max_retries, :key, :fingerprint,"
    " :owner, :available_at, :now, :now, :finished_at, :batch_id, :callback_of, :depends_on, :waiting_on,"
    f" :on_failure) ON CONFLICT DO NOTHING RETURNING {JOB_COLUMNS}"
)
_WAITS = "j.status = 'waiting' AND j.on_dependency_failure IS NULL"
DOOMED = (
    "WITH RECURSIVE doomed(id, cause) AS (SELECT d.job_id, d.depends_on_id FROM job_dependencies d"
    f" JOIN jobs j ON j.id = d.job_id WHERE d.depends_on_id IN {_IN.format('ids')} AND {_WAITS}"
    " UNION SELECT d.job_id, d.depends_on_id FROM doomed JOIN job_dependencies d ON d.depends_on_id = doomed.id"
    f" JOIN jobs j ON j.id = d.job_id WHERE {_WAITS}) SELECT id, min(cause) FROM doomed GROUP BY id"
)
_ENDED = "('completed', 'failed', 'cancelled')"
# Every waiting dependent of :ids (and each of :own), in one statement: its dependencies counted in one
# grouped pass over the dependency rows (by their primary key), then pending when they are all finished
# (and, unless it runs whatever their outcome, none failed), else waiting on the rest.
_TALLY = (
    f"SELECT d.job_id AS job, sum(p.status NOT IN {_ENDED}) AS open, sum(p.status IN ('failed', 'cancelled'))"
    f" AS bad, json_group_array(p.id) FILTER (WHERE p.status NOT IN {_ENDED}) AS rest"
    " FROM job_dependencies d JOIN jobs p ON p.id = d.depends_on_id WHERE d.job_id IN (SELECT job_id"
    f" FROM job_dependencies WHERE depends_on_id IN {_IN.format('ids')} UNION SELECT value FROM"
    f" json_each(:own)) GROUP BY d.job_id"
)
_READY = "a.open = 0 AND (jobs.on_dependency_failure = 'run' OR a.bad = 0)"
REFRESH = (
    f"UPDATE jobs SET status = CASE WHEN {_READY} THEN 'pending' ELSE 'waiting' END,"
    f" available_at = CASE WHEN {_READY} THEN max(jobs.available_at, :now) ELSE jobs.available_at END,"
    f" waiting_on = CASE WHEN {_READY} THEN NULL ELSE a.rest END, updated_at = :now"
    f" FROM ({_TALLY}) AS a WHERE jobs.id = a.job AND jobs.status = 'waiting' RETURNING jobs.id, jobs.status, jobs.retry_count"
)
_BATCH_OPEN = "finished + :done < total"


def list_batches(columns: tuple[str, ...], keyset: bool) -> str:
    where = [f"{name} = :{name}" for name in columns] + (["id < :before_id"] if keyset else [])
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {BATCH_COLUMNS} FROM batches{condition} ORDER BY id DESC LIMIT :limit"


FLOWS = Flows(
    bind_ids=_bind_ids,
    bind_time=bind_time,
    bind_json=bind_json,
    decode_job=decode_job,
    decode_time=parse_time,
    event=EVENT,
    take_dependencies={
        False: f"{_TAKE} RETURNING id, status",
        True: f"{_TAKE} AND owner = :owner RETURNING id, status",
    },
    find_dependencies={
        False: f"SELECT id FROM jobs WHERE id IN {_IN.format('ids')}",
        True: f"SELECT id FROM jobs WHERE id IN {_IN.format('ids')} AND owner = :owner",
    },
    insert=_FLOW_NEW,
    by_key=BY_KEY,
    dependency="INSERT INTO job_dependencies (job_id, depends_on_id) VALUES (?, ?)",
    doomed=DOOMED,
    cancel_doomed="UPDATE jobs SET status = 'cancelled', finished_at = :now, updated_at = :now, waiting_on = NULL"
    f" WHERE id IN {_IN.format('ids')} AND status = 'waiting' RETURNING {JOB_COLUMNS}",
    lock_waiting=None,
    refresh=REFRESH,
    count_batch=f"UPDATE batches SET finished = finished + :done, failed = failed + :failed,"
    f" status = CASE WHEN {_BATCH_OPEN} THEN 'running' ELSE status END,"
    f" finished_at = CASE WHEN {_BATCH_OPEN} THEN NULL ELSE finished_at END, updated_at = :now"
    " WHERE id = :id RETURNING finished, total, status",
    finish_batch="UPDATE batches SET status = CASE WHEN failed = 0 THEN 'succeeded' ELSE 'finished_with_failures'"
    " END, finished_at = :now, updated_at = :now WHERE id = :id AND status = 'running' AND finished >= total"
    " RETURNING owner, status, on_success, on_finish, on_success_job, on_finish_job",
    set_callbacks="UPDATE batches SET on_success_job = :success, on_finish_job = :finish WHERE id = :id",
    insert_batch="INSERT INTO batches (owner, description, status, total, finished, failed, idempotency_key,"
    " fingerprint, on_success, on_finish, created_at, updated_at) VALUES (:owner, :description, 'running', 0,"
    " 0, 0, :key, :fingerprint, :on_success, :on_finish, :now, :now) ON CONFLICT DO NOTHING RETURNING id",
    batch_by_key="SELECT id, fingerprint FROM batches WHERE owner = :owner AND idempotency_key = :key",
    get_batch=f"SELECT {BATCH_COLUMNS} FROM batches WHERE id = :id",
    set_batch_counts="UPDATE batches SET total = :total, finished = :finished, failed = :failed WHERE id = :id",
    members=f"SELECT batch_id, id, status FROM jobs WHERE batch_id IN {_IN.format('ids')} AND callback_of IS NULL ORDER BY id",
    list_batches=list_batches,
    cancel_members="UPDATE jobs SET status = 'cancelled', finished_at = :now, updated_at = :now,"
    " waiting_on = NULL WHERE batch_id = :id AND callback_of IS NULL AND status IN ('pending', 'waiting')"
    f" RETURNING {JOB_COLUMNS}",
    request_cancel_members="UPDATE jobs SET cancel_requested_at = :now, cancel_requested_by = :actor,"
    " updated_at = :now WHERE batch_id = :id AND callback_of IS NULL AND status = 'running' AND cancel_requested_at IS NULL"
    " RETURNING id, retry_count",
    retry_members=f"UPDATE jobs SET status = {_AGAIN}, retry_count = 0, available_at = :now,"
    " finished_at = NULL, updated_at = :now WHERE batch_id = :id AND callback_of IS NULL AND status IN ('failed', 'cancelled')"
    f" RETURNING {JOB_COLUMNS}",
    holds_member="SELECT id FROM jobs WHERE batch_id = :id AND callback_of IS NULL AND status = 'running' AND worker_id = :worker"
    " AND lease_token = :token",
    grow_batch="UPDATE batches SET total = total + :n, updated_at = :now WHERE id = :id AND status = 'running'"
    " RETURNING owner",
    dependents_of="SELECT job_id FROM job_dependencies WHERE depends_on_id = :id ORDER BY job_id LIMIT :limit",
)
