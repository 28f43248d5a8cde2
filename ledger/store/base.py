"""The log's contract, shared by both backends (:mod:`ledger.store.backends` picks one for a ledger).

One append-only ``events`` table (schema owned by the Alembic migrations in the top-level ``migrations/``). Appends are
serialized (SQLite ``BEGIN IMMEDIATE``; PostgreSQL a transaction-level advisory lock) so that ``seq`` is commit
order, and a per-stream ``version`` with UNIQUE(stream, version) gives optimistic concurrency between writers.

This module imports no database driver and no SQLAlchemy: a read command on a SQLite ledger never loads them.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from ledger.domain import chain
from ledger.domain.events import Event, encode, type_of
from ledger.errors import HistoryConflict, InputError, LedgerError, StoreError

if TYPE_CHECKING:
    from pathlib import Path

    from ledger.store.connections import ReadPool, Writer

Durability = Literal["normal", "full", "batched"]

APPEND_ONLY_TRIGGERS = {
    "sqlite": ("events_no_update", "events_no_delete"),
    "postgresql": ("events_no_update", "events_no_delete", "events_no_truncate"),
}


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


class StreamInfo(msgspec.Struct, frozen=True):
    """A stream's extent: number of events, last version and head hash, first and last ``seq``."""

    stream: str
    count: int
    version: int
    head: str
    first_seq: int
    last_seq: int
    first_ts: str
    last_ts: str


class Snapshot(msgspec.Struct, frozen=True):
    """A cached projection of a stream's first ``version`` events (its last event has global ``seq``)."""

    version: int
    seq: int
    body: bytes


class SummaryOverlay(Protocol):
    """The summary tables as of the log's head, held in memory by a store that must not write
    (:class:`ledger.store.summary.Overlay`)."""

    #: The seq of the last event the overlay reflects.
    head: int

    def query(self, sql: str, args: Sequence[Any]) -> list[Any]:
        """Rows of one read statement."""
        ...


