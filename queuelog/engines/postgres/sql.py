"""Every statement of the PostgreSQL engine, its binding and row decoding, and its ``DIALECT`` for the
shared operations (the engine itself: engine.py; the shared operations: queuelog/engines/shared.py).

Times are timestamptz, JSON is jsonb. Statements are written in psycopg's own ``%(name)s`` style (a
literal ``%`` would be ``%%``) and go to the driver as written. Every transition is one statement that
also writes its history row (a data-modifying CTE) and, for a failure or a lease expiry, computes the
retry backoff (docs/concepts.md#retry-backoff): each runs autocommitted, one round trip. The claim picks jobs in
the order of the partial index ``ix_jobs_claim``: priority (highest first), then ``available_at``, then
``id``, locking them with ``FOR UPDATE SKIP LOCKED`` so that concurrent claims neither wait on each
other nor hand out the same job.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from psycopg.types.json import Jsonb

from queuelog.engines.dialect import Dialect
from queuelog.engines.records import BATCH_COLUMNS, JOB_COLUMNS, JOB_FIELDS, JobRecord
from queuelog.engines.workflows import Flows

_HOLDER = "id = %(id)s AND status = 'running' AND worker_id = %(worker)s AND lease_token = %(token)s"
# A job outside every workflow (docs/workflows.md): its transitions stay one autocommitted statement. The
# statements named *_FLOW (and plain() of each) split the work: the plain statement leaves a job in a
# workflow alone, and the engine runs the flow statement for it in a transaction that also settles what
# its transition implies (queuelog/engines/workflows.py).
_PLAIN = "dependents = 0 AND batch_id IS NULL AND depends_on IS NULL"
_RETRYING = "%(retryable)s AND retry_count < max_retries"
_RETURNING = ", ".join(f"jobs.{c}" for c in JOB_FIELDS)
_EVENT = "INSERT INTO job_events (job_id, at, event, actor, attempt, error) SELECT id, %(now)s, "
# The wait before retry number n = retry_count + 1 (retry_count as it was before the update):
# d = min(cap, base * 2^(n-1)); d/2 + jitter * d/2, as Backoff.seconds computes it.
_BACKOFF = "make_interval(secs => least(%(cap)s, %(base)s * power(2, retry_count)) * (0.5 + {jitter} * 0.5))"

_NEW = (
    "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, idempotency_key,"
    " fingerprint, owner, available_at, created_at, updated_at) VALUES (%(type)s, %(payload)s, %(priority)s,"
    " 'pending', 0, %(max_retries)s, %(key)s, %(fingerprint)s, %(owner)s, %(available_at)s, %(now)s, %(now)s)"
)
INSERT = (
    f"WITH j AS ({_NEW} RETURNING {JOB_COLUMNS}), e AS ({_EVENT}'enqueued', owner, 0, NULL FROM j)"
    f" SELECT {JOB_COLUMNS} FROM j"
)
INSERT_IDEMPOTENT = (
    f"WITH j AS ({_NEW} ON CONFLICT DO NOTHING RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}'enqueued', owner, 0, NULL FROM j) SELECT {JOB_COLUMNS} FROM j"
)
BY_KEY = f"SELECT {JOB_COLUMNS}, fingerprint FROM jobs WHERE owner = %(owner)s AND idempotency_key = %(key)s"

# Flow control (docs/flow-control.md). A limited type's room is how many of its jobs one claim may take
# now: its concurrency limit less its running jobs, and the whole tokens of its rate limit's bucket,
# refilled for the time since it was last spent. Only limited types are counted. The claim runs in a
# transaction that first locks the limited types' rows (LOCK_LIMITED), so that its statement's snapshot,
# taken after the lock, sees every job claimed by the claims before it.
_SINCE = "greatest(0, extract(epoch FROM %(now)s - coalesce(rate_checked_at, %(now)s)))"
TOKENS = f"least(rate_limit, coalesce(rate_tokens, rate_limit) + {_SINCE} * rate_limit::float8 / rate_period)"
_RUNNING = "(SELECT count(*) FROM jobs r WHERE r.status = 'running' AND r.type = t.name)"
_UNLIMITED = "1000000000"
_ROOM = (
    "room AS (SELECT name, least("
    f"coalesce(concurrency_limit - {_RUNNING}, {_UNLIMITED}), coalesce(floor({TOKENS})::int, {_UNLIMITED})"
    ") AS room FROM job_types t WHERE concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL)"
)
_LIMITED = "(concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL)"
# NO KEY UPDATE: the lock an UPDATE of non-key columns takes, so that it waits only for other claims.
LOCK_LIMITED = {
    typed: f"SELECT name FROM job_types WHERE {_LIMITED}"
    + (" AND name = ANY(%(types)s)" if typed else "")
    + " ORDER BY name FOR NO KEY UPDATE"
    for typed in (False, True)
}
# Paused types and types without room are passed over.
_HELD = "held AS MATERIALIZED (SELECT name FROM job_types WHERE paused UNION ALL SELECT name FROM room WHERE room < 1)"
# The claim, in claim order, two ways in one statement, its snapshot's data deciding which.
#
# In order: down ix_jobs_claim, passing over the jobs of held types. Its cost is one seek while no
# pending job is of a held type; otherwise it would read every such job that comes first in claim order.
_IN_ORDER = (
    "SELECT {columns} FROM jobs WHERE status = 'pending' AND available_at <= %(now)s{typed}"
    " AND type NOT IN (SELECT name FROM held) ORDER BY priority DESC, available_at, id LIMIT %(limit)s"
)
# Whether a pending job is of a held type: then the claim goes by type.
# (LATERAL ... LIMIT 1: one seek per held type, never a hash of every pending job.)
_WAITING = (
    "waiting AS (SELECT EXISTS (SELECT 1 FROM held AS h CROSS JOIN LATERAL (SELECT 1 FROM jobs"
    " WHERE status = 'pending' AND type = h.name LIMIT 1) AS j) AS yes)"
)
# By type: the claim order of each type's pending jobs (ix_jobs_claim_by_type), merged. The types taken
# are a worker's list, or every type with a pending job, found by skipping through the index one type at
# a time; a held type is passed over without reading its jobs, so that a claim costs a seek or two per
# type however many jobs wait. The first :limit jobs of the merged runs are worked out unlocked; each
# type's share of them (at most its room) is then locked in that type's run (SKIP LOCKED: a job another
# claim holds gives way to the type's next), so that a claim locks only the jobs it takes.
_KINDS = {
    False: "kinds(name) AS (SELECT min(type) FROM jobs WHERE status = 'pending' UNION ALL SELECT (SELECT min(type)"
    " FROM jobs WHERE status = 'pending' AND type > kinds.name) FROM kinds WHERE kinds.name IS NOT NULL)",
    True: "kinds(name) AS (SELECT DISTINCT unnest(%(types)s::text[]))",
}
_RUN = (
    "SELECT id, type, priority, available_at FROM jobs WHERE type = {kind} AND status = 'pending'"
    " AND available_at <= %(now)s ORDER BY priority DESC, available_at, id LIMIT {limit}"
)
_FIRST = (
    "SELECT j.id, j.type, j.priority, j.available_at FROM kinds CROSS JOIN LATERAL ("
    + _RUN.format(kind="kinds.name", limit="%(limit)s")
    + ") AS j WHERE kinds.name NOT IN (SELECT name FROM held) ORDER BY j.priority DESC, j.available_at, j.id"
    " LIMIT %(limit)s"
)
# A batch takes at most a type's room of its jobs, in claim order, so it may bring fewer jobs than asked.
_NUMBERED = (
    "SELECT c.id, c.type FROM (SELECT id, type, row_number() OVER (PARTITION BY type ORDER BY priority DESC,"
    " available_at, id) AS n FROM {picked}) AS c LEFT JOIN room ON room.name = c.type"
    " WHERE room.room IS NULL OR c.n <= room.room"
)
_BY_TYPE = (
    f"first AS ({_FIRST}), share AS (SELECT type, count(*) AS n FROM ({_NUMBERED.format(picked='first')}) AS w"
    " GROUP BY type), by_type AS (SELECT j.* FROM share CROSS JOIN LATERAL ("
    + _RUN.format(kind="share.type", limit="share.n")
    + " FOR UPDATE SKIP LOCKED) AS j)"
)
_PICKED_COLUMNS = "id, type, priority, available_at"
# picked: the jobs locked for the claim. Typed claims always go by type (a worker's list would otherwise
# have the claim read past every job of the other types).
_PICKED = {
    False: f"{_HELD}, {_KINDS[False]}, {_WAITING}, {_BY_TYPE},"
    f" in_order AS ({_IN_ORDER.format(columns=_PICKED_COLUMNS, typed='')} FOR UPDATE SKIP LOCKED),"
    " picked AS (SELECT * FROM in_order WHERE NOT (SELECT yes FROM waiting)"
    " UNION ALL SELECT * FROM by_type WHERE (SELECT yes FROM waiting))",
    True: f"{_HELD}, {_KINDS[True]}, {_BY_TYPE}, picked AS (SELECT * FROM by_type)",
}
# In order only, as before flow control: while no type has a limit or is paused (the engine checks every
# few seconds: ANY_HELD), nothing can wait, and this statement costs the server less planning than the
# one that carries both ways. Were a type held back meanwhile, this one would still claim right.
_PICKED_IN_ORDER = {
    typed: f"{_HELD}, picked AS ("
    + _IN_ORDER.format(columns=_PICKED_COLUMNS, typed=" AND type = ANY(%(types)s)" if typed else "")
    + " FOR UPDATE SKIP LOCKED)"
    for typed in (False, True)
}
ANY_HELD = f"SELECT EXISTS (SELECT 1 FROM job_types WHERE paused OR {_LIMITED})"
_WITHIN_ROOM = _NUMBERED.format(picked="picked")
# The rate-limited types among the jobs taken spend one token per job from their refilled bucket. The
# bucket's time never goes back: a server whose clock is behind refilled nothing, and the next claim on
# time must not refill the interval again (docs/flow-control.md, "Clocks").
_SPEND = (
    f"UPDATE job_types t SET rate_tokens = {TOKENS} - taken.n,"
    " rate_checked_at = greatest(rate_checked_at, %(now)s)"
    " FROM (SELECT type, count(*) AS n FROM claimed GROUP BY type) AS taken"
    " WHERE t.name = taken.type AND t.rate_limit IS NOT NULL"
)
# Lease expiry: a retryable failure by "system", with its backoff and its history row.
_EXPIRE = (
    "UPDATE jobs SET status = CASE WHEN retry_count < max_retries THEN 'pending' ELSE 'failed' END,"
    " finished_at = CASE WHEN retry_count < max_retries THEN NULL ELSE %(now)s END,"
    " retry_count = CASE WHEN retry_count < max_retries THEN retry_count + 1 ELSE retry_count END,"
    f" available_at = CASE WHEN retry_count < max_retries THEN %(now)s + {_BACKOFF.format(jitter='random()')}"
    " ELSE %(now)s END, updated_at = %(now)s, error = 'lease expired', lease_token = NULL, lease_expires_at = NULL"
    " WHERE status = 'running' AND lease_expires_at < %(now)s AND {which} RETURNING " + JOB_COLUMNS
)
_EXPIRE_LOG = (
    f"{_EVENT}'lease_expired', 'system', CASE WHEN status = 'pending' THEN retry_count ELSE retry_count + 1 END,"
    " 'lease expired (held by ' || worker_id || ')' FROM x"
)
EXPIRE = f"WITH x AS ({_EXPIRE.format(which=_PLAIN)}), xe AS ({_EXPIRE_LOG}) SELECT {JOB_COLUMNS} FROM x"
EXPIRE_FLOW = f"WITH x AS ({_EXPIRE.format(which=f'NOT ({_PLAIN})')}), xe AS ({_EXPIRE_LOG}) SELECT {JOB_COLUMNS} FROM x"
# Whether a job in a workflow has an expired lease: the claim settles those (EXPIRE_FLOW) by itself.
FLOW_LEASE_DUE = f"SELECT EXISTS (SELECT 1 FROM jobs WHERE status = 'running' AND lease_expires_at < %(now)s AND NOT ({_PLAIN}))"
# Settle expired leases, pick and lease jobs, and log both, in one statement; rows come back tagged
# 'claimed' or 'expired'. Jobs whose lease expired here are pending from this statement on, but the pick
# reads the statement's snapshot and cannot see them: the engine claims once more when that matters.
# The picked ids go to the update as an array, so that it reaches them by primary key (a join with the
# CTE would let the planner hash it against a scan of the whole table). A job of a type with a concurrency
# limit is marked as holding a slot: the wake-up trigger acts on the end of such a job only (migration 0015).
_CLAIM = (
    f"WITH RECURSIVE x AS ({_EXPIRE.format(which=_PLAIN)}), xe AS ({_EXPIRE_LOG}), {_ROOM}, {{picked}},"
    f" within AS ({_WITHIN_ROOM}),"
    " claimed AS (UPDATE jobs SET status = 'running', worker_id = %(worker)s, lease_token = %(token)s,"
    " claimed_at = %(now)s, lease_expires_at = %(expires)s, updated_at = %(now)s,"
    " holds_slot = jobs.type IN (SELECT name FROM job_types WHERE concurrency_limit IS NOT NULL)"
    f" WHERE jobs.id = ANY(ARRAY(SELECT id FROM within)) RETURNING {_RETURNING}),"
    f" spent AS ({_SPEND}),"
    f" logged AS ({_EVENT}'claimed', %(worker)s, retry_count + 1, NULL FROM claimed)"
    f" SELECT 'claimed', {JOB_COLUMNS} FROM claimed UNION ALL SELECT 'expired', {JOB_COLUMNS} FROM x"
)
CLAIM = {typed: _CLAIM.format(picked=picked) for typed, picked in _PICKED.items()}
CLAIM_IN_ORDER = {typed: _CLAIM.format(picked=picked) for typed, picked in _PICKED_IN_ORDER.items()}
LEASE_DUE = "SELECT id FROM jobs WHERE status = 'running' AND lease_expires_at < %(now)s LIMIT 1"
# Whether a claim now would find a job (by type) or a lease to settle: the long poll's safety-net probe,
# one read and one round trip.
CLAIMABLE = {
    typed: f"WITH RECURSIVE {_ROOM}, {_HELD}, {kinds} SELECT EXISTS ({_FIRST}) OR EXISTS ({LEASE_DUE})"
    for typed, kinds in _KINDS.items()
}
HEARTBEAT = f"UPDATE jobs SET lease_expires_at = %(expires)s, updated_at = %(now)s WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
_DONE = (
    "status = 'completed', error = NULL, finished_at = %(now)s, updated_at = %(now)s, lease_token = NULL,"
    " lease_expires_at = NULL"
)
COMPLETE = (
    f"WITH d AS (UPDATE jobs SET {_DONE}, result = %(result)s, reported_token = %(token)s WHERE {_HOLDER}"
    f" RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}'completed', %(worker)s, retry_count + 1, NULL FROM d) SELECT {JOB_COLUMNS} FROM d"
)
# One round trip for a whole batch, under the same holder guard as a single complete: the items arrive as
# three arrays; the jobs are reached by primary key (`id = ANY(ids)`), and each one's token and result are
# read at its id's place in the arrays. No join with the items: the plan a prepared statement settles on
# after five runs (a generic plan) joined them in a nested loop, comparing each job with every item (100 x
# 100 for a batch of 100). And `status IS NOT DISTINCT FROM 'running'` says what `status = 'running'`
# says of a column that is never NULL, but keeps the planner off the partial indexes of running jobs:
# while the table's statistics saw few running jobs, it read every running job through one of those
# (docs/performance.md#batches-on-postgresql).
_ITEM = "array_position(%(ids)s::bigint[], jobs.id)"
_COMPLETE_ITEMS = (
    f"WITH d AS (UPDATE jobs SET {_DONE}, result = (%(results)s::text[])[{_ITEM}]::jsonb,"
    " reported_token = jobs.lease_token"  # the token as it was: SET reads the row before the update
    " WHERE jobs.id = ANY(%(ids)s::bigint[]) AND jobs.status IS NOT DISTINCT FROM 'running'"
    f" AND jobs.worker_id = %(worker)s AND jobs.lease_token = (%(tokens)s::text[])[{_ITEM}]"
    " RETURNING {returning}),"
    f" e AS ({_EVENT}'completed', %(worker)s, retry_count + 1, NULL FROM d) SELECT {{answer}} FROM d"
)
COMPLETE_MANY = _COMPLETE_ITEMS.format(returning=_RETURNING, answer=JOB_COLUMNS)
# The same for a caller that needs no job back (a compact answer): each job's id and status. The rows'
# 30 columns, their transfer and their decoding made a completion of 100 about a fifth slower
# (docs/performance.md#writes-one-transaction-one-round-trip).
COMPLETE_EACH = _COMPLETE_ITEMS.format(
    returning="jobs.id, jobs.status, jobs.retry_count", answer="id, status"
)
# A failure of a job whose cancellation was requested (docs/running-jobs.md) ends it cancelled, never
# retried, in the same statement: a failure nobody asked to cancel costs nothing more. Every SET expression
# reads the row as it was, so each CASE sees the request the statement clears.
_CANCELLING = "cancel_requested_at IS NOT NULL"
_RETRY = f"cancel_requested_at IS NULL AND {_RETRYING}"
FAIL = (
    f"WITH f AS (UPDATE jobs SET status = CASE WHEN {_CANCELLING} THEN 'cancelled' WHEN {_RETRYING}"
    " THEN 'pending' ELSE 'failed' END,"
    f" retry_count = CASE WHEN {_RETRY} THEN retry_count + 1 ELSE retry_count END,"
    f" finished_at = CASE WHEN {_RETRY} THEN NULL ELSE %(now)s END,"
    f" available_at = CASE WHEN {_RETRY} THEN %(now)s + {_BACKOFF.format(jitter='%(jitter)s')} ELSE %(now)s END,"
    " cancel_requested_at = NULL, cancel_requested_by = NULL,"
    " updated_at = %(now)s, error = %(error)s, reported_token = %(token)s, lease_token = NULL,"
    f" lease_expires_at = NULL WHERE {_HOLDER} RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}CASE status WHEN 'pending' THEN 'retry_scheduled' WHEN 'cancelled' THEN 'cancelled'"
    " ELSE 'failed' END, %(worker)s,"
    " CASE WHEN status = 'pending' THEN retry_count ELSE retry_count + 1 END, %(error)s FROM f)"
    f" SELECT {JOB_COLUMNS} FROM f"
)
# A waiting job (docs/workflows.md) is cancelled like a pending one.
CANCEL = {
    own: "WITH c AS (UPDATE jobs SET status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s,"
    f" waiting_on = NULL WHERE id = %(id)s AND status IN ('pending', 'waiting'){mine} RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}'cancelled', %(actor)s, retry_count, NULL FROM c) SELECT {JOB_COLUMNS} FROM c"
    for own, mine in ((False, ""), (True, " AND owner = %(owner)s"))
}
# A job with dependencies waits on them again (docs/workflows.md); the engine releases it at once when
# they are all finished.
_AGAIN = "CASE WHEN depends_on IS NULL THEN 'pending' ELSE 'waiting' END"
RETRY = (
    f"WITH r AS (UPDATE jobs SET status = {_AGAIN}, retry_count = 0, available_at = %(now)s, finished_at = NULL,"
    " updated_at = %(now)s WHERE id = %(id)s AND status IN ('failed', 'cancelled')"
    f" RETURNING {JOB_COLUMNS}), e AS ({_EVENT}'retried', %(actor)s, 0, NULL FROM r) SELECT {JOB_COLUMNS} FROM r"
)
# A batch of old finished jobs (through the partial index ix_jobs_finished) and their history, in one
# statement; it answers how many jobs it deleted. The status is checked again on the row to delete: a job
# an admin retried while this statement waited for its lock is pending now, and stays.
_FINISHED = "status IN ('completed', 'failed', 'cancelled')"
PRUNE = (
    f"WITH gone AS (DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE {_FINISHED}"
    f" AND finished_at < %(cutoff)s LIMIT %(batch)s) AND {_FINISHED} RETURNING id),"
    " h AS (DELETE FROM job_events WHERE job_id IN (SELECT id FROM gone)),"
    " dd AS (DELETE FROM job_dependencies WHERE job_id IN (SELECT id FROM gone)) SELECT count(*) FROM gone"
)
PRUNE_THROUGHPUT = "DELETE FROM job_throughput WHERE minute < %(minute)s"

# -- running jobs (docs/running-jobs.md): each one statement that writes its own history row ---------

REQUEST_CANCEL = {
    own: "WITH r AS (UPDATE jobs SET cancel_requested_at = %(now)s, cancel_requested_by = %(actor)s,"
    " updated_at = %(now)s WHERE id = %(id)s AND status = 'running' AND cancel_requested_at IS NULL"
    f"{mine} RETURNING {JOB_COLUMNS}), e AS ({_EVENT}'cancel_requested', %(actor)s, retry_count + 1, NULL"
    f" FROM r) SELECT {JOB_COLUMNS} FROM r"
    for own, mine in ((False, ""), (True, " AND owner = %(owner)s"))
}
# A job whose cancellation was requested ends cancelled; the request is cleared, so that a job retried
# later does not start out cancelled again (its history keeps who asked).
_END_CANCELLED = (
    "status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s, lease_token = NULL,"
    " lease_expires_at = NULL, cancel_requested_at = NULL, cancel_requested_by = NULL"
)
CANCEL_HELD = (
    f"WITH c AS (UPDATE jobs SET {_END_CANCELLED}, error = coalesce(%(error)s, error)"
    f" WHERE {_HOLDER} AND {_CANCELLING} RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}'cancelled', %(worker)s, retry_count + 1, %(error)s FROM c) SELECT {JOB_COLUMNS} FROM c"
)
# Run just before expired leases are settled (EXPIRE, CLAIM), with the same time: a job nobody stopped
# after its cancellation was requested is not retried.
_SETTLING_CANCELLED = (
    f"WITH x AS (UPDATE jobs SET {_END_CANCELLED} WHERE status = 'running' AND lease_expires_at < %(now)s"
    f" AND {_CANCELLING} AND {{which}} RETURNING {JOB_COLUMNS}),"
    f" xe AS ({_EVENT}'cancelled', 'system', retry_count + 1, NULL FROM x)"
)
_SETTLE_CANCELLED = _SETTLING_CANCELLED.format(which=_PLAIN)
EXPIRE_CANCELLED = f"{_SETTLE_CANCELLED} SELECT {JOB_COLUMNS} FROM x"
EXPIRE_CANCELLED_FLOW = f"{_SETTLING_CANCELLED.format(which=f'NOT ({_PLAIN})')} SELECT {JOB_COLUMNS} FROM x"
# The claim's first statement: the same, and the limited types' rows locked (LOCK_LIMITED), in one
# statement of the claim's transaction; the claim statement that follows sees both (docs/flow-control.md).
SETTLE_AND_LOCK = {typed: f"{_SETTLE_CANCELLED} {lock}" for typed, lock in LOCK_LIMITED.items()}
# greatest(): with app servers whose clocks differ a little, a report still counts for its attempt.
PROGRESS = (
    "UPDATE jobs SET lease_expires_at = %(expires)s, updated_at = %(now)s, progress_percent = %(percent)s,"
    " progress_note = %(message)s, progress_at = greatest(%(now)s, claimed_at)"
    f" WHERE {_HOLDER} RETURNING {JOB_COLUMNS}"
)
# Every SET expression reads the row as it was, so each CASE sees the request the statement clears.
SNOOZE = (
    f"WITH s AS (UPDATE jobs SET status = CASE WHEN {_CANCELLING} THEN 'cancelled' ELSE 'pending' END,"
    f" finished_at = CASE WHEN {_CANCELLING} THEN %(now)s END,"
    f" available_at = CASE WHEN {_CANCELLING} THEN available_at ELSE %(available_at)s END,"
    f" snooze_count = CASE WHEN {_CANCELLING} THEN snooze_count ELSE snooze_count + 1 END,"
    " cancel_requested_at = NULL, cancel_requested_by = NULL, updated_at = %(now)s, lease_token = NULL,"
    f" lease_expires_at = NULL WHERE {_HOLDER} AND (snooze_count < %(max_snoozes)s OR {_CANCELLING})"
    f" RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}CASE WHEN status = 'cancelled' THEN 'cancelled' ELSE 'snoozed' END, %(worker)s,"
    f" retry_count + 1, NULL FROM s) SELECT {JOB_COLUMNS} FROM s"
)

# -- reads --------------------------------------------------------------------------------------------

GET = f"SELECT {JOB_COLUMNS} FROM jobs WHERE id = %(id)s"
# A report its guard refused: the job, and whether the refused report repeats the one that ended the
# attempt (the same worker and lease token, the job no longer running): then it answers as that one did.
REPORTED = (
    f"SELECT {JOB_COLUMNS}, coalesce(reported_token = %(token)s AND worker_id = %(worker)s"
    " AND status <> 'running', false) FROM jobs WHERE id = %(id)s"
)
# Claim request ids (docs/operations.md#outages): the token a worker's earlier claim with this id leased
# its jobs under, while that lease lasts, and the jobs still running under it. In the claim's transaction:
# the request kept when the claim leased anything (a second claim with the same id at the same moment
# fails on the key, and answers the first one's jobs), and the requests whose leases are over dropped.
CLAIM_REQUEST = (
    "SELECT token FROM claim_requests WHERE worker = %(worker)s AND request_id = %(request_id)s"
    " AND expires_at > %(now)s"
)
REQUESTED = (
    f"SELECT {JOB_COLUMNS} FROM jobs WHERE lease_token = %(token)s AND status = 'running'"
    " AND worker_id = %(worker)s AND lease_expires_at > %(now)s"
)
DROP_CLAIM_REQUESTS = "DELETE FROM claim_requests WHERE expires_at <= %(now)s"
KEEP_CLAIM_REQUEST = (
    "INSERT INTO claim_requests (worker, request_id, token, expires_at) SELECT %(worker)s::text,"
    " %(request_id)s::text, %(token)s::text, %(expires)s::timestamptz WHERE EXISTS (SELECT 1 FROM jobs"
    " WHERE lease_token = %(token)s::text AND status = 'running')"
)
EVENTS = "SELECT id, at, event, actor, attempt, error FROM job_events WHERE job_id = %(job_id)s ORDER BY id"
_MINE = {False: "", True: " AND owner = %(owner)s"}
COUNTS = {
    own: f"SELECT status, type, priority, sum(n) FROM job_counts WHERE true{mine} GROUP BY status, type, priority"
    for own, mine in _MINE.items()
}
# Ids grow with time, so the lowest pending id is the oldest pending job: an index seek.
OLDEST = {
    own: f"SELECT created_at FROM jobs WHERE status = 'pending'{mine} ORDER BY id LIMIT 1"
    for own, mine in _MINE.items()
}
THROUGHPUT = {
    own: f"SELECT status, minute, sum(n) FROM job_throughput WHERE minute >= %(since)s{mine} GROUP BY status, minute"
    for own, mine in _MINE.items()
}
# Through the partial index of history rows that carry an error.
FAILURES = (
    "SELECT e.job_id, e.at, e.error, j.type, j.status FROM job_events e JOIN jobs j ON j.id = e.job_id"
    " WHERE e.error IS NOT NULL ORDER BY e.id DESC LIMIT %(limit)s"
)
JOB_TYPES = "SELECT name, enabled, paused, payload_schema FROM job_types ORDER BY name"
API_KEY = (
    "SELECT k.id, k.kind, k.name, k.last_used_at, u.username, u.role, u.active"
    " FROM api_keys k LEFT JOIN users u ON u.id = k.user_id"
    " WHERE k.key_hash = %(digest)s AND k.revoked_at IS NULL"
)
MINUTE = "%Y-%m-%d %H:%M"  # job_throughput's minutes, as the triggers write them (UTC)


@lru_cache(maxsize=64)
def list_statement(columns: tuple[str, ...], keyset: bool) -> str:
    """The jobs list, newest first: equal to each parameter named in ``columns``, and below
    ``%(before_id)s`` when ``keyset``; ``%(limit)s`` rows."""
    where = [f"{name} = %({name})s" for name in columns] + (["id < %(before_id)s"] if keyset else [])
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {JOB_COLUMNS} FROM jobs{condition} ORDER BY id DESC LIMIT %(limit)s"


def bind_time(value: datetime) -> datetime:
    """A time as bound: timestamptz takes the aware datetime as it is."""
    return value


def _identity(text: str) -> str:
    return text


def bind_json(text: str | None) -> Jsonb | None:
    """A JSON document the caller has already serialized: handed to jsonb as the text it is (``Jsonb``
    alone would serialize it again)."""
    return None if text is None else Jsonb(text, dumps=_identity)


def _text_array(values: Sequence[str | None]) -> str:
    """A text[] literal: each element double-quoted, its backslashes and double quotes escaped (the only
    characters a quoted element must escape); None is NULL. Written here rather than by psycopg, whose
    list dumper costs about ten times as much per element, on the batch complete's every item."""
    quoted = [
        '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' if v is not None else "NULL" for v in values
    ]
    return "{" + ",".join(quoted) + "}"


