"""users.session_version (ending sessions); a revoked API key's name can be given to a new key

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("session_version", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )

    # Names are unique among keys that are not revoked (a partial unique index, on both engines).
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_constraint("uq_api_keys_name", type_="unique")
        batch_op.create_index(
            "uq_api_keys_name_unrevoked",
            ["name"],
            unique=True,
            sqlite_where=sa.text("revoked_at IS NULL"),
            postgresql_where=sa.text("revoked_at IS NULL"),
        )


def downgrade() -> None:
    # Fails while two keys share a name (a revoked one and its successor): revoke and rename first.
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index("uq_api_keys_name_unrevoked")
        batch_op.create_unique_constraint("uq_api_keys_name", ["name"])

    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("session_version")
