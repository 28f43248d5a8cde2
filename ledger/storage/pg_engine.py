"""PostgreSQL plumbing for :mod:`ledger.storage.postgres`: the tables as SQLAlchemy Core sees them, the engine,
the append lock's statement."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import weakref
from typing import Any

from sqlalchemy import BigInteger, Column, Engine, Integer, LargeBinary, MetaData, String, Table, create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from ledger.errors import InputError, StoreError
from ledger.storage.base import Durability, StoredEvent, hide_password
from ledger.storage.connections import READERS

metadata = MetaData()

#: Mirrors ``migrations/versions``; the migrations, not this object, create and change the schema.
events = Table(
    "events",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=True),
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
    Column("seq", BigInteger, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("body", LargeBinary, nullable=False),
)

EVENT_COLUMNS = tuple(events.c)

# Any constant works; it only has to be the same for every writer of one PostgreSQL database.
PG_APPEND_LOCK = 0x4C454447  # "LEDG"

HEAD_SQL = "SELECT version, hash FROM events WHERE stream = %s ORDER BY version DESC LIMIT 1"


#: What a database call can raise: the driver's errors, and the pool's when every connection stayed busy too long.
DB_ERRORS = (DBAPIError, PoolTimeout)


def stored_event(r: Any) -> StoredEvent:
    return StoredEvent(r[0], r[1], r[2], r[3], r[4], bytes(r[5]), r[6], r[7])


def reason(e: Exception) -> str:
    # One line: psycopg's messages run over several ("...Connection refused\n\tIs the server running...").
    if isinstance(e, PoolTimeout):
        return f"all {POOL_SIZE} connections of this process stayed busy past the busy timeout"
    orig = getattr(e, "orig", None)
    return " ".join((str(orig) if orig is not None else str(e)).split())


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


def row_values(e: StoredEvent) -> tuple[Any, ...]:
    return (e.stream, e.version, e.type, e.ts, e.body, e.prev_hash, e.hash)


def drop_connection(conn: Any) -> None:
    """Close a connection for good (not back into the pool): it is broken, or the store is closing."""
    with contextlib.suppress(Exception):
        conn.invalidate()
    conn.close()


def rollback_quietly(pg: Any) -> None:
    """Roll back what a failed append left open, if the connection still works."""
    if not (pg.broken or pg.closed):
        with contextlib.suppress(Exception):
            pg.rollback()


#: Connections a store's engine may hold: the writer and the readers (see connections.py), whatever the threads.
POOL_SIZE = 1 + READERS


def make_engine(url: str, *, readonly: bool, timeout: float = 60.0) -> Engine:
    """A pooled engine for ``url`` (psycopg 3 whatever the URL's driver says); refuses URLs that name no ledger.

    At most :data:`POOL_SIZE` connections; a caller finding them all in use waits up to ``timeout`` seconds.
    """
    # psycopg logs a warning of its own when a connection dies mid-pipeline; the ledger raises a one-line StoreError
    # for the same fault. Without any handler Python prints such warnings on stderr (its last resort): a NullHandler
    # keeps the CLI's output to that one line, and logging an application configures still receives them.
    psycopg_log = logging.getLogger("psycopg")
    if not psycopg_log.handlers:
        psycopg_log.addHandler(logging.NullHandler())
    try:
        u = make_url(url)
        u.port  # noqa: B018 - a port that is not a number only fails when read
    except (ArgumentError, ValueError) as e:
        raise InputError(f"{hide_password(url)} is not a valid database URL ({e})") from e
    shown = u.render_as_string(hide_password=True)
    if not u.database:
        raise InputError(f"{shown} names no database: give one, e.g. postgresql+psycopg://user@host/ledger")
    if u.drivername in ("postgres", "postgresql"):
        # psycopg 3 is the driver the 'postgres' extra installs; SQLAlchemy's default would be psycopg2.
        u = u.set(drivername="postgresql+psycopg")
    connect_args = {"options": "-c default_transaction_read_only=on"} if readonly else {}
    try:
        # pre_ping: a pooled connection the server closed (restart, idle timeout) is replaced before use. It costs
        # a round trip per checkout, but appends do not check out: they keep the one writer connection.
        engine = create_engine(
            u,
            pool_size=POOL_SIZE,
            max_overflow=0,
            pool_timeout=timeout,
            pool_pre_ping=True,
            connect_args=connect_args,
        )
    except ModuleNotFoundError as e:
        raise StoreError(
            f"cannot open {shown}: its driver {e.name} is not installed; the ledger uses psycopg 3: "
            "postgresql+psycopg://... (pip install 'arc-scorecard-ledger[postgres]')"
        ) from e
    except ArgumentError as e:
        raise InputError(f"cannot open the ledger {shown}: {e}") from e
    ref = weakref.ref(engine)

    def _after_fork() -> None:
        # A forked child must not talk over its parent's sockets: it gets a fresh pool.
        eng = ref()
        if eng is not None:
            eng.dispose(close=False)

    os.register_at_fork(after_in_child=_after_fork)
    return engine
