"""leader leases (maintenance election without session state, for PgBouncer in transaction mode), and on
PostgreSQL the wake-up notifications of jobs that become claimable (docs/operations.md#wake-ups)

Revision ID: 0012
Revises: 0009
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# A row that becomes pending (an insert, a retry, a backoff, a snooze, a settled lease) notifies the
# installation's channel in its own transaction: "<due epoch> <type>". So does a job of a concurrency-limited
# type that stops running (room for the next), and a job type that is unpaused or given new limits: a
# waiting long poll of any server wakes (queuelog/queue/wakeups.py). PostgreSQL folds identical
# notifications of one transaction into one: a batch of jobs of one type sends one.
NOTIFY_FUNCTION = """
CREATE FUNCTION queuelog_jobs_ready() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'job_types' THEN
        PERFORM pg_notify('queuelog_jobs:' || current_schema(), '0 ' || NEW.name);
    ELSIF NEW.status = 'pending' THEN
        PERFORM pg_notify(
            'queuelog_jobs:' || current_schema(),
            extract(epoch FROM NEW.available_at)::text || ' ' || NEW.type
        );
    ELSIF EXISTS (SELECT 1 FROM job_types WHERE name = NEW.type AND concurrency_limit IS NOT NULL) THEN
        PERFORM pg_notify('queuelog_jobs:' || current_schema(), '0 ' || NEW.type);
    END IF;
    RETURN NULL;
END $$
"""
TRIGGERS = {
    "jobs_ready_insert": "AFTER INSERT ON jobs FOR EACH ROW WHEN (NEW.status = 'pending')",
    "jobs_ready_update": (
        "AFTER UPDATE OF status, available_at ON jobs FOR EACH ROW"
        " WHEN (NEW.status = 'pending' OR (OLD.status = 'running' AND NEW.status <> 'running'))"
    ),
    "job_types_ready": (
        "AFTER UPDATE OF paused, enabled, concurrency_limit, rate_limit, rate_period ON job_types"
        " FOR EACH ROW WHEN (NOT NEW.paused)"
    ),
}


def upgrade() -> None:
    op.create_table(
        "leader_leases",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(NOTIFY_FUNCTION)
        for name, when in TRIGGERS.items():
            table = "job_types" if name.startswith("job_types") else "jobs"
            assert table in when
            op.execute(f"CREATE TRIGGER {name} {when} EXECUTE FUNCTION queuelog_jobs_ready()")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in TRIGGERS:
            table = "job_types" if name.startswith("job_types") else "jobs"
            op.execute(f"DROP TRIGGER {name} ON {table}")
        op.execute("DROP FUNCTION queuelog_jobs_ready()")
    op.drop_table("leader_leases")
