"""The log: the only code that speaks SQL.

One append-only ``events`` table (schema owned by the Alembic migrations in ``migrations/``), on SQLite or
PostgreSQL through SQLAlchemy Core. Appends are serialized (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a
transaction-level advisory lock) so that ``seq`` is commit order, and a per-stream ``version`` with
UNIQUE(stream, version) gives optimistic concurrency between writers of one stream.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec
from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    func,
    select,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, OperationalError

from ledger.core import chain
from ledger.core.events import Event, encode, type_of
from ledger.errors import HistoryConflict, StoreError, VersionConflict

Durability = Literal["normal", "full"]

metadata = MetaData()

#: Mirrors ``migrations/versions``; the migrations, not this object, create and change the schema.
events = Table(
    "events",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("stream", String(400), nullable=False),
    Column("version", Integer, nullable=False),
    Column("type", String(40), nullable=False),
    Column("ts", String(40), nullable=False),
    Column("body", LargeBinary, nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
)

snapshots = Table(
    "snapshots",
    metadata,
    Column("stream", String(400), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
    Column("kind", String(40), nullable=False),
    Column("body", LargeBinary, nullable=False),
)

APPEND_ONLY_TRIGGERS = {
    "sqlite": ("events_no_update", "events_no_delete"),
    "postgresql": ("events_no_update", "events_no_delete", "events_no_truncate"),
}

# This process's id, kept current across fork (os.getpid() is a system call on the append hot path).
_pid = os.getpid()


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork)

_SQLITE_HEAD = "SELECT version, hash FROM events WHERE stream = ? ORDER BY version DESC LIMIT 1"
_SQLITE_INSERT = "INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)"

# Any constant works; it only has to be the same for every writer of one PostgreSQL database.
_PG_APPEND_LOCK = 0x4C454447  # "LEDG"
_PG_MIGRATE_LOCK = 0x4C454448  # concurrent first opens of one database must not both create the schema


class StoredEvent(msgspec.Struct, frozen=True):
    """One row of the log, exactly as stored."""

    # A frozen Struct: a batch append returns one per event, and a frozen dataclass costs ~1 us each to build.

    seq: int
    stream: str
    version: int
    type: str
    ts: str
    body: bytes
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """A stream's extent: number of events, last version and head hash, first and last ``seq``."""

    stream: str
    count: int
    version: int
    head: str
    first_seq: int
    last_seq: int
    first_ts: str
    last_ts: str


def normalize_url(path_or_url: str | os.PathLike[str]) -> str:
    """A file path becomes a ``sqlite:///`` URL; anything with ``://`` is taken as a SQLAlchemy URL."""
    s = os.fspath(path_or_url)
    if "://" in s:
        return s
    return "sqlite:///" + str(Path(s).expanduser().resolve())


def migrations_dir() -> Path:
    """Where the Alembic scripts are: ``migrations/`` beside this module, inside the package."""
    return Path(__file__).resolve().parent / "migrations"


def _row(r: Any) -> StoredEvent:
    return StoredEvent(r[0], r[1], r[2], r[3], r[4], bytes(r[5]), r[6], r[7])


_COLS = (
    events.c.seq,
    events.c.stream,
    events.c.version,
    events.c.type,
    events.c.ts,
    events.c.body,
    events.c.prev_hash,
    events.c.hash,
)


