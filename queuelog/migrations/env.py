"""Alembic environment: the engine comes from ``queuelog.db.Database.alembic_config``."""

from alembic import context

from queuelog.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    engine = config.attributes["engine"]
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("queuelog migrations run online only: use `flask --app queuelog:create_app db upgrade`")
run_migrations_online()
