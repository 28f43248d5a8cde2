"""Alembic, loaded only when a schema must be created or upgraded (never by a read command)."""

from __future__ import annotations

from typing import Any

from alembic import command
from alembic.config import Config

from ledger.store.base import migrations_dir

# Any constant works; it only has to be the same for every writer of one PostgreSQL database.
PG_MIGRATE_LOCK = 0x4C454448  # concurrent first opens of one database must not both create the schema


def alembic_config() -> Config:
    """An Alembic configuration pointing at the package's migrations."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    return cfg


def upgrade(conn: Any) -> None:
    """Upgrade the database of SQLAlchemy connection ``conn`` (in a transaction) to the head revision."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy import text

        # Eight agents opening a fresh team database at once: one creates the schema, the others wait here and
        # then find it at head. (SQLite serializes DDL through its write lock.)
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_MIGRATE_LOCK})
    cfg = alembic_config()
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")
