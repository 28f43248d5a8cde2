"""The SQLite store's side of the cards summary that follows the log by position (see summary_tail.py)."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING, Any

from ledger.errors import StoreError
from ledger.storage.summary import SummaryKeeper
from ledger.storage.summary_sql import probe
from ledger.storage.summary_tail import LAG_SQL, POSITION_SQL, Overlay, build_overlay, catch_up

if TYPE_CHECKING:
    from ledger.storage.connections import ReadPool, Writer


def sqlite_catch_up(keeper: SummaryKeeper, con: sqlite3.Connection) -> int:
    """:func:`catch_up` on SQLite writer connection ``con`` (autocommit mode; BEGIN IMMEDIATE serializes it with
    every append and every other catch-up)."""

    def fetch(sql: str, args: Any) -> list[Any]:
        return con.execute(sql, args).fetchall()

    def begin() -> int:
        con.execute("BEGIN IMMEDIATE")
        probe(keeper, con.execute, "sqlite")
        return int(fetch(POSITION_SQL, ())[0][0])

    def rollback() -> None:
        if con.in_transaction:
            con.execute("ROLLBACK")

    def commit() -> None:
        con.execute("COMMIT")

    return catch_up(keeper, begin, fetch, con.execute, con.executemany, commit, rollback)


def sqlite_overlay(keeper: SummaryKeeper, con: sqlite3.Connection) -> Overlay | None:
    """An :class:`Overlay` read in one read transaction on ``con``, or None when the summary is at the head."""
    con.execute("BEGIN")
    try:
        position, head = con.execute(LAG_SQL).fetchone()
        if position >= head:
            return None
        probe(keeper, con.execute, "sqlite")
        return build_overlay(lambda sql, args: con.execute(sql, args).fetchall(), keeper, head, position)
    finally:
        con.execute("ROLLBACK")


class SQLiteSummary:
    """Catch-up and read-only overlay for :class:`~ledger.storage.sqlite.SQLiteStore`."""

    readonly: bool
    _summary: SummaryKeeper
    _writer: Writer[sqlite3.Connection]
    _readers: ReadPool[sqlite3.Connection]
    _overlay: Overlay | None

    def describe(self) -> str:
        raise NotImplementedError

    def _read(self, q: str, args: tuple[Any, ...]) -> list[Any]:
        raise NotImplementedError

    def catch_up_summary(self) -> int:
        """Fold into the cards summary the events it does not reflect yet; how many (0 on a read-only store)."""
        if self.readonly:
            return 0
        try:
            with self._writer.connection() as con:
                return sqlite_catch_up(self._summary, con)
        except sqlite3.Error as e:
            raise StoreError(f"cannot update the cards summary of the ledger at {self.describe()}: {e}") from e

    def _follow(self) -> None:
        with contextlib.suppress(StoreError):
            self.catch_up_summary()

    def summary_at_head(self) -> Overlay | None:
        """None once the summary tables reflect the log's head (caught up here when behind); for a read-only store
        that is behind, the :class:`Overlay` to answer from (nothing written)."""
        try:
            position, head = self._read(LAG_SQL, ())[0]
        except StoreError as e:
            if "summary_position" in str(e):  # an earlier revision, open read-only: its appends kept the rows
                return None
            raise
        if position >= head:
            return None
        if not self.readonly:
            self.catch_up_summary()
            return None
        if self._overlay is None or self._overlay.head != head:
            try:
                with self._readers.connection() as con:
                    self._overlay = sqlite_overlay(self._summary, con)
            except sqlite3.Error as e:
                raise StoreError(f"cannot read the ledger at {self.describe()}: {e}") from e
        return self._overlay
