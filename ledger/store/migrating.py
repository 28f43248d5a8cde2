"""Alembic, loaded only when a schema must be created, upgraded or repaired (never by a read command)."""

from __future__ import annotations

import importlib.util
from types import ModuleType
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


def _first_migration() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_ledger_0001", migrations_dir() / "versions" / "0001_events.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def trigger_statements(dialect: str, missing: list[str]) -> list[str]:
    """The DDL that creates the ``missing`` append-only triggers again (the migrations' own statements)."""
    mod = _first_migration()
    if dialect == "sqlite":
        return [s for s in mod.SQLITE_TRIGGERS if any(f"TRIGGER {name} " in s for name in missing)]
    out = [mod.PG_TRIGGERS[0]]  # the trigger function (CREATE OR REPLACE)
    for name in missing:
        # A disabled trigger counts as missing: drop it and create it again, enabled ALWAYS.
        out.append(f"DROP TRIGGER IF EXISTS {name} ON events")
        out += [s for s in mod.PG_TRIGGERS[1:] if f"TRIGGER {name} " in s or s.endswith(f"TRIGGER {name}")]
    return out
