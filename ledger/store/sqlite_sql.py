"""SQLite plumbing for :mod:`ledger.store.sqlite`: its SQL, the file of a URL."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from itertools import batched
from typing import Any

from msgspec.structs import astuple, force_setattr

from ledger.domain import chain
from ledger.domain.events import Event
from ledger.errors import InputError, StoreError
from ledger.store.base import (
    APPEND_CHUNK,
    CopyBatch,
    StoredEvent,
    chain_rows,
    copied_rows,
    encode_events,
    no_ledger,
    stream_query,
)
from ledger.store.wal import BACKSTOP_PAGES

COLUMNS = "seq, stream, version, type, ts, body, prev_hash, hash"
HEAD_SQL = "SELECT version, hash FROM events WHERE stream = ? ORDER BY version DESC LIMIT 1"
INSERT_SQL = "INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)"
# A prefix compared exactly (LIKE would be case-insensitive for ASCII and need its wildcards escaped).
PREFIX_SQL = "substr(stream, 1, length(?)) = ?"
STREAMS_SQL = (
    "SELECT a.stream, a.n, a.v, e.hash, a.fs, a.ls, a.ft, a.lt FROM ("
    "SELECT stream, count(*) AS n, max(version) AS v, min(seq) AS fs, max(seq) AS ls, min(ts) AS ft, max(ts) AS lt "
    "FROM events {where} GROUP BY stream) AS a JOIN events AS e ON e.stream = a.stream AND e.version = a.v "
    "ORDER BY a.fs"
)


def insert_one(
    dbapi: sqlite3.Connection, stream: str, row: tuple[str, str, bytes], head: tuple[int, str]
) -> StoredEvent:
    """Insert one ``(type, ts, body)`` row after ``head`` (version, hash), inside the caller's transaction.

    One event per toolkit step: hashed, inserted and given its seq as it is built, with no list or copy between.
    """
    (type_, ts, body), (version, prev) = row, head
    h = chain.chain_hashes(prev, stream, version, ((type_, body),))[0]
    cur = dbapi.execute(INSERT_SQL, (stream, version + 1, type_, ts, body, prev, h))
    assert cur.lastrowid is not None  # set by every INSERT
    return StoredEvent(cur.lastrowid, stream, version + 1, type_, ts, body, prev, h)


def insert_batch(dbapi: sqlite3.Connection, new: list[StoredEvent]) -> list[StoredEvent]:
    """Insert chained rows (their seq still unknown) inside the caller's write transaction; return them numbered."""
    dbapi.executemany(INSERT_SQL, (astuple(e)[1:] for e in new))
    # Under the write lock, an INTEGER PRIMARY KEY without deletes is assigned max+1 each time: a batch's seqs are
    # the consecutive numbers ending at the last one inserted.
    last = dbapi.execute("SELECT last_insert_rowid()").fetchone()[0]
    # Numbered in place: an import's whole card is one batch, and a copy of each row would double its peak.
    for s, e in enumerate(new, last - len(new) + 1):
        force_setattr(e, "seq", s)
    return new


def insert_chunked(
    dbapi: sqlite3.Connection, stream: str, events: Iterable[Event], head: tuple[int, str]
) -> list[StoredEvent]:
    """Encode, chain and insert ``events`` (at least one) after ``head``, :data:`APPEND_CHUNK` at a time, inside the
    caller's write transaction (a card's rows are never all held at once); the last one as stored."""
    for chunk in batched(events, APPEND_CHUNK):
        last = insert_batch(dbapi, chain_rows(stream, encode_events(chunk), *head))[-1]
        head = (last.version, last.hash)
    return [last]


def insert_copied(con: sqlite3.Connection, batch: CopyBatch, lowest: dict[str, int]) -> list[StoredEvent]:
    """Insert copied rows inside the caller's write transaction, each stream checked against the head it reads
    (:func:`copied_rows`); the rows inserted."""
    heads: dict[str, tuple[int, str]] = {}
    held: dict[tuple[str, int], str] = {}
    for s, lo in lowest.items():
        row = con.execute(HEAD_SQL, (s,)).fetchone()
        heads[s] = (row[0], row[1]) if row else (0, chain.GENESIS)
        if lo <= heads[s][0]:
            q = "SELECT version, hash FROM events WHERE stream = ? AND version BETWEEN ? AND ?"
            held.update({(s, v): h for v, h in con.execute(q, (s, lo, heads[s][0]))})
    new = copied_rows(batch, heads, held)
    con.executemany(INSERT_SQL, [(e.stream, *row_values(e)) for e in new])
    return new


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///PATH`` URL; an in-memory database cannot hold a ledger."""
    rest = url.partition("://")[2]
    path = rest[1:] if rest.startswith("/") else rest
    path = path.split("?", 1)[0]
    if not path or path == ":memory:" or path.startswith("file::memory:"):
        raise InputError(f"{url!r} is an in-memory database, which cannot hold a ledger: give a file path")
    return path


