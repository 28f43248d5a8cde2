"""The cards summary follows the log by position: a catch-up projection.

An append writes the event and its chain, nothing else. The summary's row of ``tracking``
(:mod:`ledger.store.tracking`) holds the ``seq`` and hash of the last event the summary tables reflect; a catch-up
reads the events after it in ``seq`` order, folds them into the cards' rows
(:meth:`~ledger.store.summary.SummaryKeeper.change`, the same fold and score as a rebuild) and writes the rows and
the new position in one transaction, so each event is folded exactly once whoever runs it and whenever it is
killed. A catch-up runs before every read of the summary (:func:`ledger.store.summary_build.query`), from a
writer's background thread a little after its commits (:class:`Follower`), and when a writing store closes.

Tailing by ``seq`` needs ``seq`` order to be commit order. SQLite: one writer at a time, an INTEGER PRIMARY KEY
assigned under the write lock. PostgreSQL: a sequence is not commit order in general (a value taken by one
transaction can commit after a larger one), but every insert into ``events`` (append, import, copy) takes the
append advisory lock before it takes a ``seq`` and holds it to its commit, so appends are serialized and no
event can commit below an event already visible; a catch-up reads under READ COMMITTED after locking the position
row, so it sees every event up to the newest committed. An insert into ``events`` that skipped the lock would
break this (``verify`` would then report the summary differing from a rebuild).

A read-only store never writes: when its summary is behind, the tail is folded in memory and the lists are
answered from an in-memory copy of the tables with the tail applied (:class:`Overlay`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ledger.errors import StoreError
from ledger.store import tracking
from ledger.store.base import has_table
from ledger.store.figures import FIGURES, KEY_COLUMNS, SELECT_ALL_SQL, write_delta
from ledger.store.summary import COLUMNS, KEYS, SUMMARY, Change, SummaryKeeper, copied_changes
from ledger.store.summary_sql import (
    SELECT_KEYS_SQL,
    SELECT_ROWS_SQL,
    body_reader,
    figures_change,
    run_statements,
    write_changes,
)

#: (the summary's position, the log's last seq, 1 while the event at the position is the one folded there).
POSITION_SQL = tracking.behind_sql(tracking.SUMMARY)
SET_POSITION_SQL = f"UPDATE {tracking.TABLE} SET seq = ?, hash = ? WHERE name = '{tracking.SUMMARY}'"
TAIL_SQL = "SELECT stream, version, type, body, seq, hash FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
#: Events folded per transaction of a catch-up (a long tail, after a copy, is caught up in several).
CHUNK = 20_000

Execute = Callable[[str, Any], Any]


def position(row: Sequence[Any], where: str) -> tuple[int, int]:
    """(the summary's position, the log's last seq) from a :data:`POSITION_SQL` row; raises where the event at the
    position is no longer the one the summary folded (a log changed behind the ledger's back)."""
    seq, head, same = row
    if not same:
        raise SummaryUnbound(
            f"the cards summary of the ledger at {where} reflects the log up to event seq {seq}, which the log no "
            "longer holds as it was: the log was changed behind the ledger's back (`ledger verify` says what "
            "differs; `ledger rebuild-summary` rebuilds the summary from the log as it is)"
        )
    return int(seq), int(head)


class SummaryUnbound(StoreError):
    """The summary's position names an event the log no longer holds as it was."""


def fold_tail(
    keeper: SummaryKeeper, fetch: Callable[[str, Any], list[Any]], position: int, limit: int = CHUNK
) -> tuple[list[Change | None], tuple[int, str] | None, int]:
    """The summary changes of the (at most ``limit``) events after ``position``, the seq and hash of the last one
    (None when there is none) and how many there were. ``fetch`` runs ``?`` reads in the caller's transaction."""
    rows = fetch(TAIL_SQL, (position, limit))
    if not rows:
        return [], None, 0
    events = [(r[0], r[1], r[2], bytes(r[3])) for r in rows]
    return copied_changes(keeper, events, body_reader(fetch)), (int(rows[-1][4]), str(rows[-1][5])), len(rows)


def catch_up(
    keeper: SummaryKeeper,
    begin: Callable[[], int],
    fetch: Callable[[str, Any], list[Any]],
    execute: Execute,
    executemany: Execute,
    commit: Callable[[], None],
    rollback: Callable[[], None],
    writing: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> int:
    """Bring the summary tables to the log's head, a transaction per :data:`CHUNK` events; returns how many events
    were folded. ``begin`` opens the transaction, takes what serializes catch-ups and returns the position;
    ``writing`` wraps the writes (PostgreSQL: a pipeline, not a round trip per statement)."""
    folded = 0
    while True:
        changes: list[Change | None] = []
        try:
            # Inside the try: ``begin`` may fail once its transaction is open (a schema without the position table,
            # after a downgrade), and a SQLite writer left in it would hold the write lock.
            at = begin()
            changes, last, n = fold_tail(keeper, fetch, at)
            if last is None:
                commit()
                return folded
            figures = figures_change(fetch, changes) if keeper.figures else None
            with writing():
                write_changes(executemany, changes, figures)
                execute(SET_POSITION_SQL, last)
            commit()
        except BaseException:
            with contextlib.suppress(Exception):
                rollback()
            # ``change`` took the cards out of the keeper: the next catch-up replays them from the log.
            raise
        for change in changes:
            keeper.committed(change)
        folded += n
        if n < CHUNK:
            # Fewer than a chunk: the head as it was when read (a reader that wants a newer head asks again).
            return folded


class Overlay:
    """The summary tables as of the log's head for a store that must not write: an in-memory SQLite copy of the
    stored rows and keys with the tail's changes applied. Built when a read finds the summary behind; reused while
    the log's head stays where it was."""

    def __init__(
        self,
        head: int,
        rows: Sequence[Sequence[Any]],
        keys: Sequence[Sequence[Any]],
        figures: Sequence[Sequence[Any]] | None = None,
    ) -> None:
        self.head = head
        #: Whether the stored schema has the tag figures (then the copy keeps them as a catch-up would).
        self.figures = figures is not None
        self.con = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.lock = threading.Lock()
        cols = ", ".join(f"{c}{' PRIMARY KEY' if c == 'card_id' else ''}" for c in COLUMNS)
        self.con.execute(f"CREATE TABLE {SUMMARY} ({cols})")
        self.con.execute(f"CREATE TABLE {KEYS} (kind, value, card_id, PRIMARY KEY (kind, value, card_id))")
        self.con.executemany(f"INSERT INTO {SUMMARY} VALUES ({', '.join('?' * len(COLUMNS))})", rows)
        self.con.executemany(f"INSERT INTO {KEYS} VALUES (?, ?, ?)", [(k, v, c) for c, k, v in keys])
        key = ", ".join(KEY_COLUMNS)
        self.con.execute(f"CREATE TABLE {FIGURES} ({key}, n, PRIMARY KEY ({key}))")
        if figures:
            self.con.executemany(f"INSERT INTO {FIGURES} VALUES ({', '.join('?' * (len(KEY_COLUMNS) + 1))})", figures)

    def apply(self, changes: Sequence[Change | None]) -> None:
        """Apply the tail's changes (as a catch-up would write them)."""
        if self.figures:
            moved = figures_change(lambda sql, args: self.con.execute(sql, args).fetchall(), changes)
            write_delta(self.con.executemany, moved)
        run_statements(self.con.execute, self.con.executemany, changes)

    def query(self, sql: str, args: Sequence[Any]) -> list[Any]:
        """Rows of one ``?`` read statement written for either backend (PostgreSQL's LEAST is SQLite's min)."""
        with self.lock:
            try:
                return self.con.execute(sql.replace("LEAST(", "min("), tuple(args)).fetchall()
            except sqlite3.Error as e:
                raise StoreError(f"cannot read the cards summary folded in memory: {e}") from e


def build_overlay(fetch: Callable[[str, Any], list[Any]], keeper: SummaryKeeper, head: int, at: int) -> Overlay:
    """An :class:`Overlay` at ``head`` from the stored tables (at seq ``at``) and the events after it, read through
    ``fetch`` in one read transaction."""
    figures = fetch(SELECT_ALL_SQL, ()) if keeper.figures else None
    overlay = Overlay(head, fetch(SELECT_ROWS_SQL, ()), fetch(SELECT_KEYS_SQL, ()), figures)
    while at < head:
        # ``change`` takes each card out of the keeper and nothing puts it back (nothing is committed): a card is
        # replayed from the log for each overlay, never continued from a fold that was not written.
        changes, last, _ = fold_tail(keeper, fetch, at)
        if last is None:
            break
        overlay.apply(changes)
        at = last[0]
    return overlay


def has_position(fetch: Callable[[str, Any], list[Any]], dialect: str) -> bool:
    """Whether the schema has the position table (a ledger at an earlier revision, opened read-only, has not)."""
    return has_table(fetch, dialect, tracking.TABLE)