def bind_items(items: Sequence[tuple[int, str, str | None]]) -> dict[str, str]:
    """``COMPLETE_MANY``'s parameters: the items as three array literals, cast by the statement."""
    return {
        "ids": "{" + ",".join([str(int(i)) for i, _, _ in items]) + "}",
        "tokens": _text_array([t for _, t, _ in items]),
        "results": _text_array([r for _, _, r in items]),
    }


def decode_time(value: datetime | None) -> datetime | None:
    """A timestamptz as psycopg answers it (in the session's zone: UTC itself, as the engine sets it),
    made UTC."""
    return value if value is None or value.tzinfo is UTC else value.astimezone(UTC)


def schema_text(schema: str | None) -> str | None:
    """A payload schema as canonical JSON text (jsonb arrives as text: ``Database.cursor``)."""
    return None if schema is None else json.dumps(json.loads(schema), sort_keys=True)


_TIMES = tuple(i for i, name in enumerate(JOB_FIELDS) if name.endswith("_at"))
_CREATED = JOB_FIELDS.index("created_at")  # never NULL
_new = tuple.__new__


def decode_job(row: Sequence[Any]) -> JobRecord:
    """A ``jobs`` row in ``JOB_COLUMNS`` order. jsonb comes as its text (``Database.cursor``); times come
    in the session's time zone (UTC, unless the connection predates the engine) and are made UTC."""
    # psycopg loads every time of a result in the same zone, the session's: when one is in UTC, all are,
    # and the row is the record as it is (this runs for each of the 100 rows of a batch, twice).
    if row[_CREATED].tzinfo is UTC:
        return _new(JobRecord, row)
    values = list(row)
    for i in _TIMES:
        value = values[i]
        if value is not None and value.tzinfo is not UTC:
            values[i] = value.astimezone(UTC)
    return _new(JobRecord, values)


