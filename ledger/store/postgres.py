"""The PostgreSQL backend, on psycopg 3 with plain SQL; appends through the driver's pipeline mode.

As on SQLite, SQLAlchemy and Alembic are loaded only to create or upgrade the schema or for
:attr:`PostgresStore.engine` (the Merkle tree's tools, tests): a read command must not pay for them.

Every insert into ``events`` (the append, the import, the copy: ``lock_statement``) takes a transaction-level
advisory lock before its ``seq`` is drawn and keeps it to its commit, so events commit in ``seq`` order and a
reader tailing by ``seq`` (the summary's catch-up, summary.py) never skips a late commit. The catch-up itself does
not take that lock (appends never wait for it): catch-ups are serialized by the position row (``FOR UPDATE``).

``ledger copy`` writes a batch in one transaction through binary COPY, encoded beforehand (``prepare_copied``) in
the copy's reading thread; rows are checked to continue each stream (:func:`~ledger.store.base.copied_rows`) first.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import select
from collections.abc import Callable, Iterable, Sequence
from itertools import batched
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote

import msgspec
import psycopg
from psycopg.copy import QueuedLibpqWriter

from ledger.domain import chain
from ledger.domain.events import Event
from ledger.errors import InputError, StoreError, VersionConflict
from ledger.store.base import (
    APPEND_CHUNK,
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
    hide_password,
    lowest_versions,
    no_ledger,
    pg_sql,
    stream_query,
)
from ledger.store.connections import READERS, ReadPool, Writer

# Any constant works; it only has to be the same for every writer of one PostgreSQL database.
PG_APPEND_LOCK = 0x4C454447  # "LEDG"

HEAD_SQL = "SELECT version, hash FROM events WHERE stream = %s ORDER BY version DESC LIMIT 1"


def stored_event(r: Any) -> StoredEvent:
    return StoredEvent(r[0], r[1], r[2], r[3], r[4], bytes(r[5]), r[6], r[7])


def reason(e: Exception) -> str:
    # One line: psycopg's messages run over several ("...Connection refused\n\tIs the server running...").
    return " ".join(str(e).split())


def lock_statement(durability: Durability) -> str:
    """Take the append lock (parameters: its key, the busy timeout), waiting at most the busy timeout (as
    lock_timeout, like SQLite's busy_timeout)."""
    # One statement: the FROM subquery runs first, so the timeout applies to the wait for the lock; 'full'
    # insists on a synchronous commit whatever the server's default. set_config(..., true) lasts until the end
    # of this transaction only.
    settings = "set_config('lock_timeout', %s, true)"
    if durability == "full":
        settings += ", set_config('synchronous_commit', 'on', true)"
    return f"SELECT pg_advisory_xact_lock(%s) FROM (SELECT {settings}) AS _settings"


@functools.cache
def insert_sql(n: int) -> str:
    rows = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * n)
    return f"INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) VALUES {rows} RETURNING seq, version"


#: Rows one INSERT sends. An append of more than PIPELINED rows sends its INSERTs one after another, each answer
#: read before the next, instead of in one pipeline: a pipeline holds every INSERT's parameters until the server
#: answers (an imported 100,000-line recording's card would be held twice more).
INSERT_ROWS = 1000
PIPELINED = 5000


def insert_rows(
    pg: Any, new: Sequence[StoredEvent], lock: tuple[str, Any] | None, *, commit: bool = True
) -> dict[int, int]:
    """Insert ``new`` in the writer's transaction, taking the append lock first (``lock``: its statement and
    arguments; None when held), and commit unless told not to. version -> seq."""
    chunks = [new[i : i + INSERT_ROWS] for i in range(0, len(new), INSERT_ROWS)]
    if len(new) <= PIPELINED and commit:
        with pg.pipeline():
            if lock is not None:
                pg.execute(*lock)
            curs = [pg.execute(insert_sql(len(c)), [v for e in c for v in row_values(e)]) for c in chunks]
            pg.commit()
        return {version: seq for c in curs for seq, version in c.fetchall()}
    if lock is not None:
        pg.execute(*lock)
    seq_of: dict[int, int] = {}
    for c in chunks:
        cur = pg.execute(insert_sql(len(c)), [v for e in c for v in row_values(e)])
        seq_of.update((version, seq) for seq, version in cur.fetchall())
    if commit:
        pg.commit()
    return seq_of