def writable(path: str) -> bool:
    # Root ignores permission bits, but os.access still sees a read-only mount.
    file_ok = os.access(path, os.W_OK) if os.path.exists(path) else True
    return file_ok and os.access(os.path.dirname(path) or ".", os.W_OK)


def row_values(e: StoredEvent) -> tuple[Any, ...]:
    return (e.version, e.type, e.ts, e.body, e.prev_hash, e.hash)


def stream_where(stream: str, after_version: int, until_seq: int | None) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause (and its arguments) of a stream's events after a version, up to a global seq."""
    return stream_query("?", "", stream, after_version, until_seq, None)


def stream_sql(
    stream: str, after_version: int, until_seq: int | None, page: tuple[int, int] | None
) -> tuple[str, tuple[Any, ...]]:
    """The query (and its arguments) of a stream's events in version order; ``page``: (offset, count) of them."""
    return stream_query("?", COLUMNS, stream, after_version, until_seq, page)


def readonly_uri(path: str, *, immutable: bool) -> str:
    """A ``file:`` URI opening ``path`` read-only (``immutable``: without WAL's -shm, for read-only media)."""
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{quoted}?mode=ro" + ("&immutable=1" if immutable else "")


def connect(path: str, busy_timeout_ms: int, durability: str, readonly: bool, immutable: bool) -> sqlite3.Connection:
    """A connection with the ledger's settings (autocommit: BEGIN is the caller's); closed again if they fail."""
    timeout = busy_timeout_ms / 1000
    if readonly:
        uri = readonly_uri(path, immutable=immutable)
        con = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=timeout)
    else:
        con = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout)
    try:
        con.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if readonly:
            return con
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
        if durability != "full":  # batched commits as normal does (see ledger/capture/batching.py)
            con.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        # Without this, INSERT OR REPLACE deletes the old row without firing the BEFORE DELETE trigger.
        con.execute("PRAGMA recursive_triggers=ON")
    except BaseException:
        con.close()  # a connection per failed attempt would otherwise stay open until collected
        raise
    return con


def check_tables(con: sqlite3.Connection, path: str) -> None:
    """Refuse, reading only its schema, a database that is not a ledger (raises :class:`StoreError`)."""
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} is not a ledger ({e})") from e
    if not tables:
        raise no_ledger(path)
    if not {"events", "alembic_version"} <= tables:
        raise StoreError(f"{path} is not a ledger (no events table or schema revision); nothing was changed")


def refuse_foreign(path: str, busy_timeout_ms: int) -> None:
    """Refuse, as the read commands do (:func:`check_tables`), a database that holds tables and is not a ledger,
    through a read-only connection: a writer's first connection already switches the file to WAL, so another
    program's database must be turned away before it, with nothing of it changed."""
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    con = connect(path, busy_timeout_ms, "normal", True, False)
    try:
        try:
            empty = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1").fetchone() is None
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{path} is not a ledger ({e}); nothing was changed") from e
        if not empty:
            check_tables(con, path)
    finally:
        con.close()


def joined_sql(con: sqlite3.Connection, where: str) -> str:
    """The query joining a version range's bodies with newlines, in version order (parameters: the separator,
    then ``where``'s, then the last version of the range).

    From SQLite 3.44 the order is explicit. Before that, the aggregate takes rows in the order its loop visits
    them: the plain form is used only when the plan walks UNIQUE(stream, version) itself (no sort, no other
    index); otherwise an ordered subquery feeds the aggregate (about a third slower on a million events).
    The separator is a bound parameter: ``char(10)`` would be a function call per row.
    """
    body = "CAST(group_concat(body, ?{order}) AS BLOB), count(*)"
    rng = f"{where} AND version <= ?"
    if sqlite3.sqlite_version_info >= (3, 44, 0):
        return f"SELECT {body.format(order=' ORDER BY version')} FROM events {rng}"
    plain = f"SELECT {body.format(order='')} FROM events {rng}"
    nargs = plain.count("?")
    plan = " ".join(str(r[-1]) for r in con.execute(f"EXPLAIN QUERY PLAN {plain}", (None,) * nargs))
    walks_index = "SEARCH events USING INDEX sqlite_autoindex_events_1 (stream=? AND version>? AND version<?)"
    if plan.startswith(walks_index) and "TEMP B-TREE" not in plan and plan.count("SEARCH") == 1:
        return plain
    return f"SELECT {body.format(order='')} FROM (SELECT body FROM events {rng} ORDER BY version)"
