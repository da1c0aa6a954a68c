"""job counts kept by triggers; indexes for the errors page and type filters

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
    """CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
        UPDATE job_counts SET n = n - 1 WHERE owner = OLD.owner AND type = OLD.type
            AND priority = OLD.priority AND status = OLD.status AND shard = 0;
    END""",
]

# A row trigger; each change is counted in one of 8 shards picked at random, so that concurrent claims
# and completions rarely wait for the same counter row. Readers sum the shards.
POSTGRES_FUNCTION = """
CREATE FUNCTION queuelog_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s smallint := floor(random() * 8)::smallint;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        IF TG_OP = 'DELETE' OR OLD.status IS DISTINCT FROM NEW.status THEN
            INSERT INTO job_counts (owner, type, priority, status, shard, n)
            VALUES (OLD.owner, OLD.type, OLD.priority, OLD.status, s, -1)
            ON CONFLICT (owner, type, priority, status, shard) DO UPDATE SET n = job_counts.n - 1;
        END IF;
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND OLD.status IS DISTINCT FROM NEW.status) THEN
        INSERT INTO job_counts (owner, type, priority, status, shard, n)
        VALUES (NEW.owner, NEW.type, NEW.priority, NEW.status, s, 1)
        ON CONFLICT (owner, type, priority, status, shard) DO UPDATE SET n = job_counts.n + 1;
    END IF;
    RETURN NULL;
END $$
"""
POSTGRES_TRIGGER = """
CREATE TRIGGER jobs_count AFTER INSERT OR DELETE OR UPDATE OF status ON jobs
FOR EACH ROW EXECUTE FUNCTION queuelog_count_jobs()
"""


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
        op.execute(POSTGRES_FUNCTION)
        op.execute(POSTGRES_TRIGGER)
    else:
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_count ON jobs")
        op.execute("DROP FUNCTION queuelog_count_jobs()")
    else:
        for name in ("jobs_count_insert", "jobs_count_update", "jobs_count_delete"):
            op.execute(f"DROP TRIGGER {name}")
    op.drop_index("ix_job_events_failures", table_name="job_events")
    op.drop_index("ix_jobs_type_id", table_name="jobs")
    op.drop_table("job_counts")
