"""``ledger copy`` into PostgreSQL: a batch of copied events in one transaction, through COPY.

A few round trips per batch whatever its size: the append lock with the heads of every stream of the batch (one
query), the COPY of the rows, the summary rows of the cards the batch touches (executemany, pipelined, and their
keys by COPY), then the commit. Rows are checked to continue each stream exactly
(:func:`~ledger.storage.base.copied_rows`) before anything is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.core import chain
from ledger.storage.base import StoredEvent, copied_rows, lowest_versions
from ledger.storage.summary import KEYS, Change, SummaryKeeper, copied_changes
from ledger.storage.summary_pg import pg_reader, pg_reader_sql
from ledger.storage.summary_sql import (
    DELETE_KEYS_SQL,
    DELETE_ROW_SQL,
    UPSERT_SQL,
    pg,
    probe,
    row_params,
)

HEADS_SQL = (
    "SELECT DISTINCT ON (stream) stream, version, hash FROM events WHERE stream = ANY(%s) ORDER BY stream, version DESC"
)
HELD_SQL = (
    "SELECT e.stream, e.version, e.hash FROM events e JOIN unnest(%s::text[], %s::int[], %s::int[]) AS w(s, lo, hi) "
    "ON e.stream = w.s AND e.version BETWEEN w.lo AND w.hi"
)
COPY_SQL = "COPY events (stream, version, type, ts, body, prev_hash, hash) FROM STDIN"
KEYS_COPY_SQL = f"COPY {KEYS} (kind, value, card_id) FROM STDIN"


def copy_batch(conn: Any, keeper: SummaryKeeper, rows: Sequence[StoredEvent], lock: tuple[str, tuple[Any, ...]]) -> int:
    """Insert the copied ``rows`` on psycopg connection ``conn`` in one transaction; returns how many were new.

    Raises what :func:`copied_rows` raises (nothing is written then); the caller rolls back on any error.
    """
    lowest = lowest_versions(rows)
    conn.execute(*lock)
    streams = list(lowest)
    heads = {s: (0, chain.GENESIS) for s in streams}
    heads.update({s: (v, h) for s, v, h in conn.execute(HEADS_SQL, (streams,)).fetchall()})
    overlap = [(s, lo, heads[s][0]) for s, lo in lowest.items() if lo <= heads[s][0]]
    held: dict[tuple[str, int], str] = {}
    if overlap:
        cols = [list(c) for c in zip(*overlap, strict=True)]
        held = {(s, v): h for s, v, h in conn.execute(HELD_SQL, cols).fetchall()}
    new = copied_rows(rows, heads, held)
    if not new:
        return 0
    with conn.cursor() as cur, cur.copy(COPY_SQL) as cp:
        for e in new:
            cp.write_row((e.stream, e.version, e.type, e.ts, e.body, e.prev_hash, e.hash))
    probe(keeper, pg_reader_sql(conn), "postgresql")
    changes = copied_changes(keeper, [(e.stream, e.version, e.type, e.body) for e in new], pg_reader(conn))
    write_bulk(conn, [c for c in changes if c is not None])
    return len(new)


def write_bulk(conn: Any, changes: Sequence[Change]) -> None:
    """The summary rows and keys of many cards at once (executemany: pipelined by psycopg)."""
    if not changes:
        return
    ids = [c.stream.split(":", 1)[1] for c in changes]
    with conn.cursor() as cur:
        cur.execute(pg(DELETE_KEYS_SQL.replace("= ?", "= ANY(?)")), (ids,))
        gone = [(i,) for c, i in zip(changes, ids, strict=True) if c.tracked is None]
        if gone:
            cur.executemany(pg(DELETE_ROW_SQL), gone)
        upserts = [row_params(c.row) for c in changes if c.row is not None]
        if upserts:
            # executemany parses the statement once and pipelines the rows (a multi-row VALUES statement of
            # thousands of parameters costs more to parse on the client than it saves).
            cur.executemany(pg(UPSERT_SQL), upserts)
        with cur.copy(KEYS_COPY_SQL) as cp:
            for c in changes:
                if c.row is not None and c.tracked is not None:
                    for k, v in c.tracked.keys:
                        cp.write_row((k, v, c.row.card_id))