class Store:
    """A connection to one ledger database."""

    def __init__(self, url: str, *, durability: Durability = "normal", busy_timeout_ms: int = 60_000) -> None:
        self.url = normalize_url(url)
        self.durability = durability
        self.busy_timeout_ms = busy_timeout_ms
        self.engine: Engine = _make_engine(self.url, durability, busy_timeout_ms)
        self.dialect = self.engine.dialect.name
        if self.dialect not in APPEND_ONLY_TRIGGERS:
            raise StoreError(f"unsupported database {self.dialect!r}: use a SQLite path or postgresql+psycopg://")
        # Last (version, hash) this process appended per stream: lets an append skip re-reading the head;
        # a stale entry only turns into a VersionConflict through UNIQUE(stream, version).
        self._heads: dict[str, tuple[int, str]] = {}
        self._heads_lock = threading.Lock()
        self._tls = threading.local()
        self._held: list[Any] = []
        # (pid, connection): a forked child must never close (so talk over) its parent's connections.
        self._pg_held: list[tuple[int, Any]] = []

    # -- schema -------------------------------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the schema to the latest Alembic revision (creates it on an empty database)."""
        from alembic import command
        from alembic.config import Config

        cfg = Config()
        cfg.set_main_option("script_location", str(migrations_dir()))
        try:
            if self.dialect == "sqlite" and self.revision() == self.head_revision():
                return  # already at head: opening for reading must not queue behind writers for the write lock
            # SQLite: a deferred BEGIN would read alembic_version and then fail at once with "database is locked"
            # when another process opening the fresh file wrote first; IMMEDIATE waits (busy_timeout) instead.
            with self.engine.execution_options(ledger_immediate=True).begin() as conn:
                if self.dialect == "postgresql":
                    # Eight agents opening a fresh team database at once: one creates the schema, the others
                    # wait here and then find it at head. (SQLite serializes DDL through its write lock.)
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATE_LOCK})
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        except DBAPIError as e:
            hint = self._readonly_hint()
            raise StoreError(f"cannot prepare the ledger at {self.describe()}: {_reason(e)}{hint}") from e

    def _readonly_hint(self) -> str:
        # SQLite only says "unable to open database file" for a ledger on a read-only mount (WAL needs to create
        # the -wal and -shm files beside it); root ignores permission bits, but os.access sees a read-only mount.
        path = self.engine.url.database if self.dialect == "sqlite" else None
        if not path or path == ":memory:":
            return ""
        writable = os.access(path, os.W_OK) if os.path.exists(path) else True
        if writable and os.access(os.path.dirname(path) or ".", os.W_OK):
            return ""
        return " (the file or its folder is read-only: the ledger needs to write the file and its -wal/-shm files)"

    def revision(self) -> str | None:
        """The Alembic revision the database is at (None for an empty database)."""
        from alembic.runtime.migration import MigrationContext

        try:
            with self.engine.connect() as conn:
                return MigrationContext.configure(conn).get_current_revision()
        except DBAPIError as e:
            raise StoreError(f"cannot read the ledger at {self.describe()}: {_reason(e)}{self._readonly_hint()}") from e

    def head_revision(self) -> str:
        """The newest revision the migrations know."""
        from alembic.config import Config
        from alembic.script import ScriptDirectory

        cfg = Config()
        cfg.set_main_option("script_location", str(migrations_dir()))
        head = ScriptDirectory.from_config(cfg).get_current_head()
        assert head is not None
        return head

    def triggers(self) -> set[str]:
        """Names of the append-only triggers present on ``events``."""
        with self.engine.connect() as conn:
            if self.dialect == "sqlite":
                rows = conn.execute(text("SELECT name FROM sqlite_master WHERE type='trigger' AND tbl_name='events'"))
            else:
                # A disabled trigger ('D'), or one firing only for replication ('R'), does not protect the log.
                rows = conn.execute(
                    text(
                        "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass('events') "
                        "AND NOT tgisinternal AND tgenabled IN ('O', 'A')"
                    )
                )
            return {r[0] for r in rows}

    def missing_triggers(self) -> list[str]:
        """Append-only triggers that should exist and do not."""
        have = self.triggers()
        return [t for t in APPEND_ONLY_TRIGGERS[self.dialect] if t not in have]

    # -- writing ------------------------------------------------------------------------------------------

    def append(
        self, stream: str, new_events: Sequence[Event], expected_version: int | None = None
    ) -> list[StoredEvent]:
        """Append events to ``stream`` in one transaction, committed when this returns.

        ``expected_version`` is the stream's last version the caller knows (0 for a new stream); if another
        writer got there first, :class:`VersionConflict` is raised and nothing is written. ``None`` appends
        after whatever the stream holds.
        """
        if not new_events:
            return []
        rows = [(type_of(e), e.ts.isoformat(), encode(e)) for e in new_events]
        return self._append_rows(stream, rows, expected_version)

    def append_encoded(
        self, stream: str, rows: Sequence[tuple[str, str, bytes]], expected_version: int | None = None
    ) -> list[StoredEvent]:
        """Like :meth:`append` for already encoded ``(type, ts, body)`` rows."""
        if not rows:
            return []
        return self._append_rows(stream, list(rows), expected_version)

    def _append_rows(
        self, stream: str, rows: list[tuple[str, str, bytes]], expected_version: int | None
    ) -> list[StoredEvent]:
        if self.dialect == "sqlite":
            return self._append_rows_sqlite(stream, rows, expected_version)
        if self.dialect == "postgresql":
            return self._append_rows_pg(stream, rows, expected_version)
        cached = self._heads.get(stream)
        try:
            with self._write() as conn:
                if cached is not None and expected_version is not None and cached[0] == expected_version:
                    version, prev = cached
                else:
                    version, prev = self._head(conn, stream)
                    if expected_version is not None and version != expected_version:
                        raise VersionConflict(stream, expected_version)
                params = self._chain_rows(stream, rows, version, prev)
                # A multi-row INSERT ... RETURNING does not promise rows in parameter order: match them by version.
                result = conn.execute(events.insert().returning(events.c.seq, events.c.version), params)
                seq_of = {r[1]: r[0] for r in result}
                seqs = [seq_of[p["version"]] for p in params]
        except IntegrityError as e:
            self._forget(stream)
            raise VersionConflict(stream, expected_version) from e
        except DBAPIError as e:
            # Any database failure must reach capture as a StoreError: the toolkit swallows other exceptions.
            self._forget(stream)
            raise StoreError(f"cannot append to the ledger at {self.describe()}: {_reason(e)}") from e
        except BaseException:
            self._forget(stream)
            raise
        return self._appended(stream, params, seqs)

    def _chain_rows(
        self, stream: str, rows: list[tuple[str, str, bytes]], version: int, prev: str
    ) -> list[dict[str, Any]]:
        params = []
        for type_, ts, body in rows:
            version += 1
            h = chain.event_hash(prev, stream, version, type_, body)
            params.append(
                {
                    "stream": stream,
                    "version": version,
                    "type": type_,
                    "ts": ts,
                    "body": body,
                    "prev_hash": prev,
                    "hash": h,
                }
            )
            prev = h
        return params

    def _appended(self, stream: str, params: list[dict[str, Any]], seqs: list[int]) -> list[StoredEvent]:
        last = params[-1]
        with self._heads_lock:
            self._heads[stream] = (last["version"], last["hash"])
        return [
            StoredEvent(seq, stream, p["version"], p["type"], p["ts"], p["body"], p["prev_hash"], p["hash"])
            for seq, p in zip(seqs, params, strict=True)
        ]

    def _append_rows_sqlite(
        self, stream: str, rows: list[tuple[str, str, bytes]], expected_version: int | None
    ) -> list[StoredEvent]:
        # The capture hot path: one append per toolkit step. Going through SQLAlchemy's Connection/transaction
        # machinery costs ~10x the commit itself, so this uses the driver connection SQLAlchemy pooled for this
        # thread, with the same statements the Core tables describe.
        dbapi = self._thread_dbapi()
        cached = self._heads.get(stream)
        try:
            dbapi.execute("BEGIN IMMEDIATE")
            try:
                if cached is not None and expected_version is not None and cached[0] == expected_version:
                    version, prev = cached
                else:
                    row = dbapi.execute(_SQLITE_HEAD, (stream,)).fetchone()
                    version, prev = (row[0], row[1]) if row else (0, chain.GENESIS)
                    if expected_version is not None and version != expected_version:
                        raise VersionConflict(stream, expected_version)
                params = self._chain_rows(stream, rows, version, prev)
                if len(params) == 1:
                    seqs = [dbapi.execute(_SQLITE_INSERT, tuple(params[0].values())).lastrowid]
                else:
                    # Under the write lock, an INTEGER PRIMARY KEY without deletes is assigned max+1 each time:
                    # a batch's seqs are the consecutive numbers ending at the last one inserted.
                    dbapi.executemany(_SQLITE_INSERT, [tuple(p.values()) for p in params])
                    last = dbapi.execute("SELECT last_insert_rowid()").fetchone()[0]
                    seqs = list(range(last - len(params) + 1, last + 1))
                dbapi.execute("COMMIT")
            except BaseException:
                if dbapi.in_transaction:
                    dbapi.execute("ROLLBACK")
                raise
        except sqlite3.IntegrityError as e:
            self._forget(stream)
            raise VersionConflict(stream, expected_version) from e
        except sqlite3.Error as e:
            self._forget(stream)
            raise StoreError(f"cannot append to the ledger at {self.describe()}: {e}") from e
        except BaseException:
            self._forget(stream)
            raise
        return self._appended(stream, params, seqs)

    def _thread_dbapi(self) -> sqlite3.Connection:
        """This thread's pooled SQLite connection, kept checked out for appends."""
        held = getattr(self._tls, "conn", None)
        if held is None or held[0] != _pid or held[1].closed:
            conn = self.engine.connect()
            # The driver connection is kept beside its SQLAlchemy Connection: one lookup per append, not four.
            held = (_pid, conn, conn.connection.driver_connection)
            self._tls.conn = held
            self._held.append(conn)
        return held[2]  # type: ignore[no-any-return]

    def _append_rows_pg(
        self, stream: str, rows: list[tuple[str, str, bytes]], expected_version: int | None
    ) -> list[StoredEvent]:
        # The capture hot path on PostgreSQL. psycopg's pipeline mode sends BEGIN, the advisory lock, the INSERT
        # and COMMIT in one round trip when this process knows the stream's head (two when it must read it under
        # the lock); the Core path waits for each of those statements in turn.
        import psycopg

        cached = self._heads.get(stream)
        head = cached if cached is not None and expected_version is not None and cached[0] == expected_version else None
        sent: list[dict[str, Any]] | None = None
        for attempt in (1, 2):
            try:
                pg = self._thread_pg()
            except DBAPIError as e:
                self._forget(stream)
                raise StoreError(f"cannot append to the ledger at {self.describe()}: {_reason(e)}") from e
            try:
                locked = False
                if head is None:
                    with pg.pipeline():
                        pg.execute(_pg_lock_statement(self.durability, "%s", "%s"), self._pg_lock_args())
                        cur = pg.execute(_PG_HEAD, (stream,))
                    row = cur.fetchone()
                    head = (row[0], row[1]) if row else (0, chain.GENESIS)
                    locked = True
                    if sent is not None and head == (sent[-1]["version"], sent[-1]["hash"]):
                        # The attempt that lost its connection did commit: these are its rows.
                        seqs = self._pg_seqs(pg, stream, sent)
                        return self._appended(stream, sent, seqs)
                    if expected_version is not None and head[0] != expected_version:
                        raise VersionConflict(stream, expected_version)
                params = sent = self._chain_rows(stream, rows, *head)
                with pg.pipeline():
                    if not locked:
                        pg.execute(_pg_lock_statement(self.durability, "%s", "%s"), self._pg_lock_args())
                    curs = [
                        pg.execute(_pg_insert_sql(len(chunk)), [v for p in chunk for v in _pg_row(p)])
                        for chunk in (params[i : i + 1000] for i in range(0, len(params), 1000))
                    ]
                    pg.commit()
                seq_of = {version: seq for c in curs for seq, version in c.fetchall()}
                return self._appended(stream, params, [seq_of[p["version"]] for p in params])
            except VersionConflict:
                _pg_rollback(pg)
                self._forget(stream)
                raise
            except psycopg.errors.UniqueViolation as e:
                _pg_rollback(pg)
                self._forget(stream)
                raise VersionConflict(stream, expected_version) from e
            except psycopg.Error as e:
                lost = pg.broken or pg.closed
                _pg_rollback(pg)
                if lost:
                    self._pg_drop()
                    if attempt == 1:
                        # The server closed the connection (restart, idle timeout, terminated backend): once more
                        # on a new one; whether the lost attempt committed is read from the head, under the lock.
                        head = None
                        continue
                self._forget(stream)
                raise StoreError(f"cannot append to the ledger at {self.describe()}: {' '.join(str(e).split())}") from e
            except BaseException:
                _pg_rollback(pg)
                self._forget(stream)
                raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _pg_lock_args(self) -> tuple[int, str]:
        return (_PG_APPEND_LOCK, str(int(self.busy_timeout_ms)))

    def _pg_seqs(self, pg: Any, stream: str, params: list[dict[str, Any]]) -> list[int]:
        rows = pg.execute(
            "SELECT version, seq FROM events WHERE stream = %s AND version BETWEEN %s AND %s",
            (stream, params[0]["version"], params[-1]["version"]),
        ).fetchall()
        pg.rollback()
        seq_of = dict(rows)
        return [seq_of[p["version"]] for p in params]

    def _thread_pg(self) -> Any:
        """This thread's psycopg connection, kept checked out of the pool for appends."""
        held = getattr(self._tls, "pg", None)
        if held is None or held[0] != os.getpid() or held[1].closed or held[1].invalidated:
            held = (os.getpid(), self.engine.connect())
            self._tls.pg = held
            self._pg_held.append(held)
        return held[1].connection.driver_connection

    def _pg_drop(self) -> None:
        held = getattr(self._tls, "pg", None)
        self._tls.pg = None
        if held is not None and held[0] == os.getpid():
            with contextlib.suppress(Exception):
                held[1].invalidate()
            with contextlib.suppress(Exception):
                held[1].close()
            with contextlib.suppress(ValueError):
                self._pg_held.remove(held)

    def insert_stored(self, stream: str, rows: Sequence[StoredEvent]) -> int:
        """Insert events of one stream copied from another ledger, with their own versions and hashes.

        See :meth:`insert_copied`; every row must belong to ``stream``. Returns the number inserted.
        """
        if any(r.stream != stream for r in rows):
            raise StoreError(f"insert_stored({stream!r}) was given rows of another stream")
        return self.insert_copied(rows)

    def insert_copied(self, rows: Sequence[StoredEvent]) -> int:
        """Insert events copied from another ledger (``ledger copy``), keeping their versions and hashes.

        Rows may belong to several streams, each in version order; they get new ``seq`` values here, in the
        order given. Each stream must continue exactly: its next row is the destination's next version and
        links to the destination's head hash, and every row's hash is recomputed. A row the destination already
        holds (same stream, version and hash) is skipped, so a copy can be re-run, or run twice at once.
        Raises :class:`HistoryConflict` if the destination holds a different event at a version, and
        :class:`StoreError` if a stream would not continue; then nothing is written. Returns the number inserted.
        """
        if not rows:
            return 0
        lowest: dict[str, int] = {}
        for r in rows:
            lowest[r.stream] = min(lowest.get(r.stream, r.version), r.version)
        try:
            with self._write() as conn:
                heads = {s: self._head(conn, s) for s in lowest}
                held: dict[tuple[str, int], str] = {}
                for s, lo in lowest.items():
                    if lo <= heads[s][0]:
                        q = select(events.c.version, events.c.hash).where(
                            events.c.stream == s, events.c.version >= lo, events.c.version <= heads[s][0]
                        )
                        held.update({(s, v): h for v, h in conn.execute(q)})
                params = []
                for r in rows:
                    version, prev = heads[r.stream]
                    if r.version <= version:
                        if held.get((r.stream, r.version)) != r.hash:
                            raise HistoryConflict(
                                f"stream {r.stream!r}: the destination holds a different event at version {r.version}"
                            )
                        continue
                    if r.version != version + 1 or r.prev_hash != prev:
                        raise StoreError(
                            f"stream {r.stream!r}: event version {r.version} does not continue the destination "
                            f"(head version {version})"
                        )
                    if chain.event_hash(r.prev_hash, r.stream, r.version, r.type, r.body) != r.hash:
                        raise StoreError(f"stream {r.stream!r}: event version {r.version} fails its hash")
                    params.append(
                        {
                            "stream": r.stream,
                            "version": r.version,
                            "type": r.type,
                            "ts": r.ts,
                            "body": r.body,
                            "prev_hash": r.prev_hash,
                            "hash": r.hash,
                        }
                    )
                    heads[r.stream] = (r.version, r.hash)
                if params:
                    conn.execute(events.insert(), params)
        except IntegrityError as e:
            # Every writer reads the head under the write lock, so this is a row the schema refuses (CHECK).
            raise StoreError(f"cannot copy into the ledger at {self.describe()}: {_reason(e)}") from e
        except DBAPIError as e:
            raise StoreError(f"cannot write to the ledger at {self.describe()}: {_reason(e)}") from e
        finally:
            for s in lowest:
                self._forget(s)
        return len(params)

    def event_at(self, stream: str, version: int) -> StoredEvent | None:
        """The event of ``stream`` at ``version``, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(*_COLS).where(events.c.stream == stream, events.c.version == version)).first()
        return _row(row) if row else None

    def _forget(self, stream: str) -> None:
        with self._heads_lock:
            self._heads.pop(stream, None)

    def _head(self, conn: Any, stream: str) -> tuple[int, str]:
        row = conn.execute(
            select(events.c.version, events.c.hash)
            .where(events.c.stream == stream)
            .order_by(events.c.version.desc())
            .limit(1)
        ).first()
        return (row[0], row[1]) if row else (0, chain.GENESIS)

    def _write(self) -> Any:
        return _WriteTxn(self)

    # -- snapshots (a cache: never the truth) ------------------------------------------------------------------

    def get_snapshot(self, stream: str, kind: str) -> tuple[int, int, bytes] | None:
        """A cached projection of ``stream``: (version, seq, body), or None (also when the cache is unreadable)."""
        try:
            with self.engine.connect() as conn:
                row = conn.execute(
                    select(snapshots.c.version, snapshots.c.seq, snapshots.c.body).where(
                        snapshots.c.stream == stream, snapshots.c.kind == kind
                    )
                ).first()
        except OperationalError:
            return None
        return (row[0], row[1], bytes(row[2])) if row else None

    def put_snapshot(self, stream: str, kind: str, version: int, seq: int, body: bytes) -> None:
        """Store (or replace) the cached projection of ``stream``; failures are ignored, it is only a cache."""
        try:
            with self.engine.begin() as conn:
                conn.execute(snapshots.delete().where(snapshots.c.stream == stream))
                conn.execute(snapshots.insert().values(stream=stream, kind=kind, version=version, seq=seq, body=body))
        except DBAPIError:
            # Includes two PostgreSQL writers racing on the same row (a unique violation): either cache is fine.
            pass

    def drop_snapshots(self) -> None:
        """Delete every cached projection."""
        with self.engine.begin() as conn:
            conn.execute(snapshots.delete())

    # -- reading ------------------------------------------------------------------------------------------

    def read_stream(self, stream: str, *, after_version: int = 0, until_seq: int | None = None) -> list[StoredEvent]:
        """Every event of ``stream`` in version order (optionally after a version, up to a global seq)."""
        q = select(*_COLS).where(events.c.stream == stream, events.c.version > after_version)
        if until_seq is not None:
            q = q.where(events.c.seq <= until_seq)
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(q.order_by(events.c.version))]

    def read_bodies(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None
    ) -> tuple[list[bytes], int, int]:
        """Only the bodies of ``stream`` in version order, with the last version and seq read (fast path)."""
        if self.dialect == "sqlite":
            # Replaying a million-event card: the driver cursor returns rows ~5x faster than Core result rows, and
            # one-column rows iterated straight into a list cost about half of fetching (body, version, seq).
            where = "WHERE stream = ? AND version > ?"
            args: tuple[Any, ...] = (stream, after_version)
            if until_seq is not None:
                where += " AND seq <= ?"
                args += (until_seq,)
            dbapi = self._thread_dbapi()
            dbapi.execute("BEGIN")  # one snapshot for both statements, so the last version matches the bodies
            try:
                bodies = [r[0] for r in dbapi.execute(f"SELECT body FROM events {where} ORDER BY version", args)]
                last = dbapi.execute(f"SELECT version, seq FROM events {where} ORDER BY version DESC LIMIT 1", args)
                row = last.fetchone()
            finally:
                dbapi.execute("COMMIT")
            if not bodies or row is None:
                return [], after_version, 0
            return bodies, row[0], row[1]
        q = select(events.c.body, events.c.version, events.c.seq).where(
            events.c.stream == stream, events.c.version > after_version
        )
        if until_seq is not None:
            q = q.where(events.c.seq <= until_seq)
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(events.c.version)).all()
        if not rows:
            return [], after_version, 0
        return [bytes(r[0]) for r in rows], rows[-1][1], rows[-1][2]

    def snapshots_for(self, streams: Sequence[str], kind: str) -> dict[str, tuple[int, int, bytes]]:
        """Cached projections of many streams at once: stream -> (version, seq, body)."""
        out: dict[str, tuple[int, int, bytes]] = {}
        try:
            with self.engine.connect() as conn:
                for i in range(0, len(streams), 500):
                    chunk = list(streams[i : i + 500])
                    rows = conn.execute(
                        select(snapshots.c.stream, snapshots.c.version, snapshots.c.seq, snapshots.c.body).where(
                            snapshots.c.stream.in_(chunk), snapshots.c.kind == kind
                        )
                    )
                    for r in rows:
                        out[r[0]] = (r[1], r[2], bytes(r[3]))
        except OperationalError:
            return {}
        return out

    def stream_exists(self, stream: str) -> bool:
        """True if the stream has at least one event."""
        with self.engine.connect() as conn:
            return conn.execute(select(events.c.seq).where(events.c.stream == stream).limit(1)).first() is not None

    def streams(self, prefix: str | None = None) -> list[StreamInfo]:
        """Every stream (optionally those whose name starts with ``prefix``), in order of first event."""
        q = select(
            events.c.stream,
            func.count(),
            func.max(events.c.version),
            func.min(events.c.seq),
            func.max(events.c.seq),
            func.min(events.c.ts),
            func.max(events.c.ts),
        ).group_by(events.c.stream)
        if prefix is not None:
            q = q.where(events.c.stream.startswith(prefix, autoescape=True))
        agg = q.subquery()
        # The head hash in the same query (a join on UNIQUE(stream, version)): one round trip, not one per stream.
        heads = (
            select(agg.c[0], agg.c[1], agg.c[2], events.c.hash, agg.c[3], agg.c[4], agg.c[5], agg.c[6])
            .join_from(agg, events, (events.c.stream == agg.c[0]) & (events.c.version == agg.c[2]))
            .order_by(agg.c[3])
        )
        with self.engine.connect() as conn:
            return [StreamInfo(*r) for r in conn.execute(heads)]

    def scan(self, *, after_seq: int = 0, batch: int = 10_000, prefix: str | None = None) -> Iterator[StoredEvent]:
        """Every event in global ``seq`` order, read in batches (for verify, copy and tailing)."""
        last = after_seq
        while True:
            q = select(*_COLS).where(events.c.seq > last)
            if prefix is not None:
                q = q.where(events.c.stream.startswith(prefix, autoescape=True))
            with self.engine.connect() as conn:
                rows = [_row(r) for r in conn.execute(q.order_by(events.c.seq).limit(batch))]
            if not rows:
                return
            yield from rows
            last = rows[-1].seq

    def max_seq(self) -> int:
        """The highest ``seq`` in the log (0 when empty)."""
        with self.engine.connect() as conn:
            return conn.execute(select(func.coalesce(func.max(events.c.seq), 0))).scalar_one()

    def count(self) -> int:
        """Number of events in the log."""
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(events)).scalar_one()

    def same_database(self, other: Store) -> bool:
        """True if ``other`` is a connection to this very database (same file, or same server and name)."""
        a, b = self.engine.url, other.engine.url
        if self.dialect != other.dialect:
            return False
        if self.dialect == "sqlite":
            if a.database in (None, "", ":memory:") or b.database in (None, "", ":memory:"):
                return False
            try:
                return os.path.samefile(a.database, b.database)  # type: ignore[arg-type]
            except OSError:
                return False
        return (a.host or "localhost", a.port or 5432, a.database) == (
            b.host or "localhost",
            b.port or 5432,
            b.database,
        )

    def describe(self) -> str:
        """The database, for messages (no password)."""
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        """Release every connection."""
        for conn in self._held:
            with contextlib.suppress(Exception):
                conn.close()
        self._held.clear()
        for pid, pg in self._pg_held:
            if pid == os.getpid():
                with contextlib.suppress(Exception):
                    pg.close()
        self._pg_held.clear()
        self.engine.dispose()


class _WriteTxn:
    """A write transaction: BEGIN IMMEDIATE on SQLite (take the write lock before reading the head, so the
    busy timeout applies instead of an instant SQLITE_BUSY), an advisory lock on PostgreSQL (so seq is
    assigned in commit order and a reader tailing by seq never skips a late commit)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> Any:
        self.conn = self.store.engine.execution_options(ledger_immediate=True).connect()
        self.txn = self.conn.begin()
        if self.store.dialect == "postgresql":
            for attempt in (1, 2):
                try:
                    self.conn.execute(_pg_lock_sql(self.store.durability), {"k": _PG_APPEND_LOCK, "t": self._timeout()})
                    break
                except BaseException as e:
                    self.txn.rollback()
                    self.conn.close()
                    # A pooled connection the server closed (restart, idle timeout, terminated backend) fails on
                    # this first statement, before anything is written: retrying once on a new one is safe.
                    if attempt == 2 or not (isinstance(e, DBAPIError) and e.connection_invalidated):
                        raise
                    self.conn = self.store.engine.execution_options(ledger_immediate=True).connect()
                    self.txn = self.conn.begin()
        return self.conn

    def _timeout(self) -> str:
        return str(int(self.store.busy_timeout_ms))

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                self.txn.commit()
            else:
                self.txn.rollback()
        finally:
            self.conn.close()


