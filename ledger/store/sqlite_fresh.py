"""A new SQLite ledger's schema in plain SQL, so that creating one does not load SQLAlchemy and Alembic.

Importing those two takes several times the whole interpreter start, and a first ``ledger import`` or capture into
a new file paid for it. The statements are generated from the Alembic migrations (``scripts/fresh_schema.py`` writes
``fresh_schema.json`` beside this module: what the migrations leave on an empty file) and a test fails when the file
is not what the migrations make now, so the migrations stay the schema's one source. Any other case (an existing
schema to upgrade, or migrations newer than the file's revision) goes through Alembic.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ledger.store.base import head_revision

SCHEMA = Path(__file__).with_name("fresh_schema.json")


def create_fresh(con: sqlite3.Connection) -> bool:
    """Create the head schema on an empty database, in one transaction; False (nothing done) if the database is
    not empty or the migrations are newer than the generated statements (then Alembic must do it).

    ``con`` is in autocommit mode (``isolation_level=None``). IMMEDIATE: a second process creating the same new
    file waits for the first and then finds it not empty.
    """
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    if head_revision() != schema["revision"]:
        return False
    con.execute("BEGIN IMMEDIATE")
    try:
        if con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            con.execute("ROLLBACK")
            return False
        for stmt in schema["statements"]:
            con.execute(stmt)
        con.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (schema["revision"],))
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return True
