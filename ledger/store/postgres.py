"""The PostgreSQL backend, on psycopg 3 with plain SQL; appends through the driver's pipeline mode.

A read command must not pay for importing SQLAlchemy (several times the interpreter's own start): the log is read
and written through psycopg connections (one writer and a few readers, whatever the number of threads:
:mod:`~ledger.store.connections`), and SQLAlchemy/Alembic are loaded only to create or upgrade the schema or when
a caller asks for :attr:`PostgresStore.engine` (the Merkle tree's tools, tests).

Appends take a transaction-level advisory lock, so ``seq`` is in commit order and a reader tailing by ``seq`` never
skips a late commit. A read-only store runs every transaction READ ONLY and refuses a database without our tables.

The cards summary follows the log by position (summary.py). Tailing by ``seq`` is safe here only because every
insert into ``events`` takes the append advisory lock before its ``seq`` is drawn and keeps it to its commit
(``lock_statement`` in the append, the import and the copy): the events commit in ``seq`` order, so an event the
catch-up has not seen can never get a ``seq`` below one it has. The catch-up itself does not take the append lock
(appends never wait for it); catch-ups are serialized by the position row (``SELECT ... FOR UPDATE``), and under
READ COMMITTED each statement after that lock sees every event committed so far.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import psycopg

from ledger.domain import chain
from ledger.errors import HistoryConflict, StoreError, VersionConflict
from ledger.store.base import (
    BOUND_SNAPSHOT_SQL,
    LINK_SQL,
    CopyBatch,
    Durability,
    Follower,
    HeadCache,
    LogStore,
    Snapshot,
    StoreBase,
    StoredEvent,
    StreamInfo,
    SummaryOverlay,
    bound_snapshot_of,
    chain_rows,
    check_revision,
    copy_batch_of,
    link_of,
    no_ledger,
)
from ledger.store.connections import ReadPool, Writer
from ledger.store.pg_engine import (
    DB_ERRORS,
    EVENT_COLUMNS,
    HEAD_SQL,
    PG_APPEND_LOCK,
    PREFIX_SQL,
    STREAMS_SQL,
    connector,
    drop_connection,
    idle_usable,
    insert_chunked,
    insert_rows,
    like_prefix,
    lock_statement,
    make_engine,
    parse_url,
    read_rows,
    reason,
    rollback_quietly,
    stored_event,
    stream_sql,
    stream_where,
)

# SQLiteStore's twin over another driver and dialect, method by method; what both do alike is StoreBase's.
if TYPE_CHECKING:
    from ledger.store.summary import SummaryKeeper


class PostgresStore(StoreBase):
    """A ledger in one PostgreSQL database."""

    dialect = "postgresql"

    def __init__(
        self, url: str, *, durability: Durability = "normal", busy_timeout_ms: int = 60_000, readonly: bool = False
    ) -> None:
        self.url = url
        self._url = parse_url(url)
        self.durability = durability
        self.busy_timeout_ms = busy_timeout_ms
        self.readonly = readonly
        self._open = connector(self._url, readonly=readonly)
        self._heads = HeadCache()
        self._keeper: SummaryKeeper | None = None
        # The cards summary is caught up after commits, off the appending thread (see summary_tail.py).
        self._follower = Follower(self._follow)
        self._overlay: SummaryOverlay | None = None
        timeout = busy_timeout_ms / 1000
        # Appends hold the one writer; reads check a connection out of the bounded pool per call (connections.py).
        self._writer: Writer[psycopg.Connection[Any]] = Writer(
            self._connect,
            drop_connection,
            timeout=timeout,
            where=self.describe,
            usable=lambda conn: not (conn.closed or conn.broken),
        )
        # Readers run in autocommit mode: a lone statement is its own transaction (no BEGIN and ROLLBACK round
        # trips); a read that needs one snapshot opens a transaction of its own.
        self._readers: ReadPool[psycopg.Connection[Any]] = ReadPool(
            lambda: self._open(True), drop_connection, usable=idle_usable, timeout=timeout, where=self.describe
        )
        self._engine: Any = None
        if readonly:
            try:
                self._check_is_ledger()
            except BaseException:
                self.close()
                raise

    def _connect(self) -> psycopg.Connection[Any]:
        """A connection outside autocommit mode (the writer's; the engine's for migrations and tools)."""
        return self._open(False)

    @property
    def engine(self) -> Any:
        """A SQLAlchemy engine on the same database with the same settings (loads SQLAlchemy: migrations, tools);
        its connections are not pooled."""
        if self._engine is None:
            self._engine = make_engine(self._connect)
        return self._engine

    def _check_is_ledger(self) -> None:
        q = (
            "SELECT to_regclass('events') IS NOT NULL, to_regclass('alembic_version') IS NOT NULL, "
            "(SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())"
        )
        has_events, has_version, tables = self._read(q)[0]
        if not (has_events and has_version):
            if tables == 0:
                raise no_ledger(self.describe())
            raise StoreError(f"{self.describe()} is not a ledger (no events table or schema revision)")
        check_revision(self.revision(), self.describe())

    # -- schema -------------------------------------------------------------------------------------------

    def _upgrade(self, rev: str | None) -> None:
        from sqlalchemy.exc import DBAPIError

        from ledger.store.migrating import upgrade

        if rev is None and self._read("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()")[0][0]:
            self._check_is_ledger()  # another program's tables: refused as the read commands refuse them
        try:
            with self.engine.begin() as conn:
                upgrade(conn)
        except (DBAPIError, *DB_ERRORS) as e:
            raise StoreError(f"cannot prepare the ledger at {self.describe()}: {reason(_orig(e))}") from e

    def revision(self) -> str | None:
        """The schema revision the database is at (None for an empty database)."""
        try:
            with self._readers.connection() as conn:
                if conn.execute("SELECT to_regclass('alembic_version')").fetchone() == (None,):
                    return None
                row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except DB_ERRORS as e:
            raise StoreError(f"cannot read the ledger at {self.describe()}: {reason(e)}") from e
        return row[0] if row else None

    def triggers(self) -> set[str]:
        """Names of the enabled append-only triggers present on ``events``."""
        # A disabled trigger ('D'), or one firing only for replication ('R'), does not protect the log.
        q = (
            "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass('events') "
            "AND NOT tgisinternal AND tgenabled IN ('O', 'A')"
        )
        return {r[0] for r in self._read(q)}

    def repair_triggers(self) -> list[str]:
        """Create the missing (or disabled) append-only triggers again (``ledger init``); returns their names."""
        missing = self.missing_triggers()
        if missing:
            from ledger.store.migrating import trigger_statements

            self._write_transaction(
                lambda pg: [pg.execute(stmt) for stmt in trigger_statements(self.dialect, missing)],
                "cannot prepare the ledger",
            )
        return missing

    def _write_transaction(self, work: Any, what: str) -> Any:
        """``work(connection)`` in one transaction on the writer, committed (rolled back on any error)."""
        with self._writer.locked():
            try:
                pg = self._write_dbapi()
            except DB_ERRORS as e:
                raise StoreError(f"{what} at {self.describe()}: {reason(e)}") from e
            try:
                out = work(pg)
                pg.commit()
                return out
            except DB_ERRORS as e:
                self._failed(pg)
                raise StoreError(f"{what} at {self.describe()}: {reason(e)}") from e
            except BaseException:
                rollback_quietly(pg)
                raise

    # -- writing ------------------------------------------------------------------------------------------

    def _append_rows(
        self, stream: str, rows: Sequence[tuple[str, str, bytes]], expected_version: int | None
    ) -> list[StoredEvent]:
        # The capture hot path. psycopg's pipeline mode sends BEGIN, the advisory lock, the INSERT and COMMIT in
        # one round trip when this process knows the stream's head (two when it must read it under the lock).
        head = self._heads.known(stream, expected_version)
        with self._writer.locked():
            return self._append_locked(stream, rows, expected_version, head)

    def _append_chunked(self, stream: str, new_events: Iterable[Any], expected_version: int | None) -> StoredEvent:
        head = self._heads.known(stream, expected_version)
        with self._writer.locked():
            return self._append_locked(stream, (), expected_version, head, new_events)[-1]

    def _append_locked(
        self, stream: str, rows: Sequence[Any], expected_version: int | None, head: Any, events: Iterable[Any] = ()
    ) -> list[StoredEvent]:
        sent: list[StoredEvent] | None = None
        for attempt in (1, 2):
            try:
                pg = self._write_dbapi()
            except DB_ERRORS as e:
                self._heads.forget(stream)
                raise StoreError(f"cannot append to the ledger at {self.describe()}: {reason(e)}") from e
            try:
                locked = False
                if head is None:
                    with pg.pipeline():
                        pg.execute(lock_statement(self.durability, "%s", "%s"), self._lock_args())
                        cur = pg.execute(HEAD_SQL, (stream,))
                    row = cur.fetchone()
                    head = (row[0], row[1]) if row else (0, chain.GENESIS)
                    locked = True
                    if sent is not None and head == (sent[-1].version, sent[-1].hash):
                        # The attempt that lost its connection did commit: these are its rows.
                        return self._appended(stream, sent, self._seqs(pg, stream, sent))
                    if expected_version is not None and head[0] != expected_version:
                        raise VersionConflict(stream, expected_version)
                lock = None if locked else (lock_statement(self.durability, "%s", "%s"), self._lock_args())
                if events != ():  # a chunk at a time (see insert_chunked): only the last row is kept
                    new = [insert_chunked(pg, stream, events, head, lock)]
                    self._follower.committed()
                    return self._appended(stream, new, [new[0].seq])
                new = sent = chain_rows(stream, rows, *head)
                seq_of = insert_rows(pg, new, lock)
                self._follower.committed()
                return self._appended(stream, new, [seq_of[e.version] for e in new])
            except VersionConflict:
                rollback_quietly(pg)
                self._heads.forget(stream)
                raise
            except psycopg.errors.UniqueViolation as e:
                rollback_quietly(pg)
                self._heads.forget(stream)
                raise VersionConflict(stream, expected_version) from e
            except psycopg.Error as e:
                if self._failed(pg) and attempt == 1 and isinstance(events, Sequence):
                    # The server closed the connection (restart, idle timeout, terminated backend): once more on a
                    # new one; whether the lost attempt committed is read from the head, under the lock. (Events
                    # made as they are inserted are not sent again: the import that makes them starts again.)
                    head = None
                    continue
                self._heads.forget(stream)
                raise StoreError(f"cannot append to the ledger at {self.describe()}: {' '.join(str(e).split())}") from e
            except BaseException:
                rollback_quietly(pg)
                self._heads.forget(stream)
                raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _failed(self, pg: Any) -> bool:
        """Roll back the writer's failed transaction; True if the connection was lost (it is replaced before reuse)."""
        lost = bool(pg.broken or pg.closed)
        rollback_quietly(pg)
        if lost:
            self._writer.discard()
        return lost

    def _appended(self, stream: str, new: list[StoredEvent], seqs: list[int]) -> list[StoredEvent]:
        out = [msgspec.structs.replace(e, seq=s) for s, e in zip(seqs, new, strict=True)]
        self._heads.set(stream, out[-1])
        return out

    # -- the cards summary (summary.py): loaded when a list or a writer needs it, not by every read --------

    @property
    def _summary(self) -> SummaryKeeper:
        if self._keeper is None:
            from ledger.store.summary import SummaryKeeper

            self._keeper = SummaryKeeper()
        return self._keeper

    def catch_up_summary(self, *, wait: bool = True) -> int:
        """Fold into the cards summary the events it does not reflect yet; how many (0 on a read-only store).

        On a connection of the read pool, not the writer: the appending thread never waits for a catch-up.
        ``wait`` False (the follower thread): nothing if another session is catching up right now."""
        if self.readonly:
            return 0
        import psycopg

        from ledger.store.pg_engine import reason

        try:
            with self._readers.connection() as conn:
                # Its own transactions (commit and rollback are the catch-up's), then autocommit again for reads.
                conn.autocommit = False
                try:
                    return pg_catch_up(self._summary, conn, wait=wait)
                finally:
                    if not conn.broken:  # (a broken one is dropped by the pool)
                        conn.rollback()
                        conn.autocommit = True
        except psycopg.Error as e:
            raise StoreError(f"cannot update the cards summary of the ledger at {self.describe()}: {reason(e)}") from e

    def rebuild_summary(self) -> int:
        from ledger.store import tracking
        from ledger.store.figures import has_figures
        from ledger.store.pg_engine import PG_APPEND_LOCK
        from ledger.store.summary import UPSERT_SQL, pg, write_streamed

        def work(conn: Any) -> int:
            def execute(sql: str, params: Any) -> None:
                if isinstance(params, list):
                    with conn.cursor() as cur:
                        cur.executemany(pg(sql), params)
                else:
                    conn.execute(pg(sql), tuple(params) or None)

            def read(sql: str, args: Any) -> list[Any]:
                return conn.execute(pg(sql), tuple(args) or None).fetchall()

            conn.execute("SELECT pg_advisory_xact_lock(%s)", (PG_APPEND_LOCK,))
            n = write_streamed(read, execute, UPSERT_SQL, None, figures=has_figures(read, "postgresql"))
            conn.execute(pg(tracking.AT_HEAD_SQL), (tracking.SUMMARY,))
            return n

        return int(self._write_transaction(work, "cannot rebuild the cards summary of the ledger"))

    def _follow(self) -> None:
        with contextlib.suppress(StoreError):
            self.catch_up_summary(wait=False)

    def summary_at_head(self) -> SummaryOverlay | None:
        """None once the summary tables reflect the log's head (caught up here when behind); for a read-only store
        that is behind, the overlay to answer from (nothing written)."""
        import psycopg

        from ledger.store.pg_engine import reason
        from ledger.store.summary import POSITION_SQL, position

        try:
            with self._readers.connection() as conn:
                at, head = position(conn.execute(POSITION_SQL).fetchone() or (0, 0, 1), self.describe())
                if at >= head:
                    return None
                if self.readonly:
                    return self._overlay_at(conn, head)
        except psycopg.Error as e:
            if "tracking" in str(e):  # an earlier revision, open read-only: it is read as it is
                return None
            raise StoreError(f"cannot read the ledger at {self.describe()}: {reason(e)}") from e
        self.catch_up_summary()
        return None

    def _overlay_at(self, conn: Any, head: int) -> SummaryOverlay:
        from ledger.store.summary import POSITION_SQL, build_overlay, pg, position, probe

        if self._overlay is not None and self._overlay.head == head:
            return self._overlay
        # One snapshot for the stored tables and the tail (a writer's catch-up may commit meanwhile).
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        try:

            def fetch(sql: str, args: Any) -> list[Any]:
                return list(conn.execute(pg(sql), tuple(args) or None).fetchall())

            at, head = position(fetch(POSITION_SQL, ())[0], self.describe())
            probe(self._summary, fetch, "postgresql")
            self._overlay = build_overlay(fetch, self._summary, head, at)
        finally:
            if not conn.broken:  # (a broken one is dropped by the pool)
                conn.execute("ROLLBACK")
        return self._overlay

    def _lock_args(self) -> tuple[int, str]:
        return (PG_APPEND_LOCK, str(int(self.busy_timeout_ms)))

    def _seqs(self, pg: Any, stream: str, new: list[StoredEvent]) -> list[int]:
        rows = pg.execute(
            "SELECT version, seq FROM events WHERE stream = %s AND version BETWEEN %s AND %s",
            (stream, new[0].version, new[-1].version),
        ).fetchall()
        pg.rollback()
        seq_of = dict(rows)
        return [seq_of[e.version] for e in new]

    def _write_dbapi(self) -> psycopg.Connection[Any]:
        """The psycopg connection every append of this process goes through (hold ``self._writer.locked()`` to use
        it; it is got holding the writer, so one found unusable is never closed under another thread's use)."""
        with self._writer.locked():
            return self._writer.get()

    def prepare_copied(self, rows: Sequence[StoredEvent]) -> CopyBatch:
        """``rows`` checked against their own hashes and encoded as binary COPY data (reads and writes nothing)."""
        from ledger.store.pg_copy import prepare

        return prepare(rows)

    def insert_copied(self, rows: Sequence[StoredEvent] | CopyBatch) -> int:
        """Insert events copied from another ledger, keeping their versions and hashes (see the protocol).

        Each stream must continue exactly; a row the destination already holds is skipped. Raises
        :class:`HistoryConflict` or :class:`StoreError` with nothing written. Returns the number inserted. The rows
        go in through COPY (see :mod:`~ledger.store.pg_copy`).
        """
        from ledger.store.pg_copy import copy_batch

        batch = copy_batch_of(rows)
        rows = batch.rows
        if not rows:
            return 0
        lock = (lock_statement(self.durability, "%s", "%s"), self._lock_args())
        try:
            with self._writer.locked():
                for attempt in (1, 2):
                    try:
                        pg = self._write_dbapi()
                    except DB_ERRORS as e:
                        raise StoreError(f"cannot write to the ledger at {self.describe()}: {reason(e)}") from e
                    try:
                        n = copy_batch(pg, batch, lock)
                        pg.commit()
                        # The summary is caught up by the next read (or a writer's catch-up), in bulk.
                        return n
                    except (HistoryConflict, StoreError):
                        rollback_quietly(pg)
                        raise
                    except psycopg.Error as e:
                        if self._failed(pg) and attempt == 1:
                            # A dropped connection: once more on a new one (a batch that did commit is skipped
                            # as held).
                            continue
                        # Every writer reads the heads under the append lock: an integrity error is a row the
                        # schema refuses.
                        msg = " ".join(str(e).split())
                        raise StoreError(f"cannot copy into the ledger at {self.describe()}: {msg}") from e
                    except BaseException:
                        rollback_quietly(pg)
                        raise
        finally:
            for s in {r.stream for r in rows}:
                self._heads.forget(s)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    # -- snapshots (a cache: never the truth) ------------------------------------------------------------------

    def get_snapshot(self, stream: str, kind: str) -> Snapshot | None:
        """A cached projection of ``stream``, or None (also when the cache is unreadable)."""
        q = "SELECT version, seq, body FROM snapshots WHERE stream = %s AND kind = %s"
        try:
            rows = self._read(q, (stream, kind))
        except StoreError:
            return None
        return Snapshot(rows[0][0], rows[0][1], bytes(rows[0][2])) if rows else None

    def put_snapshot(self, stream: str, kind: str, version: int, seq: int, body: bytes) -> None:
        """Store (or replace) the cached projection of ``stream``; failures are ignored, it is only a cache."""
        if self.readonly:
            return
        try:
            with self._readers.connection() as conn, conn.transaction(), conn.pipeline():
                conn.execute("DELETE FROM snapshots WHERE stream = %s", (stream,))
                conn.execute(
                    "INSERT INTO snapshots (stream, kind, version, seq, body) VALUES (%s, %s, %s, %s, %s)",
                    (stream, kind, version, seq, body),
                )
        except (*DB_ERRORS, StoreError):
            # Includes two writers racing on the same row (a unique violation): either cache is fine.
            pass

    def drop_snapshots(self) -> None:
        """Delete every cached projection."""
        try:
            with self._readers.connection() as conn:
                conn.execute("DELETE FROM snapshots")
        except DB_ERRORS as e:
            raise StoreError(f"cannot write to the ledger at {self.describe()}: {reason(e)}") from e

    def analyze(self) -> None:
        """ANALYZE the tables the lists read: a ledger filled by COPY has no statistics until autovacuum gets to
        it, and the planner then reads every card of a tag for a page of them."""
        if self.readonly:
            return
        try:
            with self._readers.connection() as conn:
                conn.execute("ANALYZE events, card_summary, card_summary_keys")
        except (*DB_ERRORS, StoreError):
            pass  # statistics only steer the planner: the copied events are committed either way

    def snapshots_for(self, streams: Sequence[str], kind: str) -> dict[str, Snapshot]:
        """Cached projections of many streams at once."""
        out: dict[str, Snapshot] = {}
        q = "SELECT stream, version, seq, body FROM snapshots WHERE stream = ANY(%s) AND kind = %s"
        try:
            for i in range(0, len(streams), 500):
                for r in self._read(q, (list(streams[i : i + 500]), kind)):
                    out[r[0]] = Snapshot(r[1], r[2], bytes(r[3]))
        except StoreError:
            return {}
        return out

    # -- reading ------------------------------------------------------------------------------------------

    def read_stream(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None, page: tuple[int, int] | None = None
    ) -> list[StoredEvent]:
        """Every event of ``stream`` in version order (after a version, up to a global seq; ``page``: see base)."""
        return [stored_event(r) for r in self._read(*stream_sql(stream, after_version, until_seq, page))]

    def read_bodies(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None
    ) -> tuple[list[bytes], int, int]:
        """Only the bodies of ``stream`` in version order, with the last version and seq read."""
        where, args = stream_where(stream, after_version, until_seq)
        rows = self._read(f"SELECT body, version, seq FROM events {where} ORDER BY version", args)
        if not rows:
            return [], after_version, 0
        return [bytes(r[0]) for r in rows], rows[-1][1], rows[-1][2]

    def iter_joined(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None, chunk: int = 25_000
    ) -> None:
        """None: this backend has no joined read; the facade reads the bodies with :meth:`read_bodies` (one query)."""
        return None

    def stream_exists(self, stream: str) -> bool:
        """True if the stream has at least one event."""
        return bool(self._read("SELECT seq FROM events WHERE stream = %s LIMIT 1", (stream,)))

    def streams(self, prefix: str | None = None) -> list[StreamInfo]:
        """Every stream (optionally those whose name starts with ``prefix``), in order of first event."""
        # The head hash in the same query (a join on UNIQUE(stream, version)): one round trip, not one per stream.
        if prefix is None:
            return [StreamInfo(*r) for r in self._read(STREAMS_SQL.format(where=""))]
        q = STREAMS_SQL.format(where=f"WHERE {PREFIX_SQL}")
        return [StreamInfo(*r) for r in self._read(q, (like_prefix(prefix),))]

    def scan(self, *, after_seq: int = 0, batch: int = 10_000, prefix: str | None = None) -> Iterator[StoredEvent]:
        """Every event in global ``seq`` order, read in batches (for verify, copy and tailing)."""
        last = after_seq
        extra, pargs = (f" AND {PREFIX_SQL}", (like_prefix(prefix),)) if prefix is not None else ("", ())
        q = f"SELECT {EVENT_COLUMNS} FROM events WHERE seq > %s{extra} ORDER BY seq LIMIT %s"
        while True:
            rows = [stored_event(r) for r in self._read(q, (last, *pargs, batch))]
            if not rows:
                return
            yield from rows
            last = rows[-1].seq

    def event_at(self, stream: str, version: int) -> StoredEvent | None:
        """The event of ``stream`` at ``version``, or None."""
        rows = self._read(f"SELECT {EVENT_COLUMNS} FROM events WHERE stream = %s AND version = %s", (stream, version))
        return stored_event(rows[0]) if rows else None

    def bound_snapshot(self, stream: str, kind: str) -> tuple[Snapshot, tuple[int, str, int] | None] | None:
        """A cached projection of ``stream`` with :meth:`link_at` of its version, in one query (None: no snapshot,
        or an unreadable cache)."""
        try:
            return bound_snapshot_of(self._read(BOUND_SNAPSHOT_SQL.format(m="%s"), (stream, kind)))
        except StoreError:
            return None

    def stream_names(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` stream names that start with ``prefix``, in order."""
        q = f"SELECT DISTINCT stream FROM events WHERE {PREFIX_SQL} ORDER BY stream LIMIT %s"
        return [str(r[0]) for r in self._read(q, (like_prefix(prefix), limit))]

    def link_at(self, stream: str, version: int) -> tuple[int, str, int] | None:
        """(seq, hash) of the event of ``stream`` at ``version`` and how many events the stream holds up to it."""
        return link_of(self._read(LINK_SQL.format(m="%s"), (stream, version, stream, version)))

    def snapshot_keys(self) -> list[tuple[str, str, int, int]]:
        """(stream, kind, version, seq) of every stored snapshot, by stream."""
        return [tuple(r) for r in self._read("SELECT stream, kind, version, seq FROM snapshots ORDER BY stream", ())]

    def max_seq(self) -> int:
        """The highest ``seq`` in the log (0 when empty)."""
        return int(self._read("SELECT coalesce(max(seq), 0) FROM events")[0][0])

    def count(self) -> int:
        """Number of events in the log."""
        return int(self._read("SELECT count(*) FROM events")[0][0])

    def _read(self, q: str, args: Sequence[Any] | None = None) -> list[Any]:
        """Rows of one statement (``%s`` placeholders) on a reader connection, as its own transaction."""
        try:
            return read_rows(self._readers, q, args or None)
        except DB_ERRORS as e:
            raise StoreError(f"cannot read the ledger at {self.describe()}: {reason(e)}") from e

    def same_database(self, other: LogStore) -> bool:
        """True if ``other`` is a connection to this very database (same server and name)."""
        return isinstance(other, PostgresStore) and self._url.place() == other._url.place()

    def describe(self) -> str:
        """The database, for messages (no password)."""
        return self._url.render()

    def close(self) -> None:
        """Release every connection this process opened (a forked child's: its own only); the summary is caught up
        first, when it can be."""
        if self._follower.close():
            # What the appends since its last catch-up added (a copy leaves it to the next read); waiting for
            # another session's catch-up, which may have read the log before this process's last commit.
            with contextlib.suppress(StoreError):
                self.catch_up_summary()
        self._writer.close()
        self._readers.close()
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


def _orig(e: Exception) -> Exception:
    """The driver's error under a SQLAlchemy one."""
    return getattr(e, "orig", None) or e


def _reader(conn: Any) -> Callable[[str, Any], list[Any]]:
    from ledger.store.summary import pg

    return lambda sql, params: conn.execute(pg(sql), params).fetchall()


def pg_catch_up(keeper: SummaryKeeper, conn: Any, *, wait: bool = True) -> int:
    """:func:`~ledger.store.summary.catch_up` on psycopg connection ``conn`` (not in autocommit mode).
    ``wait`` False: nothing when another session is catching up (it folds what was committed before it read)."""
    from ledger.store.summary import POSITION_SQL, catch_up, pg, position, probe

    def fetch(sql: str, args: Any) -> list[Any]:
        return list(conn.execute(pg(sql), args).fetchall())

    def begin() -> int:
        probe(keeper, _reader(conn), "postgresql")
        got = fetch(POSITION_SQL + (" FOR UPDATE" if wait else " FOR UPDATE SKIP LOCKED"), ())
        if not got:
            raise _Busy
        return position(got[0], "this ledger")[0]

    def execute(sql: str, params: Any) -> None:
        conn.execute(pg(sql), params)

    def executemany(sql: str, params: Any) -> None:
        with conn.cursor() as cur:
            cur.executemany(pg(sql), params)

    try:
        return catch_up(keeper, begin, fetch, execute, executemany, conn.commit, conn.rollback, conn.pipeline)
    except _Busy:
        conn.rollback()
        return 0


class _Busy(Exception):
    """Another session holds the position row (a follower does not queue behind it)."""
