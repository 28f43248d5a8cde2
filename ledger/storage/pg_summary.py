"""The PostgreSQL store's side of the cards summary that follows the log by position (see summary_tail.py).

Tailing by ``seq`` is safe here only because every insert into ``events`` takes the append advisory lock before
its ``seq`` is drawn and keeps it to its commit (``lock_statement`` in the append, the import and the copy): the
events commit in ``seq`` order, so an event the catch-up has not seen can never get a ``seq`` below one it has.
The catch-up itself does not take the append lock (appends never wait for it); catch-ups are serialized by the
position row (``SELECT ... FOR UPDATE``), and under READ COMMITTED each statement after that lock sees every
event committed so far.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ledger.errors import StoreError
from ledger.storage.summary import SummaryKeeper
from ledger.storage.summary_sql import pg, probe
from ledger.storage.summary_tail import LAG_SQL, POSITION_SQL, Overlay, build_overlay, catch_up

if TYPE_CHECKING:
    from ledger.storage.connections import ReadPool


def _reader(conn: Any) -> Callable[[str, Any], list[Any]]:
    return lambda sql, params: conn.execute(pg(sql), params).fetchall()


def pg_catch_up(keeper: SummaryKeeper, conn: Any, *, wait: bool = True) -> int:
    """:func:`~ledger.storage.summary_tail.catch_up` on psycopg connection ``conn`` (not in autocommit mode).
    ``wait`` False: nothing when another session is catching up (it folds what was committed before it read)."""

    def fetch(sql: str, args: Any) -> list[Any]:
        return list(conn.execute(pg(sql), args).fetchall())

    def begin() -> int:
        probe(keeper, _reader(conn), "postgresql")
        got = fetch(POSITION_SQL + (" FOR UPDATE" if wait else " FOR UPDATE SKIP LOCKED"), ())
        if not got:
            raise _Busy
        return int(got[0][0])

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


class PostgresSummary:
    """Catch-up and read-only overlay for :class:`~ledger.storage.postgres.PostgresStore`."""

    readonly: bool
    _summary: SummaryKeeper
    _readers: ReadPool[Any]
    _overlay: Overlay | None

    def describe(self) -> str:
        raise NotImplementedError

    def catch_up_summary(self, *, wait: bool = True) -> int:
        """Fold into the cards summary the events it does not reflect yet; how many (0 on a read-only store).

        On a connection of the read pool, not the writer: the appending thread never waits for a catch-up.
        ``wait`` False (the follower thread): nothing if another session is catching up right now."""
        if self.readonly:
            return 0
        import psycopg

        from ledger.storage.pg_engine import reason

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

    def _follow(self) -> None:
        with contextlib.suppress(StoreError):
            self.catch_up_summary(wait=False)

    def summary_at_head(self) -> Overlay | None:
        """None once the summary tables reflect the log's head (caught up here when behind); for a read-only store
        that is behind, the :class:`Overlay` to answer from (nothing written)."""
        import psycopg

        from ledger.storage.pg_engine import reason

        try:
            with self._readers.connection() as conn:
                position, head = conn.execute(LAG_SQL).fetchone()
                if position >= head:
                    return None
                if self.readonly:
                    return self._overlay_at(conn, head)
        except psycopg.Error as e:
            if "summary_position" in str(e):  # an earlier revision, open read-only: its appends kept the rows
                return None
            raise StoreError(f"cannot read the ledger at {self.describe()}: {reason(e)}") from e
        self.catch_up_summary()
        return None

    def _overlay_at(self, conn: Any, head: int) -> Overlay:
        if self._overlay is not None and self._overlay.head == head:
            return self._overlay
        # One snapshot for the stored tables and the tail (a writer's catch-up may commit meanwhile).
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        try:

            def fetch(sql: str, args: Any) -> list[Any]:
                return list(conn.execute(pg(sql), tuple(args) or None).fetchall())

            position, head = fetch(LAG_SQL, ())[0]
            probe(self._summary, fetch, "postgresql")
            self._overlay = build_overlay(fetch, self._summary, head, position)
        finally:
            if not conn.broken:  # (a broken one is dropped by the pool)
                conn.execute("ROLLBACK")
        return self._overlay


def pg_rebuild(store: Any) -> int:
    """Rewrite the summary tables of PostgreSQL store ``store`` from the log, in one transaction on its writer that
    holds the append lock; returns the number of cards."""
    from ledger.storage.figures import has_figures
    from ledger.storage.pg_engine import PG_APPEND_LOCK
    from ledger.storage.summary_sql import UPSERT_SQL
    from ledger.storage.summary_stream import write_streamed
    from ledger.storage.summary_tail import POSITION

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
        conn.execute(f"UPDATE {POSITION} SET seq = (SELECT coalesce(max(seq), 0) FROM events)")
        return n

    return int(store._write_transaction(work, "cannot rebuild the cards summary of the ledger"))
