"""PostgreSQL plumbing for :mod:`ledger.store.postgres`: the URL, psycopg connections, the append lock's
statement, and the SQLAlchemy engine that only migrations and tools load."""

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

from ledger.domain.events import Event
from ledger.errors import InputError, StoreError
from ledger.store.base import (
    APPEND_CHUNK,
    Durability,
    StoredEvent,
    chain_rows,
    encode_events,
    hide_password,
    stream_query,
)
from ledger.store.connections import READERS

#: The columns of a :class:`StoredEvent`, in its fields' order.
EVENT_COLUMNS = "seq, stream, version, type, ts, body, prev_hash, hash"

# Any constant works; it only has to be the same for every writer of one PostgreSQL database.
PG_APPEND_LOCK = 0x4C454447  # "LEDG"

HEAD_SQL = "SELECT version, hash FROM events WHERE stream = %s ORDER BY version DESC LIMIT 1"
# A prefix compared exactly: LIKE with its wildcards escaped (PostgreSQL's LIKE is case-sensitive).
PREFIX_SQL = "stream LIKE %s ESCAPE '/'"
STREAMS_SQL = (
    "SELECT a.stream, a.n, a.v, e.hash, a.fs, a.ls, a.ft, a.lt FROM ("
    "SELECT stream, count(*) AS n, max(version) AS v, min(seq) AS fs, max(seq) AS ls, min(ts) AS ft, max(ts) AS lt "
    "FROM events {where} GROUP BY stream) AS a JOIN events AS e ON e.stream = a.stream AND e.version = a.v "
    "ORDER BY a.fs"
)

#: What a database call can raise (waiting too long for a connection is a StoreError of its own).
DB_ERRORS = (psycopg.Error,)


def stored_event(r: Any) -> StoredEvent:
    return StoredEvent(r[0], r[1], r[2], r[3], r[4], bytes(r[5]), r[6], r[7])


def reason(e: Exception) -> str:
    # One line: psycopg's messages run over several ("...Connection refused\n\tIs the server running...").
    return " ".join(str(e).split())


def lock_statement(durability: Durability, key: str, timeout: str) -> str:
    """Take the append lock, waiting at most the busy timeout (as lock_timeout, like SQLite's busy_timeout)."""
    # One statement: the FROM subquery runs first, so the timeout applies to the wait for the lock; 'full'
    # insists on a synchronous commit whatever the server's default. set_config(..., true) lasts until the end
    # of this transaction only.
    settings = f"set_config('lock_timeout', {timeout}, true)"
    if durability == "full":
        settings += ", set_config('synchronous_commit', 'on', true)"
    return f"SELECT pg_advisory_xact_lock({key}) FROM (SELECT {settings}) AS _settings"


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


def like_prefix(prefix: str) -> str:
    """The :data:`PREFIX_SQL` pattern of ``prefix``."""
    return prefix.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"


def stream_where(stream: str, after_version: int, until_seq: int | None) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause (and its arguments) of a stream's events after a version, up to a global seq."""
    return stream_query("%s", "", stream, after_version, until_seq, None)


def stream_sql(
    stream: str, after_version: int, until_seq: int | None, page: tuple[int, int] | None
) -> tuple[str, tuple[Any, ...]]:
    """The query (and its arguments) of a stream's events in version order; ``page``: (offset, count) of them."""
    return stream_query("%s", EVENT_COLUMNS, stream, after_version, until_seq, page)


def row_values(e: StoredEvent) -> tuple[Any, ...]:
    return (e.stream, e.version, e.type, e.ts, e.body, e.prev_hash, e.hash)


def drop_connection(conn: Any) -> None:
    """Close a connection for good: it is broken, or the store is closing."""
    conn.close()


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

    def render(self, *, hide_password: bool = True) -> str:
        """The URL again, as SQLAlchemy writes it (the password as ``***`` unless asked for)."""
        s = self.drivername + "://"
        if self.username is not None:
            s += quote(self.username, safe=" +")
            if self.password is not None:
                s += ":" + ("***" if hide_password else quote(self.password, safe=" +"))
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
    """Rows of one statement on a connection of the reader ``pool``; raises psycopg's errors.

    A connection the server ended while it sat idle looks usable until the server's goodbye reaches its socket,
    which can be after the pool's look (:func:`idle_usable`): a statement that finds its connection lost is sent
    once more, on a new one (it is a read, and its own transaction)."""
    for attempt in (1, 2):
        conn = None
        try:
            with pool.connection() as conn:
                return conn.execute(q, args).fetchall()
        except psycopg.OperationalError:
            if attempt == 2 or conn is None or not (conn.broken or conn.closed):
                raise
    raise AssertionError("unreachable")


def make_engine(connect: Callable[[], Any]) -> Any:
    """A SQLAlchemy engine whose connections ``connect`` opens, none pooled (migrations and tools: loads
    SQLAlchemy)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    return create_engine("postgresql+psycopg://", creator=connect, poolclass=NullPool)
