"""Writes ledger/store/fresh_schema.json: the schema the Alembic migrations make on an empty SQLite file, as plain
statements, so a new SQLite ledger is created without loading SQLAlchemy or Alembic (the migrations stay the one
source: ``tests/test_fresh_schema.py`` fails when the file is stale).

    .venv/bin/python scripts/fresh_schema.py
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def generate() -> str:
    """The file's text: the head revision and the statements, from a ledger the migrations created."""
    from ledger.store.base import head_revision
    from ledger.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "migrated.sqlite"
        store = SQLiteStore(f"sqlite:///{path}")
        store._create_fresh = lambda: False  # type: ignore[method-assign]  # the migrations, not this file
        try:
            store.migrate()
        finally:
            store.close()
        con = sqlite3.connect(path)
        try:
            master = con.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
            ).fetchall()
            statements = [sql for _, _, sql in master]
            for kind, table, _ in master:
                if kind != "table" or table == "alembic_version":
                    continue
                cur = con.execute(f'SELECT * FROM "{table}"')
                columns = ", ".join(c[0] for c in cur.description)
                for row in cur.fetchall():
                    values = ", ".join(repr(v) if isinstance(v, int | float) else _quoted(v) for v in row)
                    statements.append(f"INSERT INTO {table} ({columns}) VALUES ({values})")
        finally:
            con.close()
    return json.dumps({"revision": head_revision(), "statements": statements}, indent=1) + "\n"


def _quoted(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def main() -> int:
    from ledger.store.base import FRESH_SCHEMA

    out = Path(FRESH_SCHEMA)
    out.write_text(generate(), encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
