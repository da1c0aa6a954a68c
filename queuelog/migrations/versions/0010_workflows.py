"""workflows: jobs that wait for other jobs (status ``waiting``, ``job_dependencies``) and batches of jobs
with callbacks (``batches``) (docs/workflows.md)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


# Plain ADD COLUMN on both engines (nullable, or with a constant default): the jobs table and its counting
# triggers (0003) stay as they are; the triggers count any status, ``waiting`` included.
def _columns() -> list[sa.Column]:
    return [
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        sa.Column("callback_of", sa.BigInteger(), nullable=True),
        sa.Column("dependents", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("depends_on", sa.Text(), nullable=True),
        sa.Column("waiting_on", sa.Text(), nullable=True),
        sa.Column("on_dependency_failure", sa.String(length=8), nullable=True),
    ]


def upgrade() -> None:
    for column in _columns():
        op.add_column("jobs", column)
    op.create_index(
        "ix_jobs_batch",
        "jobs",
        ["batch_id", "id"],
        sqlite_where=sa.text("batch_id IS NOT NULL"),
        postgresql_where=sa.text("batch_id IS NOT NULL"),
    )
    op.create_table(
        "job_dependencies",
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("depends_on_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "depends_on_id", name=op.f("pk_job_dependencies")),
    )
    op.create_index("ix_job_dependencies_depends_on_id", "job_dependencies", ["depends_on_id", "job_id"])
    op.create_table(
        "batches",
        sa.Column("id", BigId, nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=24), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("finished", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("on_success", sa.Text(), nullable=True),
        sa.Column("on_finish", sa.Text(), nullable=True),
        sa.Column("on_success_job", sa.BigInteger(), nullable=True),
        sa.Column("on_finish_job", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_batches_owner_id", "batches", ["owner", "id"])
    op.create_index("ix_batches_status_id", "batches", ["status", "id"])
    op.create_index(
        "uq_batches_owner_idempotency_key",
        "batches",
        ["owner", "idempotency_key"],
        unique=True,
        sqlite_where=sa.text("idempotency_key IS NOT NULL"),
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_table("batches")
    op.drop_table("job_dependencies")
    op.drop_index("ix_jobs_batch", table_name="jobs")
    # Plain DROP COLUMN (SQLite 3.35+), not a batch: rebuilding the table would drop its triggers.
    for column in reversed(_columns()):
        op.drop_column("jobs", column.name)
