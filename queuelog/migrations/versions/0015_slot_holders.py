"""jobs.holds_slot: whether a running job took a slot of its type's concurrency limit; on PostgreSQL the
wake-up trigger of updates calls its function only for the end of such a job (docs/performance.md#batches-on-postgresql)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# Migration 0012's trigger called its function for every job that stopped running, and the function then
# looked up whether the job's type has a concurrency limit (only then does its end free room a waiting
# claim can use): a batch completion of 100 jobs made 100 calls that, without limits, all found nothing.
# PostgreSQL's claim now marks the jobs of limited types it takes (queuelog/engines/postgres/sql.py), and
# the trigger's condition reads the mark: the end of any other job calls nothing.
_ENDED = "OLD.status = 'running' AND NEW.status <> 'running'"
UPDATE_TRIGGER = (
    "CREATE TRIGGER jobs_ready_update AFTER UPDATE OF status, available_at ON jobs FOR EACH ROW"
    " WHEN (NEW.status = 'pending' OR ({ended})) EXECUTE FUNCTION queuelog_jobs_ready()"
)
# The jobs running when the migration runs were claimed without the mark; so were those running when their
# type is given a concurrency limit, which a trigger on job_types marks then, whoever sets the limit.
MARK_RUNNING = (
    "UPDATE jobs SET holds_slot = true WHERE status = 'running' AND NOT holds_slot"
    " AND type IN (SELECT name FROM job_types WHERE concurrency_limit IS NOT NULL)"
)
MARK_FUNCTION = """
CREATE FUNCTION queuelog_limit_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET holds_slot = true WHERE status = 'running' AND type = NEW.name AND NOT holds_slot;
    RETURN NULL;
END $$
"""
MARK_TRIGGERS = {
    "job_types_limit_set": "AFTER UPDATE OF concurrency_limit ON job_types FOR EACH ROW"
    " WHEN (NEW.concurrency_limit IS NOT NULL AND OLD.concurrency_limit IS NULL)",
    "job_types_limited": "AFTER INSERT ON job_types FOR EACH ROW WHEN (NEW.concurrency_limit IS NOT NULL)",
}


def upgrade() -> None:
    op.add_column("jobs", sa.Column("holds_slot", sa.Boolean(), nullable=False, server_default=sa.false()))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(MARK_RUNNING)
        op.execute(MARK_FUNCTION)
        for name, when in MARK_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} EXECUTE FUNCTION queuelog_limit_set()")
        op.execute("DROP TRIGGER jobs_ready_update ON jobs")
        op.execute(UPDATE_TRIGGER.format(ended=f"{_ENDED} AND OLD.holds_slot"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_ready_update ON jobs")
        op.execute(UPDATE_TRIGGER.format(ended=_ENDED))  # 0012's
        for name in MARK_TRIGGERS:
            op.execute(f"DROP TRIGGER {name} ON job_types")
        op.execute("DROP FUNCTION queuelog_limit_set()")
    op.drop_column("jobs", "holds_slot")  # plain DROP COLUMN: rebuilding the table would drop its triggers
