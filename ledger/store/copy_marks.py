"""What a destination ledger remembers of each source it was copied from (``copy_marks``): the source's last
``seq`` and that event's hash when a copy of it last finished, and how many streams it held.

A log is append-only: a source whose last event is still that event (same ``seq``, same hash) has nothing the
copy did not already bring, and the destination (append-only too) still holds it all. So a copy with nothing to
do is told in two reads, not by reading every stream's head on both sides. Any other case (a source that grew,
or one never copied here, or whose description changed) is planned in full, with every check.
"""

from __future__ import annotations

from typing import Any

from ledger.store.base import LogStore

MARKS = "copy_marks"
READ_SQL = f"SELECT seq, hash, streams FROM {MARKS} WHERE source = ?"
ALL_SQL = f"SELECT source, seq, hash, streams FROM {MARKS} ORDER BY source"
WRITE_SQL = (
    f"INSERT INTO {MARKS} (source, seq, hash, streams) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (source) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, streams = excluded.streams"
)


def read_mark(store: LogStore, source: str) -> tuple[int, str, int] | None:
    """(seq, hash, streams) of the last finished copy from ``source`` into ``store``, or None."""
    from ledger.store.summary_build import _query

    rows = _query(store, READ_SQL, [source])
    return (int(rows[0][0]), str(rows[0][1]), int(rows[0][2])) if rows else None


def marks(store: LogStore) -> list[tuple[str, int, str, int]]:
    """Every (source, seq, hash, streams) the ledger remembers."""
    from ledger.store.summary_build import _query

    return [(str(r[0]), int(r[1]), str(r[2]), int(r[3])) for r in _query(store, ALL_SQL, [])]


def write_mark(store: LogStore, source: str, seq: int, hash_: str, streams: int) -> None:
    """Remember a finished copy from ``source`` into ``store`` (its own transaction)."""
    args: tuple[Any, ...] = (source, seq, hash_, streams)
    if store.dialect == "sqlite":
        with store._writer.connection() as con:  # type: ignore[attr-defined]
            con.execute("BEGIN IMMEDIATE")
            try:
                con.execute(WRITE_SQL, args)
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        return
    from ledger.store.summary_sql import pg

    # On the store's psycopg writer, like every write (no SQLAlchemy for a copy).
    store._write_transaction(  # type: ignore[attr-defined]
        lambda conn: conn.execute(pg(WRITE_SQL), args), "cannot write to the ledger"
    )
