"""per-type flow control: a concurrency limit, a rate limit with its token bucket, and an index of running
jobs by type (docs/flow-control.md)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


# All nullable: a type without limits (every type before this revision) has NULL in each. The bucket's
# state (rate_tokens, rate_checked_at) is written by the claim itself; NULL tokens mean a full bucket.
def _columns() -> list[sa.Column]:
    return [
        sa.Column("concurrency_limit", sa.Integer(), nullable=True),
        sa.Column("rate_limit", sa.Integer(), nullable=True),
        sa.Column("rate_period", sa.Integer(), nullable=True),
        sa.Column("rate_tokens", sa.Float(), nullable=True),
        sa.Column("rate_checked_at", sa.DateTime(timezone=True), nullable=True),
    ]


def upgrade() -> None:
    for column in _columns():
        op.add_column("job_types", column)
    # A limited type's running jobs are counted by every claim: through this index the count reads that
    # type's running entries only, at most its limit, not every running job.
    op.create_index(
        "ix_jobs_running_type",
        "jobs",
        ["type"],
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_running_type", table_name="jobs")
    for column in reversed(_columns()):
        op.drop_column("job_types", column.name)
