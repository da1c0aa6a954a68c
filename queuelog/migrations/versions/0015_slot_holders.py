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
UPDATE_TRIGGER = (
    "CREATE TRIGGER jobs_ready_update AFTER UPDATE OF status, available_at ON jobs FOR EACH ROW"
    " WHEN (NEW.status = 'pending' OR (OLD.status = 'running' AND NEW.status <> 'running' AND {held}))"
    " EXECUTE FUNCTION queuelog_jobs_ready()"
)
# The jobs running when the migration runs were claimed without the mark.
MARK_RUNNING = (
    "UPDATE jobs SET holds_slot = true WHERE status = 'running'"
    " AND type IN (SELECT name FROM job_types WHERE concurrency_limit IS NOT NULL)"
)


def upgrade() -> None:
    op.add_column("jobs", sa.Column("holds_slot", sa.Boolean(), nullable=False, server_default=sa.false()))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(MARK_RUNNING)
        op.execute("DROP TRIGGER jobs_ready_update ON jobs")
        op.execute(UPDATE_TRIGGER.format(held="OLD.holds_slot"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER jobs_ready_update ON jobs")
        op.execute(UPDATE_TRIGGER.format(held="true"))  # 0012's
    op.drop_column("jobs", "holds_slot")  # plain DROP COLUMN: rebuilding the table would drop its triggers
