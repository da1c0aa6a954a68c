"""on PostgreSQL, the job counters' trigger linear in the rows whatever it was planned for, and the wake-up
notification of inserted jobs sent once per statement (docs/performance.md#batches-on-postgresql)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The counters' trigger (migration 0003) pairs each row's old and new version (docs/performance.md,
# "Batches on PostgreSQL", says why the join it used could go quadratic). The changed rows, three ways:
# of a statement of one row, each transition table holds that one row, so the cross join is the pair;
_CHANGED_ONE_ROW = (
    "SELECT n.owner, n.type, n.priority, o.status AS was, n.status AS became, n.finished_at"
    " FROM old_rows o, new_rows n WHERE o.status <> n.status"
)
# of any statement, grouped by id: each id has exactly one old and one new version, so each min(...)
# FILTER picks that version's value, in time linear in the rows whatever plan the first call left;
_CHANGED_BY_ID = (
    "SELECT owner, type, priority, was, became, finished_at FROM (SELECT id,"
    " min(owner) FILTER (WHERE NOT r.is_old) AS owner, min(type) FILTER (WHERE NOT r.is_old) AS type,"
    " min(priority) FILTER (WHERE NOT r.is_old) AS priority, min(status) FILTER (WHERE r.is_old) AS was,"
    " min(status) FILTER (WHERE NOT r.is_old) AS became,"
    " min(finished_at) FILTER (WHERE NOT r.is_old) AS finished_at"
    " FROM (SELECT true AS is_old, id, owner, type, priority, status, finished_at FROM old_rows"
    " UNION ALL SELECT false, id, owner, type, priority, status, finished_at FROM new_rows) AS r"
    " GROUP BY id) AS pair WHERE was <> became"
)
# and migration 0003's join, for the downgrade.
_CHANGED_JOINED = (
    "SELECT n.owner, n.type, n.priority, o.status AS was, n.status AS became, n.finished_at"
    " FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE o.status <> n.status"
)
# What 0003's statement does with the changed rows: each counter once, in key order, into a random shard.
_COUNT = """
    WITH changed AS MATERIALIZED ({changed}), counted AS (
        INSERT INTO job_counts (owner, type, priority, status, shard, n)
        SELECT owner, type, priority, status, s, sum(delta) FROM (
            SELECT owner, type, priority, was AS status, -1 AS delta FROM changed
            UNION ALL SELECT owner, type, priority, became, 1 FROM changed) AS d
        GROUP BY owner, type, priority, status ORDER BY owner, type, priority, status
        ON CONFLICT (owner, type, priority, status, shard) DO UPDATE SET n = job_counts.n + excluded.n
    )
    INSERT INTO job_throughput (minute, owner, status, shard, n)
    SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), owner, became, s, count(*)
    FROM changed WHERE became IN ('completed', 'failed') AND finished_at IS NOT NULL
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (minute, owner, status, shard) DO UPDATE SET n = job_throughput.n + excluded.n"""
# One row: a row whose status stayed (a heartbeat, progress) stops at the first comparison.
COUNT_UPDATE = f"""
CREATE OR REPLACE FUNCTION queuelog_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s smallint := floor(random() * 8)::smallint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows OFFSET 1) THEN
        IF EXISTS (SELECT 1 FROM old_rows o, new_rows n WHERE o.status <> n.status) THEN
            {_COUNT.format(changed=_CHANGED_ONE_ROW)};
        END IF;
    ELSE
        {_COUNT.format(changed=_CHANGED_BY_ID)};
    END IF;
    RETURN NULL;
END $$
"""
COUNT_UPDATE_JOINED = f"""
CREATE OR REPLACE FUNCTION queuelog_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s smallint := floor(random() * 8)::smallint;
BEGIN
    {_COUNT.format(changed=_CHANGED_JOINED)};
    RETURN NULL;
END $$
"""

# Migration 0012's notification of inserted jobs, with one function call per statement instead of one per
# row: a batch of 500 jobs calls it once, and it sends "<due epoch> <type>" for each distinct due time and
# type of the rows inserted pending, on the channel 0012 names (the listeners hear what they heard before:
# PostgreSQL folds identical notifications of one transaction into one). Updates keep 0012's row trigger:
# its condition passes over claims and heartbeats without calling anything, where a statement trigger
# costs every single-row update a call (measured: about 40 us more for each heartbeat).
NOTIFY_INSERTED = """
CREATE FUNCTION queuelog_jobs_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('queuelog_jobs:' || current_schema(), extract(epoch FROM due)::text || ' ' || type)
    FROM (SELECT DISTINCT available_at AS due, type FROM new_rows WHERE status = 'pending') AS ready;
    RETURN NULL;
END $$
"""
INSERT_TRIGGER = (
    "CREATE TRIGGER jobs_ready_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION queuelog_jobs_inserted()"
)
ROW_INSERT_TRIGGER = (  # migration 0012's, for the downgrade (its function stays: other triggers call it)
    "CREATE TRIGGER jobs_ready_insert AFTER INSERT ON jobs FOR EACH ROW WHEN (NEW.status = 'pending')"
    " EXECUTE FUNCTION queuelog_jobs_ready()"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(COUNT_UPDATE)
        op.execute("DROP TRIGGER jobs_ready_insert ON jobs")
        op.execute(NOTIFY_INSERTED)
        op.execute(INSERT_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_ready_insert ON jobs")
        op.execute("DROP FUNCTION queuelog_jobs_inserted()")
        op.execute(ROW_INSERT_TRIGGER)
        op.execute(COUNT_UPDATE_JOINED)
