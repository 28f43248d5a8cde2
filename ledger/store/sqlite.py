"""The SQLite backend, on the standard library's ``sqlite3`` driver with plain SQL.

A read command must start at interpreter speed, and importing SQLAlchemy alone costs several times that: SQLAlchemy
and Alembic are loaded only to upgrade a schema or for :attr:`SQLiteStore.engine`. A new ledger's schema is created
from ``fresh_schema.json`` (:func:`create_fresh`), which ``scripts/fresh_schema.py`` generates from the migrations
(a test fails when it is stale, so the migrations stay the schema's one source).

A long stream's bodies are read as joined chunks by a second thread while the caller decodes (:func:`chunk_reader`):
SQLite releases the GIL while it steps a statement. That reader has its own connection and reads only versions up
to the head read beforehand, which never change (the log is append-only).

Read-only stores open the file with ``mode=ro`` (and ``immutable=1`` when the file or its folder cannot be written,
so WAL's ``-shm`` cannot be created): they never create, migrate or write a byte.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import batched
from typing import TYPE_CHECKING, Any

from msgspec.structs import astuple, force_setattr

from ledger.domain import chain
from ledger.domain.events import Event
from ledger.errors import InputError, StoreError, VersionConflict
from ledger.store.base import (
    APPEND_CHUNK,
    FRESH_SCHEMA,
    CopyBatch,
    Durability,
    Follower,
    LogStore,
    StoreBase,
    StoredEvent,
    SummaryOverlay,
    chain_rows,
    check_revision,
    copied_rows,
    copy_batch_of,
    encode_events,
    head_revision,
    lowest_versions,
    no_ledger,
    not_a_file,
    stream_query,
)
from ledger.store.connections import ReadPool, Writer

# WAL checkpoints off the appending thread: with SQLite's default, the commit that takes the WAL past 1,000 pages
# also checkpoints it and syncs twice, so every few hundred captured steps one step pays for it. As SQLite's
# documentation suggests, the writers' automatic checkpoint is raised to a backstop and a background thread runs a
# PASSIVE checkpoint (which blocks no one) every EVERY_COMMITS commits. Durability is unchanged. Only with
# ``--durability normal``: under ``full`` a checkpoint from another thread slows the syncing commits down more than
# running it inline (measured), so ``full`` keeps SQLite's own checkpointing.
#: The writers' ``wal_autocheckpoint``: only if the background checkpoints fall behind (about 40 MB of WAL).
BACKSTOP_PAGES = 10_000
#: Commits between two background checkpoints (each commit of a captured step writes one or two pages). A commit of
#: many events counts once per EVENTS_PER_PAGE of them (about what a page holds): an import checkpoints each card's
#: pages while it reads the next, and its close is left little to copy and sync.
EVERY_COMMITS = 250
EVENTS_PER_PAGE = 8


HEAD_SQL = "SELECT version, hash FROM events WHERE stream = ? ORDER BY version DESC LIMIT 1"
#: The last (version, seq) of a stream's events under a WHERE clause of :func:`~ledger.store.base.stream_query`.
LAST_SQL = "SELECT version, seq FROM events {} ORDER BY version DESC LIMIT 1"
INSERT_SQL = "INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)"


def insert_one(
    dbapi: sqlite3.Connection, stream: str, row: tuple[str, str, bytes], head: tuple[int, str]
) -> StoredEvent:
    """Insert one ``(type, ts, body)`` row after ``head`` (version, hash), inside the caller's transaction: one
    event per toolkit step, hashed, inserted and given its seq as it is built, with no list or copy between."""
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
    """Insert copied rows inside the caller's write transaction, each stream checked (:func:`copied_rows`)."""
    heads: dict[str, tuple[int, str]] = {}
    held: dict[tuple[str, int], str] = {}
    for s, lo in lowest.items():
        row = con.execute(HEAD_SQL, (s,)).fetchone()
        heads[s] = (row[0], row[1]) if row else (0, chain.GENESIS)
        if lo <= heads[s][0]:
            q = "SELECT version, hash FROM events WHERE stream = ? AND version BETWEEN ? AND ?"
            held.update({(s, v): h for v, h in con.execute(q, (s, lo, heads[s][0]))})
    new = copied_rows(batch, heads, held)
    con.executemany(INSERT_SQL, [astuple(e)[1:] for e in new])
    return new


@contextlib.contextmanager
def immediate(con: sqlite3.Connection) -> Iterator[None]:
    """A write transaction on autocommit connection ``con``: committed, or rolled back on any error."""
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise


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


