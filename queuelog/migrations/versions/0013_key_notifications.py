"""on PostgreSQL, a notification when API keys or users change, so that each server process's cache of
key checks forgets what it knew (docs/operations.md#api-keys-and-who-may-do-what)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# One notification per statement, on the wake-ups' channel of the table's schema (its listener is the one
# each process keeps; the schema is the table's, not the writing session's search path), in the statement's
# own transaction: it reaches the listeners when the change commits. A write of last_used_at alone notifies
# nobody.
KEYS_FUNCTION = """
CREATE FUNCTION queuelog_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('queuelog_jobs:' || TG_TABLE_SCHEMA, 'keys');
    RETURN NULL;
END $$
"""
TRIGGERS = {
    "api_keys_changed": (
        "api_keys",
        "AFTER UPDATE OF key_hash, kind, name, user_id, revoked_at OR DELETE OR TRUNCATE ON api_keys",
    ),
    "users_changed": ("users", "AFTER UPDATE OF username, role, active OR DELETE OR TRUNCATE ON users"),
}


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(KEYS_FUNCTION)
        for name, (_, when) in TRIGGERS.items():
            op.execute(
                f"CREATE TRIGGER {name} {when} FOR EACH STATEMENT EXECUTE FUNCTION queuelog_keys_changed()"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name, (table, _) in TRIGGERS.items():
            op.execute(f"DROP TRIGGER {name} ON {table}")
        op.execute("DROP FUNCTION queuelog_keys_changed()")