def _pg_lock_statement(durability: Durability, key: str, timeout: str) -> str:
    # One statement: the FROM subquery runs first, so the busy timeout (as lock_timeout, like SQLite's
    # busy_timeout) applies to the wait for the lock; 'full' insists on a synchronous commit whatever the
    # server's default. set_config(..., true) lasts until the end of this transaction only.
    settings = f"set_config('lock_timeout', {timeout}, true)"
    if durability == "full":
        settings += ", set_config('synchronous_commit', 'on', true)"
    return f"SELECT pg_advisory_xact_lock({key}) FROM (SELECT {settings}) AS _settings"


def _pg_lock_sql(durability: Durability) -> Any:
    return text(_pg_lock_statement(durability, ":k", ":t"))


_PG_HEAD = "SELECT version, hash FROM events WHERE stream = %s ORDER BY version DESC LIMIT 1"


@functools.cache
def _pg_insert_sql(n: int) -> str:
    rows = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * n)
    return f"INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) VALUES {rows} RETURNING seq, version"


def _pg_row(p: dict[str, Any]) -> tuple[Any, ...]:
    return (p["stream"], p["version"], p["type"], p["ts"], p["body"], p["prev_hash"], p["hash"])


def _pg_rollback(pg: Any) -> None:
    """Roll back what a failed append left open, if the connection still works."""
    if not (pg.broken or pg.closed):
        with contextlib.suppress(Exception):
            pg.rollback()