# -- bulk actions (the console): a batch of ids as one array; the status each needs, and the history rows,
# in the same statement ----------------------------------------------------------------------------------

_IDS = "id = ANY(%(ids)s::bigint[])"
BULK = {
    # retry and cancel answer whole jobs: the engine settles those in a workflow in the same transaction
    "retry": f"WITH r AS (UPDATE jobs SET status = {_AGAIN}, retry_count = 0, available_at = %(now)s,"
    f" finished_at = NULL, updated_at = %(now)s WHERE {_IDS} AND status IN ('failed', 'cancelled')"
    f" RETURNING {JOB_COLUMNS}), e AS ({_EVENT}'retried', %(actor)s, 0, NULL FROM r) SELECT {JOB_COLUMNS} FROM r",
    "cancel": "WITH c AS (UPDATE jobs SET status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s,"
    f" waiting_on = NULL WHERE {_IDS} AND status IN ('pending', 'waiting') RETURNING {JOB_COLUMNS}),"
    f" e AS ({_EVENT}'cancelled', %(actor)s, retry_count, NULL FROM c) SELECT {JOB_COLUMNS} FROM c",
    "delete": f"WITH gone AS (DELETE FROM jobs WHERE {_IDS} AND status IN ('completed', 'failed', 'cancelled')"
    " RETURNING id), h AS (DELETE FROM job_events WHERE job_id IN (SELECT id FROM gone)) SELECT id FROM gone",
}