def insert_chunked(
    pg: Any, stream: str, events: Iterable[Event], head: tuple[int, str], lock: tuple[str, Any] | None
) -> StoredEvent:
    """Encode, chain and insert ``events`` after ``head``, :data:`APPEND_CHUNK` at a time, in the writer's
    transaction (``lock`` as for :func:`insert_rows`), and commit: a card's rows are never all held at once (an
    imported card of tens of thousands of events). The last one as stored."""
    if lock is not None:
        pg.execute(*lock)
    for chunk in batched(events, APPEND_CHUNK):
        new = chain_rows(stream, encode_events(chunk), *head)
        seq_of = insert_rows(pg, new, None, commit=False)
        head = (new[-1].version, new[-1].hash)
    pg.commit()
    return msgspec.structs.replace(new[-1], seq=seq_of[new[-1].version])


def row_values(e: StoredEvent) -> tuple[Any, ...]:
    return (e.stream, e.version, e.type, e.ts, e.body, e.prev_hash, e.hash)


def rollback_quietly(pg: Any) -> None:
    """Roll back what a failed append left open, if the connection still works."""
    if not (pg.broken or pg.closed):
        with contextlib.suppress(Exception):
            pg.rollback()


#: Connections a store may hold: the writer and the readers (see connections.py), whatever the threads.
POOL_SIZE = 1 + READERS


# -- the URL --------------------------------------------------------------------------------------------------

# SQLAlchemy's URL syntax (a ledger's URL is the one SQLAlchemy and Alembic are given for a migration).
_URL = re.compile(
    r"""
        (?P<name>[\w\+]+)://
        (?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?
        (?:(?:\[(?P<ipv6host>[^/\?]+)\]|(?P<ipv4host>[^/:\?]+))?(?::(?P<port>[^/\?]*))?)?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?
    """,
    re.X,
)


