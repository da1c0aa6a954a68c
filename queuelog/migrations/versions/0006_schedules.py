"""schedules and schedule_fires: periodic jobs (docs/schedules.md)

Revision ID: 0006
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# The column types as written here, not imported from the models, which change with later revisions.
JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=55), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("payload", JSON_TYPE, nullable=False),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("max_retries", sa.Integer(), nullable=False),
        sa.Column("cron", sa.String(length=255), nullable=True),
        sa.Column("interval_seconds", sa.Integer(), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("missed", sa.String(length=16), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("next_fire_at", TIMESTAMP, nullable=True),
        sa.Column("last_fire_at", TIMESTAMP, nullable=True),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sa.UniqueConstraint("name", name=op.f("uq_schedules_name")),
    )
    op.create_index("ix_schedules_next_fire_at", "schedules", ["next_fire_at"])
    op.create_table(
        "schedule_fires",
        sa.Column("schedule_id", sa.Integer(), nullable=False),
        sa.Column("slot_at", TIMESTAMP, nullable=False),
        sa.Column("job_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("fired_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name=op.f("fk_schedule_fires_schedule_id_schedules"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("schedule_id", "slot_at", name=op.f("pk_schedule_fires")),
    )


def downgrade() -> None:
    op.drop_table("schedule_fires")
    op.drop_index("ix_schedules_next_fire_at", table_name="schedules")
    op.drop_table("schedules")