# -- the console's reads (reads.py; ConsoleReads in console.py) ---------------------------------------------------------

_SAMPLE = "SELECT id, type, status, worker_id, available_at, claimed_at, finished_at FROM jobs"
# Running jobs only: through the partial index of leases (or the status index), never the whole table.
# The running attempt's progress only: a report older than the claim belongs to an earlier attempt.
_HELD_PROGRESS = "CASE WHEN progress_at >= claimed_at THEN {} END"
HELD_JOBS = (
    "SELECT id, type, worker_id, claimed_at, lease_expires_at,"
    f" {_HELD_PROGRESS.format('progress_percent')}, {_HELD_PROGRESS.format('progress_note')}"
    " FROM jobs WHERE status = 'running' ORDER BY lease_expires_at LIMIT %(limit)s"
)
HELD_COUNTS = "SELECT worker_id, count(*) FROM jobs WHERE status = 'running' GROUP BY worker_id"
# Through ix_jobs_status_finished_at, from its newest end.
# Through the partial index of finished jobs (ix_jobs_finished), whose condition is repeated in words so
# that a generic plan of the prepared statement can use it too.
RECENT_FINISHED = (
    f"{_SAMPLE} WHERE status = %(status)s AND status IN ('completed', 'failed', 'cancelled')"
    " AND finished_at >= %(since)s ORDER BY finished_at DESC LIMIT %(limit)s"
)
# Through ix_jobs_type_id, from its newest end.
RECENT_OF_TYPE = f"{_SAMPLE} WHERE type = %(type)s ORDER BY id DESC LIMIT %(limit)s"
# api_keys holds one row per key ever made: a few hundred at most.
WORKER_KEYS = (
    "SELECT name, created_at, last_used_at, revoked_at FROM api_keys WHERE kind = 'worker'"
    " AND last_used_at >= %(since)s ORDER BY last_used_at DESC LIMIT %(limit)s"
)


