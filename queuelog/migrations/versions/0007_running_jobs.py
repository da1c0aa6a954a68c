"""a running job's cancellation request, progress and snooze count (docs/running-jobs.md)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


# Plain ADD COLUMN on both engines: SQLite adds nullable columns and columns with a constant default in
# place, so the jobs table and its counting triggers (0003) are left as they are.
def _columns() -> list[sa.Column]:
    return [
        sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cancel_requested_by", sa.String(length=64), nullable=True),
        sa.Column("progress_percent", sa.SmallInteger(), nullable=True),
        sa.Column("progress_note", sa.String(length=200), nullable=True),
        sa.Column("progress_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("snooze_count", sa.Integer(), server_default=sa.text("0"), nullable=False),
    ]


def upgrade() -> None:
    for column in _columns():
        op.add_column("jobs", column)


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite 3.35+), not a batch: rebuilding the table would drop its triggers.
    for column in reversed(_columns()):
        op.drop_column("jobs", column.name)
