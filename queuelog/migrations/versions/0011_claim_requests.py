"""claim request ids and reported lease tokens: a claim retried with its request id answers the jobs the
first attempt leased, and a complete or fail repeated with its lease token answers as the first did
(docs/operations.md#outages)

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "claim_requests",
        sa.Column("worker", sa.String(64), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("worker", "request_id"),
    )
    op.create_index("ix_claim_requests_expires_at", "claim_requests", ["expires_at"])
    op.add_column("jobs", sa.Column("reported_token", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("reported_token")
    op.drop_index("ix_claim_requests_expires_at", table_name="claim_requests")
    op.drop_table("claim_requests")