class LogStore(Protocol):
    """What the ledger needs from a backend; ``tests/test_store_contract.py`` holds every backend to it."""

    url: str
    dialect: str
    durability: Durability
    readonly: bool

    def migrate(self) -> None:
        """Bring the schema to the latest revision (creates it on an empty database)."""

    def revision(self) -> str | None:
        """The schema revision the database is at (None for an empty database)."""

    def head_revision(self) -> str: ...

    def triggers(self) -> set[str]:
        """Names of the enabled append-only triggers present on ``events``."""

    def missing_triggers(self) -> list[str]: ...

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read statement with ``?`` placeholders (the read models' statements, alike on both
        backends), as stored (``summary.query`` reads the summary tables as of the log's head)."""

    def has_table(self, table: str) -> bool:
        """Whether the schema has ``table`` (a ledger at an earlier revision may not)."""

    def repair_triggers(self) -> list[str]:
        """Create the missing append-only triggers again; returns their names."""

    def catch_up_summary(self) -> int:
        """Fold the events the cards summary does not reflect yet into it (``summary.py``); how many (0 on a
        read-only store)."""

    def rebuild_summary(self) -> int:
        """Rewrite the summary tables from the log in one transaction that holds the append lock; how many cards."""

    def hand_over(self, stream: str, state: Any, version: int) -> None:
        """Give the summary's next catch-up the card a writer folded as its committed append left it (``version``),
        to score instead of decoding and folding those events again; the writer never changes ``state`` again, and
        the summary only reads it."""

    def summary_at_head(self) -> SummaryOverlay | None:
        """None once the summary tables reflect the log's head (caught up when behind); for a read-only store
        that is behind, the in-memory overlay to read them from."""

    def append(
        self, stream: str, new_events: Iterable[Event], expected_version: int | None = None, *, whole: bool = True
    ) -> list[StoredEvent]:
        """Append events to ``stream`` in one transaction, committed when this returns (all of them as stored, or
        with ``whole`` False the last one only)."""

    def append_encoded(
        self, stream: str, rows: Sequence[tuple[str, str, bytes]], expected_version: int | None = None
    ) -> list[StoredEvent]:
        """Like :meth:`append` for already encoded ``(type, ts, body)`` rows."""

    def prepare_copied(self, rows: Sequence[StoredEvent]) -> CopyBatch:
        """``rows`` ready for :meth:`insert_copied`: each row's hash recomputed, and the rows in the backend's own
        encoding where it has one. Reads and writes nothing (it may run in another thread than the writes)."""

    def insert_copied(self, rows: Sequence[StoredEvent] | CopyBatch) -> int:
        """Insert events copied from another ledger (``ledger copy``), keeping their versions and hashes.

        Rows may belong to several streams, each in version order; they get new ``seq`` values here, in the
        order given. Each stream must continue exactly: its next row is the destination's next version and
        links to the destination's head hash, and every row's hash is recomputed. A row the destination already
        holds (same stream, version and hash) is skipped, so a copy can be re-run, or run twice at once.
        Raises :class:`HistoryConflict` if the destination holds a different event at a version, and
        :class:`StoreError` if a stream would not continue; then nothing is written. Returns the number inserted.
        """

    def event_at(self, stream: str, version: int) -> StoredEvent | None: ...

    def get_snapshot(self, stream: str, kind: str) -> Snapshot | None:
        """A cached projection of ``stream``, or None (also when the cache is unreadable)."""

    def put_snapshot(self, stream: str, kind: str, version: int, seq: int, body: bytes) -> None:
        """Store (or replace) the cached projection of ``stream``; failures are ignored."""

    def drop_snapshots(self) -> None: ...

    def analyze(self) -> None:
        """Refresh the query planner's statistics after a bulk write (a copy); best effort, never raises."""

    def snapshots_for(self, streams: Sequence[str], kind: str) -> dict[str, Snapshot]: ...

    def snapshot_keys(self) -> list[tuple[str, str, int, int]]:
        """(stream, kind, version, seq) of every stored snapshot, by stream."""

    def bound_snapshot(self, stream: str, kind: str) -> tuple[Snapshot, tuple[int, str, int] | None] | None:
        """A cached projection of ``stream`` with :meth:`link_at` of its version, in one query."""

    def stream_names(self, prefix: str, limit: int) -> list[str]:
        """Up to ``limit`` stream names that start with ``prefix``, in order."""

    def link_at(self, stream: str, version: int) -> tuple[int, str, int] | None:
        """(seq, hash) of the event of ``stream`` at ``version`` and how many events the stream holds up to it."""

    def read_stream(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None, page: tuple[int, int] | None = None
    ) -> list[StoredEvent]:
        """Every event of ``stream`` in version order; ``page``: (offset, count) of them only."""

    def read_bodies(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None
    ) -> tuple[list[bytes], int, int]:
        """Only the bodies of ``stream`` in version order, with the last version and seq read."""

    def iter_joined(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None, chunk: int = 25_000
    ) -> tuple[Iterable[tuple[bytes, int]], int, int] | None:
        """The stream's bodies joined in version order into JSON-lines chunks ``(bytes, count)``, with the last
        version and seq read: the fast cold replay. None where the backend has no such read (the facade then
        reads :meth:`read_bodies`). An iterable not read to the end must be closed if it has ``close``."""

    def stream_exists(self, stream: str) -> bool: ...

    def streams(self, prefix: str | None = None) -> list[StreamInfo]:
        """Every stream (optionally with a name prefix), in order of first event."""

    def scan(self, *, after_seq: int = 0, batch: int = 10_000, prefix: str | None = None) -> Iterator[StoredEvent]:
        """Every event in global ``seq`` order."""

    def max_seq(self) -> int:
        """The highest ``seq`` in the log (0 when empty)."""

    def count(self) -> int: ...

    def same_database(self, other: LogStore) -> bool: ...

    def describe(self) -> str:
        """The database, for messages (no password)."""

    def close(self) -> None: ...


def normalize_url(path_or_url: str | os.PathLike[str]) -> str:
    """A file path becomes a ``sqlite:///`` URL; anything with ``://`` is taken as a SQLAlchemy URL."""
    s = os.fspath(path_or_url)
    if "://" in s:
        return s
    return "sqlite:///" + os.path.realpath(os.path.expanduser(s))


def hide_password(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***`` (for messages)."""
    return re.sub(r"(//[^:/@]*):[^@/]*@", r"\1:***@", url)


def migrations_dir() -> Path:
    """Where the Alembic scripts are (:func:`_migrations`, as a path)."""
    from pathlib import Path

    return Path(_migrations())


def _migrations() -> str:
    # The source tree keeps them at its top level (``migrations/``); a built wheel carries them inside the package
    # as ``ledger/store/migrations`` (pyproject.toml maps them there), so an install needs no checkout.
    here = os.path.dirname(os.path.realpath(__file__))
    packaged = os.path.join(here, "migrations")
    if os.path.isfile(os.path.join(packaged, "env.py")):
        return packaged
    return os.path.join(os.path.dirname(os.path.dirname(here)), "migrations")


@functools.cache
def known_revisions() -> tuple[str, ...]:
    """Every revision the migrations know, oldest first: read from their files' ``revision = "..."`` lines, so that
    checking a ledger's revision needs no Alembic (a test checks this agrees with Alembic's own script directory)."""
    versions = os.path.join(_migrations(), "versions")
    out = []
    for name in sorted(n for n in os.listdir(versions) if n[:1].isdigit() and "_" in n and n.endswith(".py")):
        with open(os.path.join(versions, name), encoding="utf-8") as f:
            if m := re.search(r'^revision = "([^"]+)"', f.read(), re.M):
                out.append(m.group(1))
    return tuple(out)


def head_revision() -> str:
    return known_revisions()[-1]


def check_revision(revision: str | None, where: str) -> None:
    """Refuse a ledger written by a newer version of this tool (an unknown revision)."""
    if revision is not None and revision not in known_revisions():
        from ledger.version import __version__

        raise StoreError(
            f"the ledger at {where} has schema revision {revision!r}, newer than this version of "
            f"arc-scorecard-ledger ({__version__}, schema {head_revision()}) knows: upgrade arc-scorecard-ledger "
            "to use it"
        )


def no_ledger(where: str) -> LedgerError:
    """The error of a read command given a database that does not exist (or a path that cannot be one)."""
    wrong = not_a_file(where)
    if wrong is not None:
        return wrong
    return StoreError(f"no ledger at {where} (create one with `ledger init`)")


def not_a_file(path: str) -> InputError | None:
    """The error for a SQLite path that names something a database file cannot be (a folder, a FIFO, a device,
    a socket); None for a regular file or nothing at all."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    kinds = (
        (stat.S_ISDIR, "a folder", "give a file in it, such as " + os.path.join(path, "ledger.sqlite")),
        (stat.S_ISFIFO, "a FIFO (named pipe)", "give the path of a ledger file"),
        (stat.S_ISSOCK, "a socket", "give the path of a ledger file"),
        (stat.S_ISCHR, "a device", "give the path of a ledger file"),
        (stat.S_ISBLK, "a device", "give the path of a ledger file"),
    )
    for test, what, advice in kinds:
        if test(mode):
            return InputError(f"{path} is {what}, not a ledger file: {advice}")
    return None