# -- firing a schedule's slot (shared.py) ---------------------------------------------------------------

ADVANCE_SCHEDULE = (
    "UPDATE schedules SET next_fire_at = %(next)s, last_fire_at = COALESCE(%(last)s, last_fire_at)"
    " WHERE id = %(id)s AND revision = %(revision)s AND next_fire_at = %(due)s AND NOT paused RETURNING id"
)
TOUCH_SCHEDULE = "UPDATE schedules SET last_fire_at = %(slot)s WHERE id = %(id)s RETURNING id"  # "run now"
CLAIM_SLOT = (
    "INSERT INTO schedule_fires (schedule_id, slot_at, job_id, fired_at) VALUES (%(id)s, %(slot)s, NULL, %(now)s)"
    " ON CONFLICT DO NOTHING RETURNING schedule_id"
)
SET_SLOT_JOB = "UPDATE schedule_fires SET job_id = %(job)s WHERE schedule_id = %(id)s AND slot_at = %(slot)s"
FORGET_SLOTS = "DELETE FROM schedule_fires WHERE schedule_id = %(id)s AND slot_at < %(horizon)s"
AUDIT = (
    "INSERT INTO audit_log (at, actor, action, target, detail)"
    " VALUES (%(now)s, %(actor)s, %(action)s, %(target)s, %(detail)s)"
)


