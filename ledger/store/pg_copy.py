"""``ledger copy`` into PostgreSQL: a batch of copied events in one transaction, through binary COPY.

A few round trips per batch whatever its size: the append lock, the heads of every stream of the batch (one query,
an index probe each), the COPY of the rows (encoded beforehand by :func:`prepare`, in the copy's reading thread),
then the commit; the cards summary catches up afterwards, in bulk (``summary.py``). Rows are checked to
continue each stream exactly (:func:`~ledger.store.base.copied_rows`) before anything is sent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.copy import QueuedLibpqWriter

from ledger.domain import chain
from ledger.store.base import CopyBatch, StoredEvent, copied_rows, copy_batch_of, lowest_versions
from ledger.store.summary import (
    COLUMNS,
    KEYS,
    SUMMARY,
)

# One index probe per stream for its last row (a DISTINCT ON over the streams would read every row they hold).
HEADS_SQL = (
    "SELECT w.s, e.version, e.hash FROM unnest(%s::text[]) AS w(s) CROSS JOIN LATERAL "
    "(SELECT version, hash FROM events WHERE stream = w.s ORDER BY version DESC LIMIT 1) AS e"
)
HELD_SQL = (
    "SELECT e.stream, e.version, e.hash FROM events e JOIN unnest(%s::text[], %s::int[], %s::int[]) AS w(s, lo, hi) "
    "ON e.stream = w.s AND e.version BETWEEN w.lo AND w.hi"
)
COPY_SQL = "COPY events (stream, version, type, ts, body, prev_hash, hash) FROM STDIN"
COPY_BINARY_SQL = "COPY events (stream, version, type, ts, prev_hash, hash, body) FROM STDIN (FORMAT BINARY)"
KEYS_COPY_SQL = f"COPY {KEYS} (kind, value, card_id) FROM STDIN"
SUMMARY_COPY_SQL = f"COPY {SUMMARY} ({', '.join(COLUMNS)}) FROM STDIN"


#: The binary COPY format's header (signature, flags, no extension) and trailer.
_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_TRAILER = b"\xff\xff"
#: A version's field: its length (4) and the int4, as one 8-byte integer.
_INT4 = 4 << 32


def encode_rows(rows: Sequence[StoredEvent]) -> bytes | None:
    """``rows`` as binary COPY data for :data:`COPY_BINARY_SQL`, or None for a row that cannot be (a column of
    another type, a version past int4, a ts that is not short ASCII). Its hashes are taken as 64 ASCII characters:
    use it only for rows :func:`~ledger.domain.chain.first_unhashed` passed."""
    # One bytes object for the whole batch: the server parses binary rows (a body as it is, no hex) at about twice
    # the rate of text rows, and building them here costs less than psycopg's write_row per row. The ASCII
    # columns (ts, prev_hash, hash) are next to each other in the column list, so they are encoded at once.
    parts = [_HEADER]
    add = parts.extend
    streams: dict[str, bytes] = {}
    types: dict[str, bytes] = {}
    try:
        for e in rows:
            s = streams.get(e.stream)
            if s is None:
                sb = e.stream.encode("utf-8")
                s = streams[e.stream] = b"\x00\x07" + len(sb).to_bytes(4, "big") + sb
            t = types.get(e.type)
            if t is None:
                tb = e.type.encode("utf-8")
                t = types[e.type] = len(tb).to_bytes(4, "big") + tb
            ts, body, version = e.ts, e.body, e.version
            if version >> 31:  # negative, or past int4: the length field would take its high bits
                return None
            add(
                (
                    s,
                    (_INT4 | version).to_bytes(8, "big"),
                    t,
                    f"\0\0\0{chr(len(ts))}{ts}\0\0\0@{e.prev_hash}\0\0\0@{e.hash}".encode("ascii"),
                    len(body).to_bytes(4, "big"),
                    body,
                )
            )
        parts.append(_TRAILER)
        return b"".join(parts)
    except (AttributeError, TypeError, OverflowError, UnicodeError):
        return None


def prepare(rows: Sequence[StoredEvent]) -> CopyBatch:
    """``rows`` checked against their own hashes and encoded for COPY (no I/O: runs beside the writes)."""
    batch = copy_batch_of(rows)
    return CopyBatch(batch.rows, batch.unhashed, encode_rows(batch.rows) if batch.unhashed is None else None)


def copy_batch(conn: Any, batch: CopyBatch, lock: tuple[str, tuple[Any, ...]]) -> int:
    """Insert the copied rows of ``batch`` on psycopg connection ``conn`` in one transaction (not committed here);
    returns how many were new. The cards summary is not folded here: it follows the log by position
    (``summary.py``) and catches up on the next read, in bulk.

    Raises what :func:`copied_rows` raises (nothing is written then); the caller rolls back on any error.
    """
    rows = batch.rows
    lowest = lowest_versions(rows)
    # The append lock, as every insert into events takes it: events commit in seq order (see postgres.py).
    conn.execute(*lock)
    streams = list(lowest)
    heads = {s: (0, chain.GENESIS) for s in streams}
    heads.update({s: (v, h) for s, v, h in conn.execute(HEADS_SQL, (streams,)).fetchall()})
    overlap = [(s, lo, heads[s][0]) for s, lo in lowest.items() if lo <= heads[s][0]]
    held: dict[tuple[str, int], str] = {}
    if overlap:
        cols = [list(c) for c in zip(*overlap, strict=True)]
        held = {(s, v): h for s, v, h in conn.execute(HELD_SQL, cols).fetchall()}
    new = copied_rows(batch, heads, held)
    if not new:
        return 0
    data = batch.encoded if len(new) == len(rows) and batch.encoded is not None else encode_rows(new)
    with conn.cursor() as cur:
        if data is not None:
            with cur.copy(COPY_BINARY_SQL, writer=QueuedLibpqWriter(cur)) as cp:
                cp.write(data)
        else:
            with cur.copy(COPY_SQL) as cp:
                for e in new:
                    cp.write_row((e.stream, e.version, e.type, e.ts, e.body, e.prev_hash, e.hash))
    return len(new)