#: The schema at the head revision, generated from the migrations (``scripts/fresh_schema.py``).
FRESH_SCHEMA = os.path.join(os.path.dirname(__file__), "fresh_schema.json")


def head_tables() -> list[str]:
    """The tables of the schema at the head revision: those of ``fresh_schema.json``, which the migrations generate
    (a test holds the two equal) and which name the same tables on both backends."""
    import json

    with open(FRESH_SCHEMA, encoding="utf-8") as f:
        statements = json.load(f)["statements"]
    return [m.group(1) for s in statements if (m := re.match(r'CREATE TABLE "?(\w+)', s))]


def trigger_statements(dialect: str, missing: list[str]) -> list[str]:
    """The DDL that creates the ``missing`` append-only triggers again (the first migration's own statements)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_ledger_0001", migrations_dir() / "versions" / "0001_events.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if dialect == "sqlite":
        return [s for s in mod.SQLITE_TRIGGERS if any(f"TRIGGER {name} " in s for name in missing)]
    out = [mod.PG_TRIGGERS[0]]  # the trigger function (CREATE OR REPLACE)
    for name in missing:
        # A disabled trigger counts as missing: drop it and create it again, enabled ALWAYS.
        out.append(f"DROP TRIGGER IF EXISTS {name} ON events")
        out += [s for s in mod.PG_TRIGGERS[1:] if f"TRIGGER {name} " in s or s.endswith(f"TRIGGER {name}")]
    return out


def pg_sql(sql: str) -> str:
    """A ``?`` statement for psycopg (``%s`` placeholders; no literal ``%`` is used in the ledger's statements)."""
    return sql.replace("?", "%s")


def in_chunks(
    read: Callable[[str, tuple[Any, ...]], Iterable[Any]],
    sql: str,
    values: Sequence[Any],
    *,
    before: Sequence[Any] = (),
    mark: str = "?",
    chunk: int = 500,
) -> Iterator[Any]:
    """Rows of ``sql`` for many ``values``, a query per ``chunk`` of them: ``{}`` in ``sql`` is the chunk's
    placeholders (an ``IN`` list), after the arguments ``before``."""
    for part in itertools.batched(values, chunk):
        yield from read(sql.format(", ".join([mark] * len(part))), (*before, *part))


def has_table(execute: Callable[[str, Any], Any], dialect: str, table: str) -> bool:
    """Whether the ledger's schema has ``table`` (a ledger at an earlier revision may not): ``execute`` runs one
    statement and returns its rows (a list or a cursor)."""
    if dialect == "sqlite":
        sql = f"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
    else:
        sql = f"SELECT count(*) FROM pg_tables WHERE tablename = '{table}' AND schemaname = current_schema()"
    return bool(next(iter(execute(sql, ())))[0])


def chain_rows(stream: str, rows: Sequence[tuple[str, str, bytes]], version: int, prev: str) -> list[StoredEvent]:
    """The rows to insert after ``(version, prev)``: numbered and hash-linked (``seq`` 0 until inserted)."""
    hashes = chain.chain_hashes(prev, stream, version, [(t, b) for t, _, b in rows])
    prevs = [prev, *hashes[:-1]]
    return [
        StoredEvent(0, stream, version + i, type_, ts, body, p, h)
        for i, ((type_, ts, body), p, h) in enumerate(zip(rows, prevs, hashes, strict=True), 1)
    ]


class CopyBatch(msgspec.Struct, frozen=True):
    """Rows copied from another ledger, prepared for :meth:`LogStore.insert_copied` before the destination is locked
    (``ledger copy`` prepares the next batch while the destination writes the last one)."""

    rows: Sequence[StoredEvent]
    #: :func:`chain.first_unhashed` of ``rows``: the first row whose hash is not that of its own columns, or None.
    unhashed: int | None
    #: Every row in the destination's own encoding (PostgreSQL: binary COPY data), or None.
    encoded: bytes | None = None


def stream_query(
    mark: str, columns: str, stream: str, after_version: int, until_seq: int | None, page: tuple[int, int] | None
) -> tuple[str, tuple[Any, ...]]:
    """The query (and its arguments) of a stream's events in version order, after a version and up to a global seq
    (``page``: (offset, count) of them), with the driver's placeholder ``mark``; its WHERE clause alone when
    ``columns`` is empty."""
    where = f"WHERE stream = {mark} AND version > {mark}" + (f" AND seq <= {mark}" if until_seq is not None else "")
    args: tuple[Any, ...] = (stream, after_version) if until_seq is None else (stream, after_version, until_seq)
    if not columns:
        return where, args
    q = f"SELECT {columns} FROM events {where} ORDER BY version"
    return (f"{q} LIMIT {mark} OFFSET {mark}", (*args, page[1], page[0])) if page is not None else (q, args)


def copy_batch_of(rows: Sequence[StoredEvent] | CopyBatch) -> CopyBatch:
    """``rows`` as a :class:`CopyBatch` (each row's hash recomputed here unless it is one already)."""
    if isinstance(rows, CopyBatch):
        return rows
    return CopyBatch(rows, chain.first_unhashed(rows))


def copied_rows(
    batch: CopyBatch, heads: dict[str, tuple[int, str]], held: dict[tuple[str, int], str]
) -> list[StoredEvent]:
    """Which copied rows to insert: those past each stream's head (``heads``, updated), each checked to continue it.
    ``held``: (stream, version) -> the destination's hash, for the versions the rows overlap. Raises
    :class:`HistoryConflict` or :class:`StoreError` (nothing is to be written then)."""
    # A row before ``batch.unhashed`` hashes to its own hash: it continues its stream when its version follows
    # the head and its prev_hash is the head's hash. Any other row gets the whole check and its message.
    rows = batch.rows
    hashed = len(rows) if batch.unhashed is None else batch.unhashed
    out = []
    for i, r in enumerate(rows):
        version, prev = heads[r.stream]
        if r.version <= version:
            if held.get((r.stream, r.version)) != r.hash:
                raise HistoryConflict(
                    f"stream {r.stream!r}: the destination holds a different event at version {r.version}"
                )
            continue
        if i >= hashed or r.version != version + 1 or r.prev_hash != prev:
            broken = chain.check_link(r.stream, r, version, prev)
            if broken is not None:
                raise StoreError(
                    f"stream {r.stream!r}: event version {r.version} does not continue the destination "
                    f"(head version {version}): {broken.message}"
                )
        out.append(r)
        heads[r.stream] = (r.version, r.hash)
    return out


def lowest_versions(rows: Sequence[StoredEvent]) -> dict[str, int]:
    lowest: dict[str, int] = {}
    for r in rows:
        lowest[r.stream] = min(lowest.get(r.stream, r.version), r.version)
    return lowest


class HeadCache:
    """The last (version, hash) this process appended per stream: an append can skip re-reading the head (a stale
    entry only turns into a VersionConflict through UNIQUE(stream, version))."""

    def __init__(self) -> None:
        self._heads: dict[str, tuple[int, str]] = {}
        self._lock = threading.Lock()

    def known(self, stream: str, expected_version: int | None) -> tuple[int, str] | None:
        """The cached head if it is the one the caller expects, else None (read it under the lock)."""
        cached = self._heads.get(stream)
        if cached is not None and expected_version is not None and cached[0] == expected_version:
            return cached
        return None

    def set(self, stream: str, last: StoredEvent) -> None:
        with self._lock:
            self._heads[stream] = (last.version, last.hash)

    def forget(self, stream: str) -> None:
        """Drop what is known of the stream (after a failure or a copy)."""
        with self._lock:
            self._heads.pop(stream, None)


#: Cards handed over to the summary and not taken yet, at most (:meth:`StoreBase.hand_over`).
HANDED_CARDS = 64

#: Events encoded, chained and inserted at a time by an append that returns only its last event.
APPEND_CHUNK = 2_000


def encode_events(new_events: Sequence[Event]) -> list[tuple[str, str, bytes]]:
    return [(type_of(e), e.ts.isoformat(), encode(e)) for e in new_events]


#: The columns of a :class:`StoredEvent`, in its fields' order.
COLUMNS = "seq, stream, version, type, ts, body, prev_hash, hash"
#: Every stream's extent (a :class:`StreamInfo` per row), the head hash joined on UNIQUE(stream, version): one
#: round trip, not one per stream.
STREAMS_SQL = (
    "SELECT a.stream, a.n, a.v, e.hash, a.fs, a.ls, a.ft, a.lt FROM ("
    "SELECT stream, count(*) AS n, max(version) AS v, min(seq) AS fs, max(seq) AS ls, min(ts) AS ft, max(ts) AS lt "
    "FROM events {where} GROUP BY stream) AS a JOIN events AS e ON e.stream = a.stream AND e.version = a.v "
    "ORDER BY a.fs"
)


class StoreBase:
    """What both backends share: the public append methods over their ``_append_rows``, the reads that differ only
    in the driver's placeholder (``_mark``) over their ``_read``, the trigger check and repair, the migration's
    revision check. The cards summary's part (``summary.py``, loaded only when needed) runs over the hooks
    ``_fetcher``, ``_runner``, ``_snapshot`` and ``_write_transaction``."""

    dialect: str
    _mark: str
    #: The statement that refreshes the query planner's statistics (after a copy).
    _analyze: str
    _writer: Writer[Any]
    _readers: ReadPool[Any]
    _follower: Follower

    def __init__(self, url: str, durability: Durability, busy_timeout_ms: int, readonly: bool) -> None:
        self.url = url
        self.durability = durability
        self.busy_timeout_ms = busy_timeout_ms
        self.readonly = readonly
        self._heads = HeadCache()
        #: The cards summary's keeper (``summary.keeper_of``: this module does not import the summary's).
        self._keeper: Any = None
        #: stream -> (card, version) handed over by writers (:meth:`hand_over`), taken by the summary's next catch-up.
        self._handed: dict[str, tuple[Any, int]] = {}
        self._overlay: SummaryOverlay | None = None
        self._engine: Any = None

    def describe(self) -> str:
        raise NotImplementedError

    def catch_up_summary(self) -> int:
        raise NotImplementedError

    def revision(self) -> str | None:
        raise NotImplementedError

    def triggers(self) -> set[str]:
        raise NotImplementedError

    def _read(self, q: str, args: tuple[Any, ...]) -> list[Any]:
        """Rows of one statement (``_mark`` placeholders) on a reader connection; raises :class:`StoreError`."""
        raise NotImplementedError

    def _prefix(self, prefix: str) -> tuple[str, tuple[str, ...]]:
        """The condition (and its arguments) matching the streams whose name starts with ``prefix`` exactly."""
        raise NotImplementedError

    @staticmethod
    def _fetcher(con: Any) -> Callable[[str, Any], list[Any]]:
        """Runs a ``?`` statement on connection ``con`` and returns its rows."""
        raise NotImplementedError

    @staticmethod
    def _runner(con: Any) -> Callable[[str, Any], object]:
        """Runs a ``?`` statement on connection ``con``, once per row of its parameters when they are a list."""
        raise NotImplementedError

    def _snapshot[T](self, work: Callable[[Any], T]) -> T:
        """``work(connection)`` in one read transaction on a reader connection: one snapshot of the database."""
        raise NotImplementedError

    def _hold_appends(self, con: Any) -> None:
        """Hold off every append until the write transaction on ``con`` ends (SQLite's IMMEDIATE transaction does
        already)."""

    def hand_over(self, stream: str, state: Any, version: int) -> None:
        # A few at most: a catch-up that cannot run (a dropped table) leaves the cards to be read from the log.
        if not self.readonly and len(self._handed) < HANDED_CARDS:
            self._handed[stream] = (state, version)

    def rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self._read(sql if self._mark == "?" else pg_sql(sql), tuple(args))

    def has_table(self, table: str) -> bool:
        return has_table(self.rows, self.dialect, table)

    def _events(self, q: str, args: tuple[Any, ...]) -> list[StoredEvent]:
        return [StoredEvent(*r) for r in self._read(q, args)]

    def append(
        self, stream: str, new_events: Iterable[Event], expected_version: int | None = None, *, whole: bool = True
    ) -> list[StoredEvent]:
        """Append events to ``stream`` in one transaction, committed when this returns.

        ``expected_version`` is the stream's last version the caller knows (0 for a new stream); if another
        writer got there first, :class:`VersionConflict` is raised and nothing is written. ``None`` appends
        after whatever the stream holds. With ``whole`` False only the last event is returned as stored, and a
        backend that can encodes, chains and inserts the events :data:`APPEND_CHUNK` at a time in that one
        transaction (an imported card of tens of thousands of events is never held as rows at once). Events that are
        not a sequence (made as they are inserted: an import's) are inserted that way too, ``whole`` or not.
        """
        if not isinstance(new_events, Sequence):
            events = iter(new_events)
            first = next(events, None)
            if first is None:
                return []
            return [self._append_chunked(stream, itertools.chain([first], events), expected_version)]
        if not new_events:
            return []
        if not whole and len(new_events) > APPEND_CHUNK:
            return [self._append_chunked(stream, new_events, expected_version)]
        stored = self._append_rows(stream, encode_events(new_events), expected_version)
        return stored if whole else stored[-1:]

    def _append_chunked(self, stream: str, new_events: Iterable[Event], expected_version: int | None) -> StoredEvent:
        raise NotImplementedError

    def append_encoded(
        self, stream: str, rows: Sequence[tuple[str, str, bytes]], expected_version: int | None = None
    ) -> list[StoredEvent]:
        if not rows:
            return []
        return self._append_rows(stream, rows, expected_version)

    def _append_rows(
        self, stream: str, rows: Sequence[tuple[str, str, bytes]], expected_version: int | None
    ) -> list[StoredEvent]:
        raise NotImplementedError

    def prepare_copied(self, rows: Sequence[StoredEvent]) -> CopyBatch:
        return copy_batch_of(rows)

    def _write_dbapi(self) -> Any:
        """The connection every write of this process goes through (tests use it to cause faults). Got holding the
        writer: one found unusable is never closed under another thread's use."""
        with self._writer.locked():
            return self._writer.get()

    def migrate(self) -> None:
        if self.readonly:
            raise StoreError(f"the ledger at {self.describe()} is open read-only: it cannot be migrated")
        # At head (the usual case) this is one query: opening must not queue behind writers for the write lock.
        rev = self.revision()
        check_revision(rev, self.describe())
        if rev != head_revision():
            self._upgrade(rev)

    def _upgrade(self, rev: str | None) -> None:
        """Migrate the schema from revision ``rev`` (None: an empty database) to the head, in the backend's way."""
        raise NotImplementedError

    def missing_triggers(self) -> list[str]:
        have = self.triggers()
        return [t for t in APPEND_ONLY_TRIGGERS[self.dialect] if t not in have]

    def repair_triggers(self) -> list[str]:
        """Create the missing (on PostgreSQL also disabled) append-only triggers again (``ledger init``); returns
        their names."""
        missing = self.missing_triggers()
        if missing:
            statements = trigger_statements(self.dialect, missing)
            self._write_transaction(lambda con: [con.execute(s) for s in statements], "cannot prepare the ledger")
        return missing

    def _write_transaction(self, work: Callable[[Any], Any], what: str) -> Any:
        """``work(connection)`` in one committed transaction on the writer (rolled back on any error); the driver's
        errors as :class:`StoreError` saying ``what``."""
        raise NotImplementedError

    def head_revision(self) -> str:
        return head_revision()

    def drop_snapshots(self) -> None:
        self._write_transaction(lambda con: con.execute("DELETE FROM snapshots"), "cannot write to the ledger")

    def analyze(self) -> None:
        if not self.readonly:
            # Statistics only steer the planner: the copied events are committed either way.
            with contextlib.suppress(StoreError):
                self._write_transaction(lambda con: con.execute(self._analyze), "cannot analyze the ledger")

    def close(self) -> None:
        """Release every connection this process opened (a forked child's: its own only), the summary caught up
        first when it can be: what the appends since the follower's last run added (a copy leaves it to the next
        read). On PostgreSQL this waits for another session's catch-up, which may have read the log before this
        process's last commit."""
        if self._follower.close():
            with contextlib.suppress(StoreError):
                self.catch_up_summary()
        self._writer.close()
        self._readers.close()
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    # -- reads alike on both backends ---------------------------------------------------------------------

    def get_snapshot(self, stream: str, kind: str) -> Snapshot | None:
        m = self._mark
        try:
            rows = self._read(
                f"SELECT version, seq, body FROM snapshots WHERE stream = {m} AND kind = {m}", (stream, kind)
            )
        except StoreError:
            return None
        return Snapshot(rows[0][0], rows[0][1], bytes(rows[0][2])) if rows else None

    def snapshots_for(self, streams: Sequence[str], kind: str) -> dict[str, Snapshot]:
        q = f"SELECT stream, version, seq, body FROM snapshots WHERE kind = {self._mark} AND stream IN ({{}})"
        try:
            got = in_chunks(self._read, q, streams, before=(kind,), mark=self._mark)
            return {r[0]: Snapshot(r[1], r[2], bytes(r[3])) for r in got}
        except StoreError:
            return {}

    def snapshot_keys(self) -> list[tuple[str, str, int, int]]:
        return [tuple(r) for r in self._read("SELECT stream, kind, version, seq FROM snapshots ORDER BY stream", ())]

    def bound_snapshot(self, stream: str, kind: str) -> tuple[Snapshot, tuple[int, str, int] | None] | None:
        """See :class:`LogStore` (None also for an unreadable cache)."""
        m = self._mark
        q = (
            "SELECT s.version, s.seq, s.body, e.seq, e.hash, "
            "(SELECT count(*) FROM events c WHERE c.stream = s.stream AND c.version <= s.version) "
            "FROM snapshots s LEFT JOIN events e ON e.stream = s.stream AND e.version = s.version "
            f"WHERE s.stream = {m} AND s.kind = {m}"
        )
        try:
            rows = self._read(q, (stream, kind))
        except StoreError:
            return None
        if not rows:
            return None
        r = rows[0]
        return Snapshot(r[0], r[1], bytes(r[2])), _link(r[3:])

    def link_at(self, stream: str, version: int) -> tuple[int, str, int] | None:
        m = self._mark
        q = (
            f"SELECT seq, hash, (SELECT count(*) FROM events WHERE stream = {m} AND version <= {m}) "
            f"FROM events WHERE stream = {m} AND version = {m}"
        )
        rows = self._read(q, (stream, version, stream, version))
        return _link(rows[0]) if rows else None

    def read_stream(
        self, stream: str, *, after_version: int = 0, until_seq: int | None = None, page: tuple[int, int] | None = None
    ) -> list[StoredEvent]:
        return self._events(*stream_query(self._mark, COLUMNS, stream, after_version, until_seq, page))

    def event_at(self, stream: str, version: int) -> StoredEvent | None:
        m = self._mark
        rows = self._events(f"SELECT {COLUMNS} FROM events WHERE stream = {m} AND version = {m}", (stream, version))
        return rows[0] if rows else None

    def stream_exists(self, stream: str) -> bool:
        return bool(self._read(f"SELECT 1 FROM events WHERE stream = {self._mark} LIMIT 1", (stream,)))

    def streams(self, prefix: str | None = None) -> list[StreamInfo]:
        if prefix is None:
            return [StreamInfo(*r) for r in self._read(STREAMS_SQL.format(where=""), ())]
        where, args = self._prefix(prefix)
        return [StreamInfo(*r) for r in self._read(STREAMS_SQL.format(where=f"WHERE {where}"), args)]

    def scan(self, *, after_seq: int = 0, batch: int = 10_000, prefix: str | None = None) -> Iterator[StoredEvent]:
        """Every event in global ``seq`` order, read in batches (for verify, copy and tailing)."""
        last = after_seq
        cond, pargs = self._prefix(prefix) if prefix is not None else ("", ())
        m = self._mark
        q = f"SELECT {COLUMNS} FROM events WHERE seq > {m}{f' AND {cond}' if cond else ''} ORDER BY seq LIMIT {m}"
        while True:
            rows = self._events(q, (last, *pargs, batch))
            if not rows:
                return
            yield from rows
            last = rows[-1].seq

    def max_seq(self) -> int:
        return int(self._read("SELECT coalesce(max(seq), 0) FROM events", ())[0][0])

    def count(self) -> int:
        return int(self._read("SELECT count(*) FROM events", ())[0][0])


def _link(row: Sequence[Any]) -> tuple[int, str, int] | None:
    """(seq, hash, events up to it) of a joined event row, None where there is no event."""
    return None if row[0] is None else (int(row[0]), str(row[1]), int(row[2]))


#: How long a writer's background thread waits after a commit before catching up: the commits of that time are
#: folded together (one row write per card, not one per event), off the appending thread.
FOLLOW_DELAY_S = 0.05


class Follower:
    """Runs ``work`` in a daemon thread of a writing process, woken every ``every`` commits (0: never; a commit
    counts its ``weight``) and run ``delay`` seconds later (the commits in between are folded together): the
    summary's catch-up, SQLite's WAL checkpoints. A failure is left for the next run (the summary is derived, the
    log is the truth; a checkpoint's pages stay in the WAL). A forked child starts its own thread."""

    def __init__(self, work: Callable[[], object], name: str, *, every: int = 1, delay: float = FOLLOW_DELAY_S) -> None:
        self._work = work
        self._name = name
        self._every = every
        self._delay = delay
        self._commits = 0
        self._wake = threading.Event()
        #: Set by :meth:`close`: the wait before a run ends at once (the closing store catches up itself).
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._closed = False

    def committed(self, weight: int = 1) -> None:
        """Called by the appending thread after a commit of ``weight`` units (costs a count when the thread runs
        already)."""
        self._commits += weight
        if self._closed or not self._every or self._commits < self._every:
            return
        self._commits = 0
        if self._pid != os.getpid() or self._thread is None:
            self._pid = os.getpid()
            self._wake, self._stop = threading.Event(), threading.Event()
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        wake = self._wake
        while True:
            wake.wait()
            if self._closed:
                return
            self._stop.wait(self._delay)
            wake.clear()
            if self._closed:
                return
            with contextlib.suppress(Exception):
                self._work()

    def close(self) -> bool:
        """Stop the thread (a run in progress finishes first); whether this process committed through it."""
        self._closed = True
        thread = self._thread
        ours = thread is not None and self._pid == os.getpid()
        if thread is not None and ours:
            self._stop.set()
            self._wake.set()
            thread.join(timeout=30)
        self._thread = None
        return ours
