"""Alembic environment: the ledger passes its own connection in ``config.attributes["connection"]``."""

from alembic import context
from sqlalchemy import Connection, engine_from_config, pool

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=None,
        # SQLite cannot ALTER most things: batch mode rebuilds the table (and drops its triggers: migrations
        # that rebuild ``events`` must create the append-only triggers again).
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = engine_from_config(
        config.get_section(config.config_ini_section) or {}, prefix="sqlalchemy.", poolclass=pool.NullPool
    )
    with engine.connect() as conn:
        _run(conn)
