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
from typing import TYPE_CHECKING, Any

from ledger.errors import StoreError
from ledger.storage.summary import SummaryKeeper
from ledger.storage.summary_pg import pg_reader_sql
from ledger.storage.summary_sql import pg, probe
from ledger.storage.summary_tail import LAG_SQL, POSITION_SQL, Overlay, build_overlay, catch_up

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine


def pg_catch_up(keeper: SummaryKeeper, conn: Any, *, wait: bool = True) -> int:
    """:func:`~ledger.storage.summary_tail.catch_up` on psycopg connection ``conn`` (not in autocommit mode).
    ``wait`` False: nothing when another session is catching up (it folds what was committed before it read)."""

    def fetch(sql: str, args: Any) -> list[Any]:
        return list(conn.execute(pg(sql), args).fetchall())

    def begin() -> int:
        probe(keeper, pg_reader_sql(conn), "postgresql")
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
    engine: Engine
    _summary: SummaryKeeper
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

        from ledger.storage.pg_engine import DB_ERRORS, reason

        try:
            with self.engine.connect() as sa_conn:
                conn = sa_conn.connection.driver_connection
                try:
                    return pg_catch_up(self._summary, conn, wait=wait)
                finally:
                    sa_conn.rollback()
        except (*DB_ERRORS, psycopg.Error) as e:
            raise StoreError(f"cannot update the cards summary of the ledger at {self.describe()}: {reason(e)}") from e

    def _follow(self) -> None:
        with contextlib.suppress(StoreError):
            self.catch_up_summary(wait=False)

    def summary_at_head(self) -> Overlay | None:
        """None once the summary tables reflect the log's head (caught up here when behind); for a read-only store
        that is behind, the :class:`Overlay` to answer from (nothing written)."""
        from ledger.storage.pg_engine import DB_ERRORS, reason

        try:
            with self.engine.connect() as conn:
                position, head = conn.exec_driver_sql(LAG_SQL).one()
                if position >= head:
                    return None
                if self.readonly:
                    return self._overlay_at(conn, head)
        except DB_ERRORS as e:
            if "summary_position" in str(e):  # an earlier revision, open read-only: its appends kept the rows
                return None
            raise StoreError(f"cannot read the ledger at {self.describe()}: {reason(e)}") from e
        self.catch_up_summary()
        return None

    def _overlay_at(self, conn: Connection, head: int) -> Overlay:
        if self._overlay is not None and self._overlay.head == head:
            return self._overlay
        conn.rollback()
        # One snapshot for the stored tables and the tail (a writer's catch-up may commit meanwhile).
        snap = conn.execution_options(isolation_level="REPEATABLE READ")
        with snap.begin():

            def fetch(sql: str, args: Any) -> list[Any]:
                return list(snap.exec_driver_sql(pg(sql), tuple(args)).fetchall())

            position, head = fetch(LAG_SQL, ())[0]
            probe(self._summary, fetch, "postgresql")
            self._overlay = build_overlay(fetch, self._summary, head, position)
        return self._overlay