def _param(name: str) -> str:
    return f"%({name})s"


def _bind_ids(ids: Sequence[int]) -> list[int]:
    return [int(i) for i in ids]


def _bind_path(keys: Sequence[str]) -> list[str]:
    """A payload path as a text array, for ``#>``."""
    return list(keys)


DIALECT = Dialect(
    name="postgresql",
    param=_param,
    bind_time=bind_time,
    decode_time=decode_time,
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
    # lower() folds ASCII only, as on SQLite; strpos takes the text literally (no LIKE escapes).
    error_holds="strpos(lower(error), lower(%(error)s)) > 0",
    ids_among="id = ANY(%(ids)s)",
    # Strings as they are, numbers as written, true/false; objects, arrays and null never match.
    payload_equals=(
        "(CASE jsonb_typeof(payload #> %(payload_path)s) WHEN 'object' THEN NULL WHEN 'array' THEN NULL"
        " WHEN 'null' THEN NULL ELSE payload #>> %(payload_path)s END) = %(payload_value)s"
    ),
    advance_schedule=ADVANCE_SCHEDULE,
    touch_schedule=TOUCH_SCHEDULE,
    claim_slot=CLAIM_SLOT,
    set_slot_job=SET_SLOT_JOB,
    forget_slots=FORGET_SLOTS,
    audit=AUDIT,
)


def plain(statement: str) -> str:
    """``statement`` (a transition whose first RETURNING ends its guarded UPDATE) for jobs outside every
    workflow only."""
    head, sep, tail = statement.partition(" RETURNING ")
    return f"{head} AND {_PLAIN}{sep}{tail}"


# -- workflows (queuelog/engines/workflows.py; docs/workflows.md) ------------------------------------------
# Lists of ids arrive as bigint arrays (%(ids)s, %(own)s). These run in one transaction per operation.

_ANY = "ANY(%({})s::bigint[])"
_TAKE = f"UPDATE jobs SET dependents = dependents + 1 WHERE id = {_ANY.format('ids')}"
_FLOW_NEW = (
    "INSERT INTO jobs (type, payload, priority, status, retry_count, max_retries, idempotency_key, fingerprint,"
    " owner, available_at, created_at, updated_at, finished_at, batch_id, callback_of, depends_on, waiting_on,"
    " on_dependency_failure) VALUES (%(type)s, %(payload)s, %(priority)s, %(status)s, 0, %(max_retries)s,"
    " %(key)s, %(fingerprint)s, %(owner)s, %(available_at)s, %(now)s, %(now)s, %(finished_at)s, %(batch_id)s,"
    " %(callback_of)s, %(depends_on)s, %(waiting_on)s, %(on_failure)s) ON CONFLICT DO NOTHING"
    f" RETURNING {JOB_COLUMNS}"
)
_WAITS = "j.status = 'waiting' AND j.on_dependency_failure IS NULL"
DOOMED = (
    "WITH RECURSIVE doomed(id, cause) AS (SELECT d.job_id, d.depends_on_id FROM job_dependencies d"
    f" JOIN jobs j ON j.id = d.job_id WHERE d.depends_on_id = {_ANY.format('ids')} AND {_WAITS}"
    " UNION SELECT d.job_id, d.depends_on_id FROM doomed JOIN job_dependencies d ON d.depends_on_id = doomed.id"
    f" JOIN jobs j ON j.id = d.job_id WHERE {_WAITS}) SELECT id, min(cause) FROM doomed GROUP BY id"
)
_CANDIDATES = (
    f"(id IN (SELECT job_id FROM job_dependencies WHERE depends_on_id = {_ANY.format('ids')})"
    f" OR id = {_ANY.format('own')}) AND status = 'waiting'"
)
_ENDED = "('completed', 'failed', 'cancelled')"
# Every waiting dependent of %(ids)s (and each of %(own)s), in one statement: its dependencies counted in
# one grouped pass over the dependency rows, then pending when they are all finished (and, unless it runs
# whatever their outcome, none failed), else waiting on the rest. LOCK_WAITING runs first, in its own
# statement: this one's snapshot then sees every dependency that a transaction it waited for finished.
_TALLY = (
    f"SELECT d.job_id AS job, count(*) FILTER (WHERE p.status NOT IN {_ENDED}) AS open,"
    " count(*) FILTER (WHERE p.status IN ('failed', 'cancelled')) AS bad,"
    f" json_agg(p.id ORDER BY p.id) FILTER (WHERE p.status NOT IN {_ENDED})::text AS rest"
    " FROM job_dependencies d JOIN jobs p ON p.id = d.depends_on_id WHERE d.job_id IN (SELECT job_id"
    f" FROM job_dependencies WHERE depends_on_id = {_ANY.format('ids')} UNION SELECT"
    " unnest(%(own)s::bigint[])) GROUP BY d.job_id"
)
_READY = "a.open = 0 AND (jobs.on_dependency_failure = 'run' OR a.bad = 0)"
REFRESH = (
    f"UPDATE jobs SET status = CASE WHEN {_READY} THEN 'pending' ELSE 'waiting' END,"
    f" available_at = CASE WHEN {_READY} THEN greatest(jobs.available_at, %(now)s) ELSE jobs.available_at END,"
    f" waiting_on = CASE WHEN {_READY} THEN NULL ELSE coalesce(a.rest, '[]') END, updated_at = %(now)s"
    f" FROM ({_TALLY}) AS a WHERE jobs.id = a.job AND jobs.status = 'waiting' RETURNING jobs.id, jobs.status, jobs.retry_count"
)
LOCK_WAITING = f"SELECT id FROM jobs WHERE {_CANDIDATES} ORDER BY id FOR UPDATE"
_BATCH_OPEN = "finished + %(done)s < total"


