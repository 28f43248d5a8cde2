"""The summary statements on PostgreSQL: through psycopg inside the append's pipeline, or a SQLAlchemy connection."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ledger.storage.summary import BodyReader, Change
from ledger.storage.summary_sql import INSERT_KEY_SQL, body_reader, pg, write_statements


def pg_reader_sql(conn: Any) -> Callable[[str, Any], list[Any]]:
    """Runs a ``?`` read statement on psycopg connection ``conn``."""
    return lambda sql, params: conn.execute(pg(sql), params).fetchall()


def pg_reader(conn: Any) -> BodyReader:
    """Reads a stream's first bodies on psycopg connection ``conn``."""
    return body_reader(pg_reader_sql(conn))


def run_pg(conn: Any, changes: Iterable[Change | None]) -> None:
    """Send the statements of ``changes`` on psycopg connection ``conn`` (pipeline mode: no round trip each)."""
    for change in changes:
        if change is None:
            continue
        for sql, params, many in write_statements(change):
            if not many:
                conn.execute(pg(sql), params)
                continue
            # One multi-row INSERT rather than executemany: a card has a handful of keys.
            assert sql == INSERT_KEY_SQL
            values = ", ".join(["(%s, %s, %s)"] * len(params))
            conn.execute(pg(sql.split(" VALUES ")[0]) + f" VALUES {values}", [v for p in params for v in p])


def sa_runners(conn: Any) -> tuple[Callable[[str, Any], Any], Callable[[str, Any], Any]]:
    """``execute``/``executemany`` for ``?`` statements on SQLAlchemy connection ``conn`` (PostgreSQL)."""
    return (
        lambda sql, params: conn.exec_driver_sql(pg(sql), tuple(params)),
        lambda sql, params: conn.exec_driver_sql(pg(sql), list(params)),
    )
