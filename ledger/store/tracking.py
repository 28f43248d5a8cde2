"""How every read model follows a log: one row of ``tracking`` per follower (eventsourcing's tracking records).

A follower is a table derived from a log: the cards summary with its tag figures (``summary``), the Merkle tree
(``merkle``), and, at a destination ledger, each source a copy came from (``copy:<source>``: the position is in
that source's log). Its row says how far it reflects the log: the ``seq`` of the last event, that event's hash, and
a count of its own (the tree's size, the streams the source held). The row is written in the transaction that
writes what it reflects, so a follower and its position never disagree, whoever runs it and whenever it is killed.

The hash binds the position to the log: where the event at that ``seq`` is not the one the follower folded (a log
changed behind the ledger's back), a read knows the follower no longer matches the log (:func:`behind_sql`).
"""

from __future__ import annotations

from typing import Any

from ledger.store.base import LogStore, pg_sql

TABLE = "tracking"
SUMMARY = "summary"
TREE = "merkle"
COPY = "copy:"

READ_SQL = f"SELECT seq, hash, n FROM {TABLE} WHERE name = ?"
#: The copies' rows: names from "copy:" up to "copy;", the next character (no LIKE: no literal % for psycopg).
ALL_COPIES_SQL = (
    f"SELECT substr(name, {len(COPY) + 1}), seq, hash, n FROM {TABLE} "
    f"WHERE name > '{COPY}' AND name < '{COPY[:-1]};' ORDER BY name"
)
UPSERT_SQL = (
    f"INSERT INTO {TABLE} (name, seq, hash, n) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET seq = excluded.seq, hash = excluded.hash, n = excluded.n"
)
#: Set a follower to the log's head (after a rebuild that read the whole log in the same transaction).
AT_HEAD_SQL = (
    f"UPDATE {TABLE} SET seq = (SELECT coalesce(max(seq), 0) FROM events), "
    "hash = coalesce((SELECT hash FROM events ORDER BY seq DESC LIMIT 1), '') WHERE name = ?"
)


def behind_sql(name: str) -> str:
    """One read: (the follower's seq, the log's last seq, whether the event at the follower's seq is still the one
    it folded: 1 or 0)."""
    return (
        f"SELECT t.seq, (SELECT coalesce(max(seq), 0) FROM events), "
        "CASE WHEN t.seq = 0 OR t.hash = (SELECT e.hash FROM events e WHERE e.seq = t.seq) THEN 1 ELSE 0 END "
        f"FROM {TABLE} t WHERE t.name = '{name}'"
    )


def read_mark(store: LogStore, source: str) -> tuple[int, str, int] | None:
    """(seq, hash, streams) of ``source``'s log when a copy from it into ``store`` last finished, or None.

    A log is append-only: a source whose last event is still that event has nothing the copy did not already
    bring, and the destination (append-only too) still holds it all, so a copy with nothing to do is told in two
    reads. Any other case is planned in full, with every check."""
    rows = store.rows(READ_SQL, [COPY + source])
    return (int(rows[0][0]), str(rows[0][1]), int(rows[0][2])) if rows else None


def marks(store: LogStore) -> list[tuple[str, int, str, int]]:
    """Every (source, seq, hash, streams) the ledger remembers of the sources copied into it."""
    return [(str(r[0]), int(r[1]), str(r[2]), int(r[3])) for r in store.rows(ALL_COPIES_SQL)]


def write_mark(store: LogStore, source: str, seq: int, hash_: str, streams: int) -> None:
    """Remember a finished copy from ``source`` into ``store``. Its own transaction, after the copy's: a copy is
    idempotent (every event is matched by hash), so a mark lost to a crash costs only a full plan next time."""
    args: tuple[Any, ...] = (COPY + source, seq, hash_, streams)
    sql = UPSERT_SQL if store.dialect == "sqlite" else pg_sql(UPSERT_SQL)
    store._write_transaction(lambda conn: conn.execute(sql, args), "cannot write to the ledger")  # type: ignore[attr-defined]