def list_batches(columns: tuple[str, ...], keyset: bool) -> str:
    where = [f"{name} = %({name})s" for name in columns] + (["id < %(before_id)s"] if keyset else [])
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {BATCH_COLUMNS} FROM batches{condition} ORDER BY id DESC LIMIT %(limit)s"


# A whole insert of jobs that wait (workflows.py, ``_insert_at_once``): ids reserved first, so that each job's
# ``depends_on`` can name its siblings; then one statement inserts the jobs (in id order), their dependency
# rows and their history rows ('enqueued', then 'cancelled' for a job a finished dependency cancels).
_MANY = (
    ("ids", "id", "bigint"),
    ("types", "type", "text"),
    ("payloads", "payload", "text"),
    ("priorities", "priority", "smallint"),
    ("statuses", "status", "text"),
    ("max_retries", "max_retries", "integer"),
    ("keys", "idempotency_key", "text"),
    ("fingerprints", "fingerprint", "text"),
    ("available_at", "available_at", "timestamptz"),
    ("depends_on", "depends_on", "text"),
    ("waiting_on", "waiting_on", "text"),
    ("on_failure", "on_dependency_failure", "text"),
    ("dependents", "dependents", "integer"),
)
_INSERT_MANY = (
    "WITH j AS (INSERT INTO jobs (id, type, payload, priority, status, retry_count, max_retries,"
    " idempotency_key, fingerprint, owner, available_at, created_at, updated_at, finished_at, batch_id,"
    " callback_of, depends_on, waiting_on, on_dependency_failure, dependents)"
    " SELECT u.id, u.type, u.payload::jsonb, u.priority, u.status, 0, u.max_retries, u.idempotency_key,"
    " u.fingerprint, %(owner)s::text, u.available_at, %(now)s::timestamptz, %(now)s::timestamptz,"
    " CASE WHEN u.status = 'cancelled' THEN %(now)s::timestamptz END, %(batch_id)s::bigint, NULL, u.depends_on,"
    " u.waiting_on, u.on_dependency_failure, u.dependents"
    f" FROM unnest({', '.join(f'%({name})s::{kind}[]' for name, _, kind in _MANY)})"
    f" AS u({', '.join(column for _, column, _ in _MANY)}) ORDER BY u.id"
    f" ON CONFLICT DO NOTHING RETURNING {JOB_COLUMNS}),"
    " d AS (INSERT INTO job_dependencies (job_id, depends_on_id) SELECT e.job_id, e.dep"
    " FROM unnest(%(edge_jobs)s::bigint[], %(edge_deps)s::bigint[]) AS e(job_id, dep)"
    " WHERE e.job_id IN (SELECT id FROM j)),"
    " h AS (INSERT INTO job_events (job_id, at, event, actor, attempt, error)"
    " SELECT x.job_id, %(now)s::timestamptz, x.event, x.actor, 0, NULL FROM ("
    "SELECT id AS job_id, 0 AS step, 'enqueued' AS event, %(owner)s::text AS actor FROM j UNION ALL"
    " SELECT c.job_id, 1, 'cancelled', 'job ' || c.cause FROM unnest(%(cancelled)s::bigint[],"
    " %(causes)s::bigint[]) AS c(job_id, cause) WHERE c.job_id IN (SELECT id FROM j)"
    ") x ORDER BY x.job_id, x.step)"
    f" SELECT {JOB_COLUMNS} FROM j ORDER BY id"
)
_INTEGERS = frozenset(name for name, _, kind in _MANY if kind in ("bigint", "smallint", "integer"))


def bind_many(columns: dict[str, list[Any]]) -> dict[str, str]:
    """``_INSERT_MANY``'s parameters: each list as an array literal, cast by the statement."""
    out: dict[str, str] = {}
    for name, values in columns.items():
        if name in _INTEGERS or name in ("edge_jobs", "edge_deps", "cancelled", "causes"):
            out[name] = "{" + ",".join([str(int(v)) for v in values]) + "}"
        elif name == "available_at":
            out[name] = _text_array([v.isoformat() for v in values])
        else:
            out[name] = _text_array(values)
    return out


_TAKE_COUNTED = (
    "UPDATE jobs SET dependents = jobs.dependents + t.n FROM unnest(%(ids)s::bigint[], %(counts)s::integer[])"
    " AS t(id, n) WHERE jobs.id = t.id"
)

