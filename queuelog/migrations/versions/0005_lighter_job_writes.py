"""lighter job writes: job_events without a foreign key; the finished-jobs index partial

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

The history rows stay where they are (every old row remains in its job's history); pruning deletes a
job's history itself now instead of by cascade (queuelog/engines/).
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

FINISHED = "status IN ('completed', 'failed', 'cancelled')"
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _events_table(name: str, *, foreign_key: bool) -> None:
    extra = (
        [
            sa.ForeignKeyConstraint(
                ["job_id"], ["jobs.id"], name="fk_job_events_job_id_jobs", ondelete="CASCADE"
            )
        ]
        if foreign_key
        else []
    )
    op.create_table(
        name,
        sa.Column("id", _ID, nullable=False),
        sa.Column("job_id", _ID, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event", sa.String(length=32), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        *extra,
        sa.PrimaryKeyConstraint("id", name="pk_job_events"),
    )


def _rebuild_events_on_sqlite(*, foreign_key: bool) -> None:
    """SQLite cannot drop or add a foreign key: copy the history, ids and all, into a table made anew."""
    _events_table("job_events_rebuilt", foreign_key=foreign_key)
    op.execute(
        "INSERT INTO job_events_rebuilt (id, job_id, at, event, actor, attempt, error)"
        " SELECT id, job_id, at, event, actor, attempt, error FROM job_events"
    )
    op.drop_index("ix_job_events_failures", table_name="job_events")
    op.drop_index("ix_job_events_job_id_id", table_name="job_events")
    op.drop_table("job_events")
    op.rename_table("job_events_rebuilt", "job_events")
    op.create_index("ix_job_events_job_id_id", "job_events", ["job_id", "id"], unique=False)
    op.create_index(
        "ix_job_events_failures",
        "job_events",
        ["id"],
        unique=False,
        sqlite_where=sa.text("error IS NOT NULL"),
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_events_on_sqlite(foreign_key=False)
    else:
        op.drop_constraint("fk_job_events_job_id_jobs", "job_events", type_="foreignkey")
    op.drop_index("ix_jobs_status_finished_at", table_name="jobs")
    op.create_index(
        "ix_jobs_finished",
        "jobs",
        ["finished_at"],
        unique=False,
        sqlite_where=sa.text(FINISHED),
        postgresql_where=sa.text(FINISHED),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_finished", table_name="jobs")
    op.create_index("ix_jobs_status_finished_at", "jobs", ["status", "finished_at"], unique=False)
    # History whose job is gone (none, unless rows were deleted by hand) cannot satisfy the key again.
    op.execute("DELETE FROM job_events WHERE job_id NOT IN (SELECT id FROM jobs)")
    if op.get_bind().dialect.name == "sqlite":
        _rebuild_events_on_sqlite(foreign_key=True)
    else:
        op.create_foreign_key(
            "fk_job_events_job_id_jobs", "job_events", "jobs", ["job_id"], ["id"], ondelete="CASCADE"
        )