def connect(path: str, busy_timeout_ms: int, durability: str, readonly: bool, immutable: bool) -> sqlite3.Connection:
    """A connection with the ledger's settings (autocommit: BEGIN is the caller's); closed again if they fail."""
    timeout = busy_timeout_ms / 1000
    if readonly:
        # ``immutable``: without WAL's -shm, for read-only media.
        quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        uri = f"file:{quoted}?mode=ro" + ("&immutable=1" if immutable else "")
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


FIRST_TABLE_SQL = "SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1"


def refuse_foreign(path: str, busy_timeout_ms: int) -> None:
    """Refuse, as the read commands do (:func:`check_tables`), a database that holds tables and is not a ledger,
    through a read-only connection: a writer's first connection already switches the file to WAL, so another
    program's database must be turned away before it, with nothing of it changed."""
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    con = connect(path, busy_timeout_ms, "normal", True, False)
    try:
        try:
            empty = con.execute(FIRST_TABLE_SQL).fetchone() is None
        except sqlite3.DatabaseError as e:
            if getattr(e, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_READONLY:
                raise StoreError(f"{path} is not a ledger ({e}); nothing was changed") from e
            # A writer killed mid-transaction left a hot journal (or a WAL to recover), which only a connection
            # that may write rolls back: the file's committed state is restored as any SQLite writer would, and
            # the check reads that. The journal mode is left as it is.
            con.close()
            con = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
            try:
                empty = con.execute(FIRST_TABLE_SQL).fetchone() is None
            except sqlite3.DatabaseError as again:
                raise StoreError(f"{path} is not a ledger ({again}); nothing was changed") from again
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


#: Read only when a new ledger is made (json and the file stay out of every other command's start).


def create_fresh(con: sqlite3.Connection) -> bool:
    """Create the head schema on an empty database, in one transaction; False (nothing done) if the database is
    not empty or the migrations are newer than the generated statements (then Alembic must do it). IMMEDIATE: a
    second process creating the same new file waits for the first and then finds it not empty."""
    import json

    with open(FRESH_SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    if head_revision() != schema["revision"]:
        return False
    with immediate(con):
        if con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            return False
        for stmt in schema["statements"]:
            con.execute(stmt)
        con.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (schema["revision"],))
    return True


def chunk_reader(
    connect: Callable[[], sqlite3.Connection], joined: str, args: tuple[Any, ...], ranges: list[tuple[int, int]]
) -> ReadAhead[tuple[bytes, int]]:
    """``(JSON lines, count)`` chunks of ``ranges`` (version ranges), read one ahead; close it if not read to the end.
    ``args``: the separator, the stream, then the where's args after its version (lo and hi are per chunk)."""
    from ledger.store.read_ahead import ReadAhead  # (and queue) only for a stream long enough to read ahead

    def produce(put: Put[tuple[bytes, int]]) -> None:
        con = connect()
        try:
            con.execute("BEGIN")
            sep, stream, *extra = args
            for lo, hi in ranges:
                body, count = con.execute(joined, (sep, stream, lo, *extra, hi)).fetchone()
                if count and not put((body, count)):
                    return
            con.execute("COMMIT")
        finally:
            con.close()

    return ReadAhead(produce, name="ledger-read-ahead", translate=_store_error).start()


def _store_error(e: BaseException) -> BaseException:
    return StoreError(f"cannot read the ledger: {e}") if isinstance(e, sqlite3.Error) else e


if TYPE_CHECKING:
    from ledger.store.read_ahead import Put, ReadAhead


class SQLiteStore(StoreBase):
    """A ledger in one SQLite file (WAL mode when opened for writing)."""

    dialect = "sqlite"
    _mark = "?"
    # Bounded work, not a full ANALYZE: SQLite refreshes the statistics it finds stale.
    _analyze = "PRAGMA optimize"

    def __init__(
        self, url: str, *, durability: Durability = "normal", busy_timeout_ms: int = 60_000, readonly: bool = False
    ) -> None:
        super().__init__(url, durability, busy_timeout_ms, readonly)
        self.path = sqlite_path(url)
        timeout = busy_timeout_ms / 1000
        # A writer left inside a transaction (its ROLLBACK failed too) would refuse every later BEGIN: replaced.
        self._writer = Writer(
            self._connect,
            sqlite3.Connection.close,
            timeout=timeout,
            where=self.describe,
            usable=lambda con: not con.in_transaction,
        )
        self._readers = ReadPool(self._connect, sqlite3.Connection.close, timeout=timeout, where=self.describe)
        every = EVERY_COMMITS if durability != "full" else 0
        self._checkpointer = Follower(self._checkpoint, "ledger-wal-checkpoint", every=every, delay=0)
        self._follower = Follower(self.catch_up_summary, "ledger-summary-follower")
        self._immutable = readonly and not writable(self.path)
        if readonly:
            self._check_is_ledger()
            return
        parent = os.path.dirname(self.path) or "."
        if not os.path.isdir(parent):
            raise StoreError(f"cannot open the ledger {self.path}: folder {parent} does not exist")
        if not writable(self.path):
            raise StoreError(f"cannot open the ledger at {self.describe()} for writing{self._readonly_hint()}")
        refuse_foreign(self.path, busy_timeout_ms)

    # -- the cards summary (summary.py): loaded when a list or a writer needs it, not by every read --------

    def catch_up_summary(self) -> int:
        """On the writer connection: BEGIN IMMEDIATE serializes it with every append and every other catch-up."""
        from ledger.store.summary import catch_up

        if self.readonly:
            return 0
        try:
            with self._writer.connection() as con:

                def rollback() -> None:
                    if con.in_transaction:
                        con.execute("ROLLBACK")

                begin = functools.partial(con.execute, "BEGIN IMMEDIATE")
                return catch_up(self, con, begin, functools.partial(con.execute, "COMMIT"), rollback)
        except sqlite3.Error as e:
            raise StoreError(f"cannot update the cards summary of the ledger at {self.describe()}: {e}") from e

    def rebuild_summary(self) -> int:
        from ledger.store.summary import rebuild

        return rebuild(self)

    def summary_at_head(self) -> SummaryOverlay | None:
        from ledger.store.summary import at_head

        return at_head(self)

    @staticmethod
    def _fetcher(con: Any) -> Callable[[str, Any], list[Any]]:
        return lambda sql, args: con.execute(sql, tuple(args)).fetchall()

    @staticmethod
    def _runner(con: Any) -> Callable[[str, Any], object]:
        return lambda sql, p: (con.executemany if isinstance(p, list) else con.execute)(sql, p)

    def _snapshot[T](self, work: Callable[[Any], T]) -> T:
        try:
            with self._readers.connection() as con:
                con.execute("BEGIN")
                try:
                    return work(con)
                finally:
                    con.execute("ROLLBACK")
        except sqlite3.Error as e:
            raise StoreError(f"cannot read the ledger at {self.describe()}: {e}") from e

    def _checkpoint(self) -> None:
        con = self._connect()
        try:
            con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            con.close()

    # -- connections ----------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        wrong = not_a_file(self.path)
        if wrong is not None:  # SQLite would say "unable to open database file" or "disk I/O error"
            raise wrong
        try:
            return connect(self.path, self.busy_timeout_ms, self.durability, self.readonly, self._immutable)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open the ledger at {self.describe()}: {e}{self._readonly_hint()}") from e

    def _readonly_hint(self) -> str:
        if writable(self.path):
            return ""
        return " (the file or its folder is read-only: the ledger needs to write the file and its -wal/-shm files)"

    def _check_is_ledger(self) -> None:
        """Refuse (reading only the schema) a missing file, a file that is not a ledger, a newer schema."""
        if not os.path.isfile(self.path):
            raise no_ledger(self.path)
        try:
            with self._readers.connection() as con:
                check_tables(con, self.path)
            check_revision(self.revision(), self.describe())
        except BaseException:
            self.close()
            raise

    @property
    def engine(self) -> Any:
        """A SQLAlchemy engine on the same file with the same settings (loads SQLAlchemy: migrations, tools)."""
        if self._engine is None:
            from sqlalchemy import create_engine, event
            from sqlalchemy.pool import NullPool

            engine = create_engine("sqlite://", creator=self._connect, poolclass=NullPool)

            @event.listens_for(engine, "begin")
            def _on_begin(conn: Any) -> None:
                # The driver connection is in autocommit mode: BEGIN is ours to issue, IMMEDIATE for writers.
                immediate = conn.get_execution_options().get("ledger_immediate", False)
                conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

            self._engine = engine
        return self._engine

    # -- schema -------------------------------------------------------------------------------------------

    def _upgrade(self, rev: str | None) -> None:
        if rev is None and self._create_fresh():
            return
        from sqlalchemy.exc import DBAPIError

        from ledger.store.migrating import upgrade

        try:
            # A deferred BEGIN would read alembic_version and then fail at once with "database is locked" when
            # another process opening the fresh file wrote first; IMMEDIATE waits (busy_timeout) instead.
            with self.engine.execution_options(ledger_immediate=True).begin() as conn:
                upgrade(conn)
        except DBAPIError as e:
            raise StoreError(f"cannot prepare the ledger at {self.describe()}: {e.orig}{self._readonly_hint()}") from e

    def _create_fresh(self) -> bool:
        try:
            with self._writer.connection() as con:
                return create_fresh(con)
        except sqlite3.Error as e:
            raise StoreError(f"cannot prepare the ledger at {self.describe()}: {e}{self._readonly_hint()}") from e

    def revision(self) -> str | None:
        try:
            with self._readers.connection() as con:
                row = con.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return None
            raise StoreError(f"cannot read the ledger at {self.describe()}: {e}{self._readonly_hint()}") from e
        return row[0] if row else None

    def triggers(self) -> set[str]:
        q = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'"
        return {r[0] for r in self._read(q, ())}

    def _write_transaction(self, work: Callable[[sqlite3.Connection], Any], what: str) -> Any:
        try:
            with self._writer.connection() as con, immediate(con):
                return work(con)
        except sqlite3.Error as e:
            raise StoreError(f"{what} at {self.describe()}: {e}") from e

    # -- writing ------------------------------------------------------------------------------------------

    def _append_rows(
        self, stream: str, rows: Sequence[tuple[str, str, bytes]], expected_version: int | None
    ) -> list[StoredEvent]:
        # The capture hot path: one append of one event per toolkit step, so plain driver calls and nothing else.
        if len(rows) == 1:
            return self._write(stream, expected_version, lambda dbapi, head: [insert_one(dbapi, stream, rows[0], head)])
        return self._write(
            stream, expected_version, lambda dbapi, head: insert_batch(dbapi, chain_rows(stream, rows, *head))
        )

    def _append_chunked(self, stream: str, new_events: Iterable[Event], expected_version: int | None) -> StoredEvent:
        return self._write(
            stream, expected_version, lambda dbapi, head: insert_chunked(dbapi, stream, new_events, head)
        )[0]

    def _write(
        self,
        stream: str,
        expected_version: int | None,
        insert: Callable[[sqlite3.Connection, tuple[int, str]], list[StoredEvent]],
    ) -> list[StoredEvent]:
        """``insert(connection, head)`` in one write transaction, after the version check; what it inserted."""
        head = self._heads.known(stream, expected_version)
        try:
            with self._writer.connection() as dbapi:
                dbapi.execute("BEGIN IMMEDIATE")
                try:
                    if head is None:
                        row = dbapi.execute(HEAD_SQL, (stream,)).fetchone()
                        head = (row[0], row[1]) if row else (0, chain.GENESIS)
                        if expected_version is not None and head[0] != expected_version:
                            raise VersionConflict(stream, expected_version)
                    out = insert(dbapi, head)
                    dbapi.execute("COMMIT")
                except BaseException:
                    if dbapi.in_transaction:
                        dbapi.execute("ROLLBACK")
                    raise
            self._checkpointer.committed(1 + (out[-1].version - head[0] - 1) // EVENTS_PER_PAGE)
            self._follower.committed()
        except sqlite3.Error as e:
            self._heads.forget(stream)
            if isinstance(e, sqlite3.IntegrityError) and "UNIQUE" in str(e):  # another writer took the version
                raise VersionConflict(stream, expected_version) from e
            raise StoreError(f"cannot append to the ledger at {self.describe()}: {e}") from e
        except BaseException:
            self._heads.forget(stream)
            raise
        self._heads.set(stream, out[-1])
        return out

    def insert_copied(self, rows: Sequence[StoredEvent] | CopyBatch) -> int:
        batch = copy_batch_of(rows)
        rows = batch.rows
        if not rows:
            return 0
        lowest = lowest_versions(rows)
        try:
            with self._writer.connection() as con, immediate(con):
                new = insert_copied(con, batch, lowest)
        except sqlite3.IntegrityError as e:
            # Every writer reads the head under the write lock, so this is a row the schema refuses (CHECK).
            raise StoreError(f"cannot copy into the ledger at {self.describe()}: {e}") from e
        except sqlite3.Error as e:
            raise StoreError(f"cannot write to the ledger at {self.describe()}: {e}") from e
        finally:
            for s in lowest:
                self._heads.forget(s)
        return len(new)

    # -- snapshots (a cache: never the truth) ------------------------------------------------------------------

    def put_snapshot(self, stream: str, kind: str, version: int, seq: int, body: bytes) -> None:
        if self.readonly:
            return

        def work(con: sqlite3.Connection) -> None:
            con.execute("DELETE FROM snapshots WHERE stream = ?", (stream,))
            con.execute(
                "INSERT INTO snapshots (stream, kind, version, seq, body) VALUES (?, ?, ?, ?, ?)",
                (stream, kind, version, seq, body),
            )

        with contextlib.suppress(StoreError):  # only a cache: the next writer or reader caches it again
            self._write_transaction(work, "cannot cache a card's state")

    # -- reading ------------------------------------------------------------------------------------------

    def read_bodies(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None
    ) -> tuple[list[bytes], int, int]:
        where, args = stream_query("?", "", stream, after_version, until_seq, None)

        def read(con: sqlite3.Connection) -> tuple[list[bytes], Any]:
            # One-column rows iterated straight into a list cost about half of fetching (body, version, seq).
            bodies = [r[0] for r in con.execute(f"SELECT body FROM events {where} ORDER BY version", args)]
            return bodies, con.execute(LAST_SQL.format(where), args).fetchone()

        bodies, row = self._snapshot(read)  # one snapshot, so that the last version matches the bodies
        if not bodies or row is None:
            return [], after_version, 0
        return bodies, row[0], row[1]

    def read_joined(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None, chunk: int = 25_000
    ) -> tuple[list[tuple[bytes, int]], int, int]:
        """Like :meth:`read_bodies`, the bodies as ``(JSON lines, count)`` chunks of up to ``chunk`` versions, joined by
        SQLite (no row object per event: a cold replay of a million events is mostly that; see :func:`joined_sql`)."""
        where, args = stream_query("?", "", stream, after_version, until_seq, None)

        def read(con: sqlite3.Connection) -> tuple[list[tuple[bytes, int]], Any]:
            joined = joined_sql(con, where)
            row = con.execute(LAST_SQL.format(where), args).fetchone()
            out = []
            for lo in range(after_version, row[0] if row is not None else after_version, chunk):
                body, count = con.execute(joined, ("\n", *args[:1], lo, *args[2:], lo + chunk)).fetchone()
                if count:
                    out.append((body, count))
            return out, row

        out, row = self._snapshot(read)  # one snapshot for every statement
        if row is None:
            return [], after_version, 0
        return out, row[0], row[1]

    def iter_joined(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None, chunk: int = 25_000
    ) -> tuple[Iterable[tuple[bytes, int]], int, int]:
        """Like :meth:`read_joined`; past one chunk, read ahead by a second thread (close the iterable if not read
        to the end: see :func:`chunk_reader`)."""
        where, args = stream_query("?", "", stream, after_version, until_seq, None)
        row = self._read(LAST_SQL.format(where), args)
        if not row:
            return [], after_version, 0
        if row[0][0] - after_version <= chunk:
            return self.read_joined(stream, after_version=after_version, until_seq=until_seq, chunk=chunk)

        last, seq = row[0]
        ranges = [(lo, min(lo + chunk, last)) for lo in range(after_version, last, chunk)]
        with self._readers.connection() as con:
            joined = joined_sql(con, where)
        return chunk_reader(self._connect, joined, ("\n", stream, *args[2:]), ranges), last, seq

    def stream_names(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` stream names that start with ``prefix``, in order: a seek of the (stream, version) index
        for each, so naming a card by a prefix costs a few index lookups, not a scan of its events."""
        out: list[str] = []
        rows = self._read("SELECT stream FROM events WHERE stream >= ? ORDER BY stream LIMIT 1", (prefix,))
        while rows and len(out) < limit and isinstance(rows[0][0], str) and rows[0][0].startswith(prefix):
            out.append(rows[0][0])
            rows = self._read("SELECT stream FROM events WHERE stream > ? ORDER BY stream LIMIT 1", (out[-1],))
        return out

    def _prefix(self, prefix: str) -> tuple[str, tuple[str, ...]]:
        # Not LIKE: that would be case-insensitive for ASCII and need its wildcards escaped.
        return "substr(stream, 1, length(?)) = ?", (prefix, prefix)

    def _read(self, q: str, args: tuple[Any, ...]) -> list[Any]:
        try:
            with self._readers.connection() as con:
                return con.execute(q, args).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"cannot read the ledger at {self.describe()}: {e}") from e

    def same_database(self, other: LogStore) -> bool:
        if not isinstance(other, SQLiteStore):
            return False
        try:
            return os.path.samefile(self.path, other.path)
        except OSError:
            return False

    def describe(self) -> str:
        return self.url

    def close(self) -> None:
        self._checkpointer.close()
        super().close()