class PgUrl(msgspec.Struct, frozen=True):
    """A ``postgresql+psycopg://`` URL taken apart (user, password and database unquoted)."""

    drivername: str
    username: str | None
    password: str | None
    host: str | None
    port: int | None
    database: str | None
    query: tuple[tuple[str, str], ...]

    def render(self) -> str:
        """The URL again, as SQLAlchemy writes it, the password as ``***``."""
        s = self.drivername + "://"
        if self.username is not None:
            s += quote(self.username, safe=" +")
            if self.password is not None:
                s += ":***"
            s += "@"
        if self.host is not None:
            s += f"[{self.host}]" if ":" in self.host else self.host
        if self.port is not None:
            s += f":{self.port}"
        if self.database is not None:
            s += "/" + quote(self.database, safe=" +/")
        if self.query:
            s += "?" + "&".join(f"{quote_plus(k)}={quote_plus(v)}" for k, v in sorted(self.query))
        return s

    def place(self) -> tuple[str, int, str | None]:
        """The server and the database (libpq's defaults filled in)."""
        return (self.host or "localhost", self.port or 5432, self.database)

    def connect_args(self, *, readonly: bool) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect`` (the URL's query parameters are libpq's)."""
        args: dict[str, Any] = {}
        for k, v in self.query:
            args[k] = f"{args[k]},{v}" if k in args else v  # a repeated key: libpq's list (host=a,b)
        given: tuple[tuple[str, str | int | None], ...] = (
            ("host", self.host),
            ("port", self.port),
            ("user", self.username),
            ("password", self.password),
            ("dbname", self.database),
        )
        args.update({k: v for k, v in given if v is not None})
        if readonly:
            # Every transaction of the session, single statements included, is READ ONLY.
            args["options"] = " ".join(filter(None, (args.get("options"), "-c default_transaction_read_only=on")))
        return args


def parse_url(url: str) -> PgUrl:
    """``url`` taken apart (psycopg 3 whatever the URL's driver says); refuses a URL that names no ledger."""
    m = _URL.match(url)
    if m is None:
        raise InputError(f"{hide_password(url)} is not a valid database URL (it does not parse as one)")
    g = m.groupdict()
    try:
        port = int(g["port"]) if g["port"] else None
    except ValueError as e:
        raise InputError(f"{hide_password(url)} is not a valid database URL ({e})") from e
    name, _, driver = g["name"].partition("+")
    text = {k: unquote(g[k]) if g[k] is not None else None for k in ("username", "password", "database")}
    u = PgUrl(
        # psycopg 3 is the driver the 'postgres' extra installs; a bare 'postgresql://' means it too.
        "postgresql+psycopg" if name in ("postgres", "postgresql") and driver in ("", "psycopg") else g["name"],
        text["username"],
        text["password"],
        g["ipv4host"] or g["ipv6host"],
        port,
        text["database"],
        tuple(parse_qsl(g["query"] or "")),
    )
    shown = u.render()
    if not u.database:
        raise InputError(f"{shown} names no database: give one, e.g. postgresql+psycopg://user@host/ledger")
    if u.drivername != "postgresql+psycopg":
        raise StoreError(
            f"cannot open {shown}: its driver {driver or name} is not the ledger's; the ledger uses psycopg 3: "
            "postgresql+psycopg://... (pip install 'arc-scorecard-ledger[postgres]')"
        )
    return u


# -- connections ----------------------------------------------------------------------------------------------


def connector(url: PgUrl, *, readonly: bool) -> Callable[[bool], psycopg.Connection[Any]]:
    """Opens a psycopg connection to ``url`` (``autocommit`` as asked); raises psycopg's errors."""
    # psycopg logs a warning of its own when a connection dies mid-pipeline; the ledger raises a one-line StoreError
    # for the same fault. Without any handler Python prints such warnings on stderr (its last resort): a NullHandler
    # keeps the CLI's output to that one line, and logging an application configures still receives them.
    psycopg_log = logging.getLogger("psycopg")
    if not psycopg_log.handlers:
        psycopg_log.addHandler(logging.NullHandler())
    args = url.connect_args(readonly=readonly)

    def connect(autocommit: bool) -> psycopg.Connection[Any]:
        return psycopg.connect(autocommit=autocommit, **args)

    return connect


def idle_usable(conn: psycopg.Connection[Any]) -> bool:
    """Whether a pooled connection that sat idle can be used: not closed, and nothing waiting on its socket (an
    idle session receives nothing, so data there is the server's goodbye: a restart, a terminated backend)."""
    if conn.closed or conn.broken:
        return False
    try:
        return not select.select([conn.fileno()], [], [], 0)[0]
    except (OSError, ValueError, psycopg.Error):
        return False


def read_rows(pool: Any, q: str, args: Any) -> list[Any]:
    """Rows of one statement on a connection of the reader ``pool``; raises psycopg's errors. A connection the
    server ended while it sat idle can pass the pool's look (:func:`idle_usable`): a statement that finds its
    connection lost is sent once more, on a new one (it is a read, and its own transaction)."""
    for attempt in (1, 2):
        conn = None
        try:
            with pool.connection() as conn:
                return conn.execute(q, args).fetchall()
        except psycopg.OperationalError:
            if attempt == 2 or conn is None or not (conn.broken or conn.closed):
                raise
    raise AssertionError("unreachable")


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


def copy_batch(conn: Any, batch: CopyBatch, lock: tuple[str, tuple[Any, ...]]) -> int:
    """Insert the copied rows of ``batch`` on psycopg connection ``conn`` in one transaction (not committed here;
    the caller rolls back on any error); returns how many were new. Raises what :func:`copied_rows` raises. The
    cards summary is not folded here: it catches up on the next read, in bulk."""
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


class PostgresStore(StoreBase):
    """A ledger in one PostgreSQL database."""

    dialect = "postgresql"
    _mark = "%s"
    # The tables the lists read: a ledger filled by COPY has no statistics until autovacuum gets to it, and the
    # planner then reads every card of a tag for a page of them.
    _analyze = "ANALYZE events, card_summary, card_summary_keys"

    def __init__(
        self, url: str, *, durability: Durability = "normal", busy_timeout_ms: int = 60_000, readonly: bool = False
    ) -> None:
        super().__init__(url, durability, busy_timeout_ms, readonly)
        self._url = parse_url(url)
        self._open = connector(self._url, readonly=readonly)
        self._follower = Follower(functools.partial(self.catch_up_summary, wait=False), "ledger-summary-follower")
        timeout = busy_timeout_ms / 1000
        # Appends hold the one writer; reads check a connection out of the bounded pool per call (connections.py).
        self._writer: Writer[psycopg.Connection[Any]] = Writer(
            self._connect,
            psycopg.Connection.close,
            timeout=timeout,
            where=self.describe,
            usable=lambda conn: not (conn.closed or conn.broken),
        )
        # Readers run in autocommit mode: a lone statement is its own transaction (no BEGIN and ROLLBACK round
        # trips); a read that needs one snapshot opens a transaction of its own.
        self._readers: ReadPool[psycopg.Connection[Any]] = ReadPool(
            lambda: self._open(True), psycopg.Connection.close, usable=idle_usable, timeout=timeout, where=self.describe
        )
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
            from sqlalchemy import create_engine
            from sqlalchemy.pool import NullPool

            self._engine = create_engine("postgresql+psycopg://", creator=self._connect, poolclass=NullPool)
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
        except (DBAPIError, psycopg.Error) as e:
            raise StoreError(
                f"cannot prepare the ledger at {self.describe()}: {reason(getattr(e, 'orig', None) or e)}"
            ) from e

    def revision(self) -> str | None:
        try:
            with self._readers.connection() as conn:
                if conn.execute("SELECT to_regclass('alembic_version')").fetchone() == (None,):
                    return None
                row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except psycopg.Error as e:
            raise StoreError(f"cannot read the ledger at {self.describe()}: {reason(e)}") from e
        return row[0] if row else None

    def triggers(self) -> set[str]:
        # A disabled trigger ('D'), or one firing only for replication ('R'), does not protect the log.
        q = (
            "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass('events') "
            "AND NOT tgisinternal AND tgenabled IN ('O', 'A')"
        )
        return {r[0] for r in self._read(q)}

    def _write_transaction(self, work: Any, what: str, *, retry: bool = False) -> Any:
        """See :meth:`StoreBase._write_transaction`; ``retry``: once more on a new connection when the server closed
        this one (``work`` must find out itself whether the lost attempt committed)."""
        with self._writer.locked():
            for attempt in (1, 2):
                try:
                    pg = self._write_dbapi()
                except psycopg.Error as e:
                    raise StoreError(f"{what} at {self.describe()}: {reason(e)}") from e
                try:
                    out = work(pg)
                    pg.commit()
                    return out
                except psycopg.Error as e:
                    if self._failed(pg) and retry and attempt == 1:
                        continue
                    raise StoreError(f"{what} at {self.describe()}: {reason(e)}") from e
                except BaseException:
                    rollback_quietly(pg)
                    raise
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

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
            except psycopg.Error as e:
                self._heads.forget(stream)
                raise StoreError(f"cannot append to the ledger at {self.describe()}: {reason(e)}") from e
            try:
                locked = False
                if head is None:
                    with pg.pipeline():
                        pg.execute(*self._lock())
                        cur = pg.execute(HEAD_SQL, (stream,))
                    row = cur.fetchone()
                    head = (row[0], row[1]) if row else (0, chain.GENESIS)
                    locked = True
                    if sent is not None and head == (sent[-1].version, sent[-1].hash):
                        # The attempt that lost its connection did commit: these are its rows.
                        return self._appended(stream, sent, self._seqs(pg, stream, sent))
                    if expected_version is not None and head[0] != expected_version:
                        raise VersionConflict(stream, expected_version)
                lock = None if locked else self._lock()
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
                raise StoreError(f"cannot append to the ledger at {self.describe()}: {reason(e)}") from e
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

    def catch_up_summary(self, *, wait: bool = True) -> int:
        """On a connection of the read pool, not the writer: the appending thread never waits for a catch-up.
        ``wait`` False (the follower thread): nothing if another session is catching up right now."""
        from ledger.store import tracking
        from ledger.store.summary import catch_up

        if self.readonly:
            return 0
        lock = f"SELECT seq FROM {tracking.TABLE} WHERE name = '{tracking.SUMMARY}' FOR UPDATE"
        try:
            with self._readers.connection() as conn:
                # Its own transactions (commit and rollback are the catch-up's), then autocommit again for reads.
                conn.autocommit = False

                def begin() -> None:
                    if not conn.execute(lock + ("" if wait else " SKIP LOCKED")).fetchall():
                        raise _Busy

                try:
                    return catch_up(self, conn, begin, conn.commit, conn.rollback, conn.pipeline)
                except _Busy:
                    return 0
                finally:
                    if not conn.broken:  # (a broken one is dropped by the pool)
                        conn.rollback()
                        conn.autocommit = True
        except psycopg.Error as e:
            raise StoreError(f"cannot update the cards summary of the ledger at {self.describe()}: {reason(e)}") from e

    def rebuild_summary(self) -> int:
        from ledger.store.summary import rebuild

        return rebuild(self)

    def summary_at_head(self) -> SummaryOverlay | None:
        from ledger.store.summary import at_head

        return at_head(self)

    @staticmethod
    def _fetcher(con: Any) -> Callable[[str, Any], list[Any]]:
        return lambda sql, args: con.execute(pg_sql(sql), tuple(args) or None).fetchall()

    @staticmethod
    def _runner(con: Any) -> Callable[[str, Any], object]:
        def run(sql: str, params: Any) -> None:
            if isinstance(params, list):
                with con.cursor() as cur:
                    cur.executemany(pg_sql(sql), params)
            else:
                con.execute(pg_sql(sql), tuple(params) or None)

        return run

    def _snapshot[T](self, work: Callable[[Any], T]) -> T:
        try:
            with self._readers.connection() as conn:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                try:
                    return work(conn)
                finally:
                    if not conn.broken:  # (a broken one is dropped by the pool)
                        conn.execute("ROLLBACK")
        except psycopg.Error as e:
            raise StoreError(f"cannot read the ledger at {self.describe()}: {reason(e)}") from e

    def _hold_appends(self, con: Any) -> None:
        con.execute("SELECT pg_advisory_xact_lock(%s)", (PG_APPEND_LOCK,))

    def _lock(self) -> tuple[str, tuple[int, str]]:
        return lock_statement(self.durability), (PG_APPEND_LOCK, str(int(self.busy_timeout_ms)))

    def _seqs(self, pg: Any, stream: str, new: list[StoredEvent]) -> list[int]:
        rows = pg.execute(
            "SELECT version, seq FROM events WHERE stream = %s AND version BETWEEN %s AND %s",
            (stream, new[0].version, new[-1].version),
        ).fetchall()
        pg.rollback()
        seq_of = dict(rows)
        return [seq_of[e.version] for e in new]

    def prepare_copied(self, rows: Sequence[StoredEvent]) -> CopyBatch:
        """``rows`` checked against their own hashes and encoded for COPY (no I/O: runs beside the writes)."""
        batch = copy_batch_of(rows)
        return CopyBatch(batch.rows, batch.unhashed, encode_rows(batch.rows) if batch.unhashed is None else None)

    def insert_copied(self, rows: Sequence[StoredEvent] | CopyBatch) -> int:
        """See :class:`LogStore`; the rows go in through COPY (:func:`copy_batch`). A dropped connection is tried
        once more on a new one (a batch that did commit is then skipped as held); every writer reads the heads
        under the append lock, so an integrity error is a row the schema refuses."""
        batch = copy_batch_of(rows)
        if not batch.rows:
            return 0
        lock = self._lock()
        try:
            work = functools.partial(copy_batch, batch=batch, lock=lock)
            return int(self._write_transaction(work, "cannot copy into the ledger", retry=True))
        finally:
            for s in {r.stream for r in batch.rows}:
                self._heads.forget(s)

    # -- snapshots (a cache: never the truth) ------------------------------------------------------------------

    def put_snapshot(self, stream: str, kind: str, version: int, seq: int, body: bytes) -> None:
        if self.readonly:
            return
        try:
            with self._readers.connection() as conn, conn.transaction(), conn.pipeline():
                conn.execute("DELETE FROM snapshots WHERE stream = %s", (stream,))
                conn.execute(
                    "INSERT INTO snapshots (stream, kind, version, seq, body) VALUES (%s, %s, %s, %s, %s)",
                    (stream, kind, version, seq, body),
                )
        except (psycopg.Error, StoreError):
            # Includes two writers racing on the same row (a unique violation): either cache is fine.
            pass

    # -- reading ------------------------------------------------------------------------------------------

    def read_bodies(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None
    ) -> tuple[list[bytes], int, int]:
        where, args = stream_query("%s", "", stream, after_version, until_seq, None)
        rows = self._read(f"SELECT body, version, seq FROM events {where} ORDER BY version", args)
        if not rows:
            return [], after_version, 0
        return [bytes(r[0]) for r in rows], rows[-1][1], rows[-1][2]

    def iter_joined(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None, chunk: int = 25_000
    ) -> None:
        """None: this backend has no joined read; the facade reads the bodies with :meth:`read_bodies` (one query)."""
        return None

    def stream_names(self, prefix: str, limit: int) -> list[str]:
        where, args = self._prefix(prefix)
        q = f"SELECT DISTINCT stream FROM events WHERE {where} ORDER BY stream LIMIT %s"
        return [str(r[0]) for r in self._read(q, (*args, limit))]

    def _prefix(self, prefix: str) -> tuple[str, tuple[str, ...]]:
        # LIKE with its wildcards escaped (PostgreSQL's LIKE is case-sensitive).
        return "stream LIKE %s ESCAPE '/'", (prefix.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%",)

    def _events(self, q: str, args: tuple[Any, ...]) -> list[StoredEvent]:
        return [stored_event(r) for r in self._read(q, args)]

    def _read(self, q: str, args: Sequence[Any] | None = None) -> list[Any]:
        try:
            return read_rows(self._readers, q, args or None)
        except psycopg.Error as e:
            raise StoreError(f"cannot read the ledger at {self.describe()}: {reason(e)}") from e

    def same_database(self, other: LogStore) -> bool:
        return isinstance(other, PostgresStore) and self._url.place() == other._url.place()

    def describe(self) -> str:
        return self._url.render()


class _Busy(Exception):
    """Another session holds the position row (a follower does not queue behind it)."""
