"""job counts and per-minute throughput kept by triggers; indexes for the errors page and type filters

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = [
    """CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN
        INSERT INTO job_counts (owner, type, priority, status, shard, n)
        VALUES (NEW.owner, NEW.type, NEW.priority, NEW.status, 0, 1)
        ON CONFLICT (owner, type, priority, status, shard) DO UPDATE SET n = n + 1;
    END""",
    """CREATE TRIGGER jobs_count_update AFTER UPDATE OF status ON jobs WHEN OLD.status <> NEW.status BEGIN
        UPDATE job_counts SET n = n - 1 WHERE owner = OLD.owner AND type = OLD.type
            AND priority = OLD.priority AND status = OLD.status AND shard = 0;
        INSERT INTO job_counts (owner, type, priority, status, shard, n)
        VALUES (NEW.owner, NEW.type, NEW.priority, NEW.status, 0, 1)
        ON CONFLICT (owner, type, priority, status, shard) DO UPDATE SET n = n + 1;
    END""",
    """CREATE TRIGGER jobs_throughput AFTER UPDATE OF status ON jobs
        WHEN OLD.status <> NEW.status AND NEW.status IN ('completed', 'failed') AND NEW.finished_at IS NOT NULL
    BEGIN
        INSERT INTO job_throughput (minute, owner, status, shard, n)
        VALUES (substr(NEW.finished_at, 1, 16), NEW.owner, NEW.status, 0, 1)
        ON CONFLICT (minute, owner, status, shard) DO UPDATE SET n = n + 1;
    END""",
    """CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
        UPDATE job_counts SET n = n - 1 WHERE owner = OLD.owner AND type = OLD.type
            AND priority = OLD.priority AND status = OLD.status AND shard = 0;
    END""",
]

# Statement-level triggers with transition tables: one statement (a batch claim of 100, say) adds its
# changes up per key and writes each counter once, in key order, so that concurrent transactions take the
# counter rows' locks in the same order. Each statement counts into one of 8 shards picked at random, so
# that concurrent transactions rarely wait for the same row. Readers sum the shards.
_DELTAS = {
    "insert": "SELECT owner, type, priority, status, 1 AS delta FROM new_rows",
    "delete": "SELECT owner, type, priority, status, -1 AS delta FROM old_rows",
}
_UPSERT_COUNTS = """
    INSERT INTO job_counts (owner, type, priority, status, shard, n)
    SELECT owner, type, priority, status, s, sum(delta) FROM ({deltas}) AS d
    GROUP BY owner, type, priority, status ORDER BY owner, type, priority, status
    ON CONFLICT (owner, type, priority, status, shard) DO UPDATE SET n = job_counts.n + excluded.n
"""
# An update: join the old and new rows once, then count the status changes and the finished jobs.
_UPDATE = f"""
    WITH changed AS MATERIALIZED (
        SELECT n.owner, n.type, n.priority, o.status AS was, n.status AS became, n.finished_at
        FROM old_rows o JOIN new_rows n ON n.id = o.id WHERE o.status <> n.status
    ), counted AS ({
    _UPSERT_COUNTS.format(
        deltas="SELECT owner, type, priority, was AS status, -1 AS delta"
        " FROM changed UNION ALL SELECT owner, type, priority, became, 1"
        " FROM changed"
    )
})
    INSERT INTO job_throughput (minute, owner, status, shard, n)
    SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), owner, became, s, count(*)
    FROM changed WHERE became IN ('completed', 'failed') AND finished_at IS NOT NULL
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (minute, owner, status, shard) DO UPDATE SET n = job_throughput.n + excluded.n
"""


def _postgres_function(event: str) -> str:
    body = _UPDATE if event == "update" else _UPSERT_COUNTS.format(deltas=_DELTAS[event])
    return f"""
CREATE FUNCTION queuelog_count_{event}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s smallint := floor(random() * 8)::smallint;
BEGIN
    {body};
    RETURN NULL;
END $$
"""


def _postgres_trigger(event: str) -> str:
    tables = {
        "insert": "NEW TABLE AS new_rows",
        "delete": "OLD TABLE AS old_rows",
        "update": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
    }[event]
    return (
        f"CREATE TRIGGER jobs_count_{event} AFTER {event.upper()} ON jobs REFERENCING {tables}"
        f" FOR EACH STATEMENT EXECUTE FUNCTION queuelog_count_{event}()"
    )


def upgrade() -> None:
    op.create_table(
        "job_counts",
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("owner", "type", "priority", "status", "shard", name=op.f("pk_job_counts")),
    )
    op.create_table(
        "job_throughput",
        sa.Column("minute", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("shard", sa.SmallInteger(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("minute", "owner", "status", "shard", name=op.f("pk_job_throughput")),
    )
    op.create_index("ix_jobs_type_id", "jobs", ["type", "id"], unique=False)
    op.create_index(
        "ix_job_events_failures",
        "job_events",
        ["id"],
        unique=False,
        sqlite_where=sa.text("error IS NOT NULL"),
        postgresql_where=sa.text("error IS NOT NULL"),
    )
    # The counts of the jobs already there, then the triggers that keep them.
    op.execute(
        "INSERT INTO job_counts (owner, type, priority, status, shard, n)"
        " SELECT owner, type, priority, status, 0, count(*) FROM jobs GROUP BY owner, type, priority, status"
    )
    if op.get_bind().dialect.name == "postgresql":
        for event in ("insert", "update", "delete"):
            op.execute(_postgres_function(event))
            op.execute(_postgres_trigger(event))
    else:
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER jobs_count_{event} ON jobs")
            op.execute(f"DROP FUNCTION queuelog_count_{event}()")
    else:
        for name in ("jobs_count_insert", "jobs_count_update", "jobs_count_delete", "jobs_throughput"):
            op.execute(f"DROP TRIGGER {name}")
    op.drop_index("ix_job_events_failures", table_name="job_events")
    op.drop_index("ix_jobs_type_id", table_name="jobs")
    op.drop_table("job_throughput")
    op.drop_table("job_counts")
