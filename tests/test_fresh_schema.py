"""A new SQLite ledger created in plain SQL has exactly the schema the Alembic migrations create."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.store import sqlite as sqlite_store
from ledger.store.base import FRESH_SCHEMA, head_revision
from ledger.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent


def _schema(path: Path) -> tuple[set[tuple[str, str, str, str | None]], list[tuple[str]]]:
    con = sqlite3.connect(path)
    try:
        master = set(con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        return master, con.execute("SELECT version_num FROM alembic_version").fetchall()
    finally:
        con.close()


def test_the_statements_are_what_the_migrations_make_now() -> None:
    spec = importlib.util.spec_from_file_location("fresh_schema", ROOT / "scripts" / "fresh_schema.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert Path(FRESH_SCHEMA).read_text(encoding="utf-8") == generator.generate(), (
        "the migrations changed: run `.venv/bin/python scripts/fresh_schema.py`"
    )


def test_plain_sql_schema_equals_alembics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = tmp_path / "fast.sqlite", tmp_path / "slow.sqlite"
    Ledger.open(fast).close()
    monkeypatch.setattr(SQLiteStore, "_create_fresh", lambda self: False)
    Ledger.open(slow).close()
    assert _schema(fast) == _schema(slow)
    assert _schema(fast)[1] == [(head_revision(),)]


def test_a_new_ledger_loads_neither_sqlalchemy_nor_alembic(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import sys; from ledger import Ledger; Ledger.open(sys.argv[1]).close(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "new.sqlite")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_database_that_is_not_empty_is_left_to_alembic(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("CREATE TABLE unrelated (x)")
    assert sqlite_store.create_fresh(con) is False
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["unrelated"]
    con.close()