FLOWS = Flows(
    bind_ids=_bind_ids,
    bind_time=bind_time,
    bind_json=bind_json,
    decode_job=decode_job,
    decode_time=decode_time,
    event="INSERT INTO job_events (job_id, at, event, actor, attempt, error) VALUES (%s, %s, %s, %s, %s, %s)",
    take_dependencies={
        False: f"{_TAKE} RETURNING id, status",
        True: f"{_TAKE} AND owner = %(owner)s RETURNING id, status",
    },
    find_dependencies={
        False: f"SELECT id FROM jobs WHERE id = {_ANY.format('ids')}",
        True: f"SELECT id FROM jobs WHERE id = {_ANY.format('ids')} AND owner = %(owner)s",
    },
    insert=_FLOW_NEW,
    by_key=BY_KEY,
    dependency="INSERT INTO job_dependencies (job_id, depends_on_id) VALUES (%s, %s)",
    doomed=DOOMED,
    cancel_doomed="UPDATE jobs SET status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s,"
    f" waiting_on = NULL WHERE id = {_ANY.format('ids')} AND status = 'waiting' RETURNING {JOB_COLUMNS}",
    lock_waiting=LOCK_WAITING,
    refresh=REFRESH,
    count_batch="UPDATE batches SET finished = finished + %(done)s, failed = failed + %(failed)s,"
    f" status = CASE WHEN {_BATCH_OPEN} THEN 'running' ELSE status END,"
    f" finished_at = CASE WHEN {_BATCH_OPEN} THEN NULL ELSE finished_at END, updated_at = %(now)s"
    " WHERE id = %(id)s RETURNING finished, total, status",
    finish_batch="UPDATE batches SET status = CASE WHEN failed = 0 THEN 'succeeded' ELSE"
    " 'finished_with_failures' END, finished_at = %(now)s, updated_at = %(now)s WHERE id = %(id)s"
    " AND status = 'running' AND finished >= total"
    " RETURNING owner, status, on_success, on_finish, on_success_job, on_finish_job",
    set_callbacks="UPDATE batches SET on_success_job = %(success)s, on_finish_job = %(finish)s WHERE id = %(id)s",
    insert_batch="INSERT INTO batches (owner, description, status, total, finished, failed, idempotency_key,"
    " fingerprint, on_success, on_finish, created_at, updated_at) VALUES (%(owner)s, %(description)s,"
    " 'running', 0, 0, 0, %(key)s, %(fingerprint)s, %(on_success)s, %(on_finish)s, %(now)s, %(now)s)"
    " ON CONFLICT DO NOTHING RETURNING id",
    batch_by_key="SELECT id, fingerprint FROM batches WHERE owner = %(owner)s AND idempotency_key = %(key)s",
    get_batch=f"SELECT {BATCH_COLUMNS} FROM batches WHERE id = %(id)s",
    set_batch_counts="UPDATE batches SET total = %(total)s, finished = %(finished)s, failed = %(failed)s"
    " WHERE id = %(id)s",
    members=f"SELECT batch_id, id, status FROM jobs WHERE batch_id = {_ANY.format('ids')} AND callback_of IS NULL ORDER BY id",
    list_batches=list_batches,
    cancel_members="UPDATE jobs SET status = 'cancelled', finished_at = %(now)s, updated_at = %(now)s,"
    " waiting_on = NULL WHERE batch_id = %(id)s AND callback_of IS NULL AND status IN ('pending', 'waiting')"
    f" RETURNING {JOB_COLUMNS}",
    request_cancel_members="UPDATE jobs SET cancel_requested_at = %(now)s, cancel_requested_by = %(actor)s,"
    " updated_at = %(now)s WHERE batch_id = %(id)s AND callback_of IS NULL AND status = 'running' AND cancel_requested_at IS NULL"
    " RETURNING id, retry_count",
    retry_members=f"UPDATE jobs SET status = {_AGAIN}, retry_count = 0, available_at = %(now)s,"
    " finished_at = NULL, updated_at = %(now)s WHERE batch_id = %(id)s AND callback_of IS NULL AND status IN ('failed', 'cancelled')"
    f" RETURNING {JOB_COLUMNS}",
    # The member's row stays locked to the end of the transaction: it cannot finish meanwhile.
    holds_member="SELECT id FROM jobs WHERE batch_id = %(id)s AND callback_of IS NULL AND status = 'running' AND worker_id = %(worker)s"
    " AND lease_token = %(token)s FOR UPDATE",
    grow_batch="UPDATE batches SET total = total + %(n)s, updated_at = %(now)s WHERE id = %(id)s"
    " AND status = 'running' RETURNING owner",
    dependents_of="SELECT job_id FROM job_dependencies WHERE depends_on_id = %(id)s ORDER BY job_id"
    " LIMIT %(limit)s",
    reserve_ids="SELECT nextval(pg_get_serial_sequence('jobs', 'id')) FROM generate_series(1, %(n)s)",
    by_keys=f"SELECT idempotency_key, fingerprint, {JOB_COLUMNS} FROM jobs WHERE owner = %(owner)s"
    " AND idempotency_key = ANY(%(keys)s::text[])",
    take_counted={
        False: f"{_TAKE_COUNTED} RETURNING jobs.id, jobs.status",
        True: f"{_TAKE_COUNTED} AND jobs.owner = %(owner)s RETURNING jobs.id, jobs.status",
    },
    insert_many=_INSERT_MANY,
    bind_many=bind_many,
)
# -- a report and the next claim, in one statement (docs/api.md#report-and-claim-in-one-request) --------
# The counter triggers count each statement into a shard of their own drawn at random (migration 0003): two
# statements of one transaction would take counter rows' locks in an order another transaction may
# reverse. One statement counts everything it changed at once, in key order. The claim's writes (settling
# expired leases, leasing jobs) happen only when the report did; the reported job is left to the report.
_REPORT_GUARD = "EXISTS (SELECT 1 FROM {reported})"
_EXPIRE_WHERE = f"WHERE status = 'running' AND lease_expires_at < %(now)s AND {_PLAIN} RETURNING"
_LEASE_WHERE = "WHERE jobs.id = ANY(ARRAY(SELECT id FROM within))"


def _spliced(report: str, claim: str, reported_columns: str, *, expire_guard: str, lease_guard: str) -> str:
    """``report`` (``WITH <its CTEs> SELECT <columns> FROM <the updated rows>``) and ``claim`` as one
    statement, its rows tagged 'claimed', 'expired' or 'reported' (``reported_columns`` of the reported
    rows, in the claim's columns' places). ``expire_guard`` keeps the claim's lease settling off the
    reported jobs (a row updated twice in one statement keeps one update only), ``lease_guard`` says when
    the claim may lease jobs."""
    ctes, _, final = report.removeprefix("WITH ").rpartition(" SELECT ")
    reported = final.rsplit(" FROM ", 1)[1]
    assert claim.count(_EXPIRE_WHERE) == claim.count(_LEASE_WHERE) == 1, "the claim's shape changed"
    claim = claim.replace(
        _EXPIRE_WHERE, _EXPIRE_WHERE.replace(" RETURNING", f" AND {expire_guard} RETURNING")
    )
    if lease_guard:
        claim = claim.replace(_LEASE_WHERE, f"{_LEASE_WHERE} AND {lease_guard}")
    return (
        claim.replace("WITH RECURSIVE ", f"WITH RECURSIVE {ctes}, ", 1)
        + f" UNION ALL SELECT 'reported', {reported_columns} FROM {reported}"
    )


def _then_claim(report: str, claim: str) -> str:
    """One guarded report (its lease token bound as ``held``; the claim's ``token`` is the new lease's)
    and ``claim``: the claim's writes happen only when the report did."""
    reported = report.rpartition(" FROM ")[2]
    guard = _REPORT_GUARD.format(reported=reported)
    report = report.replace("%(token)s", "%(held)s")
    return _spliced(report, claim, JOB_COLUMNS, expire_guard=f"id <> %(id)s AND {guard}", lease_guard=guard)


# A batch completion's reported rows: each job's id and status, in the places of the claim's columns.
_EACH_REPORTED = ", ".join(c if c in ("id", "status") else "NULL" for c in JOB_FIELDS)
_EACH_ID, _EACH_STATUS = 1 + JOB_FIELDS.index("id"), 1 + JOB_FIELDS.index("status")


def _each_then_claim(claim: str) -> str:
    """A batch completion (``plain(COMPLETE_EACH)``) and ``claim``: the claim's writes happen whatever
    each item's outcome (each stands alone)."""
    return _spliced(
        plain(COMPLETE_EACH),
        claim,
        _EACH_REPORTED,
        expire_guard="id <> ALL(%(ids)s::bigint[])",
        lease_guard="",
    )


def each_reported(tagged: list[Any]) -> list[tuple[int, str]]:
    """The id and status of each job COMPLETE_EACH_THEN_CLAIM completed, from its tagged rows."""
    return [(row[_EACH_ID], row[_EACH_STATUS]) for row in tagged if row[0] == "reported"]


_CLAIMS = (*CLAIM.values(), *CLAIM_IN_ORDER.values())
# Keyed by the claim statement the engine would run alone.
# The reports of jobs outside every workflow only (``plain``): any other report is made alone (engine.py).
COMPLETE_THEN_CLAIM = {claim: _then_claim(plain(COMPLETE), claim) for claim in _CLAIMS}
FAIL_THEN_CLAIM = {claim: _then_claim(plain(FAIL), claim) for claim in _CLAIMS}


COMPLETE_EACH_THEN_CLAIM = {claim: _each_then_claim(claim) for claim in _CLAIMS}