def _reason(e: DBAPIError) -> str:
    # One line: psycopg's messages run over several ("...Connection refused\n\tIs the server running...").
    return " ".join((str(e.orig) if e.orig is not None else str(e)).split())


def _make_engine(url: str, durability: Durability, busy_timeout_ms: int) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            parent = Path(path).parent
            if not parent.is_dir():
                raise StoreError(f"cannot open the ledger {path}: folder {parent} does not exist")
        engine = create_engine(url, pool_size=8, max_overflow=32)
        # A pooled SQLite handle must never be used by a forked child: give the child a fresh pool.
        os.register_at_fork(after_in_child=lambda: engine.dispose(close=False))
        sync = "FULL" if durability == "full" else "NORMAL"

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Let SQLAlchemy's begin event (below) issue BEGIN itself, so writes can ask for IMMEDIATE.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={sync}")
            # Without this, INSERT OR REPLACE deletes the old row without firing the BEFORE DELETE trigger.
            cur.execute("PRAGMA recursive_triggers=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Any) -> None:
            immediate = conn.get_execution_options().get("ledger_immediate", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    if url.startswith("postgres"):
        return _make_pg_engine(url)
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError as e:
        raise StoreError(f"cannot open the ledger {url!r}: not a file path or a database URL") from e
    raise StoreError(f"unsupported database {backend!r}: use a SQLite path or postgresql+psycopg://user@host/db")


def _make_pg_engine(url: str) -> Engine:
    try:
        u = make_url(url)
    except ArgumentError as e:
        raise StoreError(f"cannot open the ledger {url!r}: not a database URL") from e
    if u.drivername in ("postgres", "postgresql"):
        # psycopg 3 is the driver the 'postgres' extra installs; SQLAlchemy's default would be psycopg2.
        u = u.set(drivername="postgresql+psycopg")
    try:
        # pre_ping: a pooled connection the server closed (restart, idle timeout) is replaced before use. It costs
        # a round trip per checkout, but appends do not check out: they keep one connection per thread.
        engine = create_engine(u, pool_size=8, max_overflow=32, pool_pre_ping=True)
    except ModuleNotFoundError as e:
        raise StoreError(
            f"cannot open {u.render_as_string(hide_password=True)}: its driver {e.name} is not installed; the "
            "ledger uses psycopg 3: postgresql+psycopg://... (pip install 'arc-scorecard-ledger[postgres]')"
        ) from e
    ref = weakref.ref(engine)

    def _after_fork() -> None:
        # A forked child must not talk over its parent's sockets: it gets a fresh pool.
        e = ref()
        if e is not None:
            e.dispose(close=False)

    os.register_at_fork(after_in_child=_after_fork)
    return engine
