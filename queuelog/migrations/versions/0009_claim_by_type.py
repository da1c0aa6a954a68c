"""pending jobs by type in claim order, so that a claim passes over a type whose jobs wait (at its limit,
out of rate tokens, paused) with one index seek instead of reading its jobs (docs/flow-control.md)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_jobs_claim_by_type",
        "jobs",
        ["type", sa.text("priority DESC"), "available_at", "id"],
        sqlite_where=sa.text("status = 'pending'"),
        postgresql_where=sa.text("status = 'pending'"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_claim_by_type", table_name="jobs")
