"""A store's connections stay bounded whatever the threads: one writer, at most READERS readers, on each backend.

Threads that come and go (a server's thread per HTTP connection, an agent's pool) append and read; the process's
open files on the ledger (SQLite) or its sessions on the server (PostgreSQL) are counted after each wave of threads.
Then the edges: a thread that waits too long for the writer or for a reader gets a one-line StoreError; a writer
left inside a transaction is replaced; a forked child opens its own connections and never touches its parent's.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from ledger.app.verify import verify_ledger
from ledger.domain.events import CardOpened
from ledger.errors import StoreError
from ledger.store.backends import open_store
from ledger.store.base import LogStore
from ledger.store.connections import READERS

pytestmark = pytest.mark.heavy

TS = datetime(2026, 1, 1, tzinfo=UTC)
#: SQLite: the writer and each reader hold the database file and its -wal; the -shm is mapped once per process;
#: the WAL checkpointer (after 250 commits) holds one more connection.
SQLITE_FILES = 2 * (1 + READERS + 1) + 1


def opened(card: str) -> list[CardOpened]:
    return [CardOpened(ts=TS, card_id=card)]


def ledger_files(path: str) -> int:
    """Open descriptors of this process on the ledger file, its -wal and its -shm."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(path):
                n += 1
        except OSError:
            continue  # closed in between
    return n


class Counter:
    """How many connections the store holds now: files (SQLite) or server sessions (PostgreSQL)."""

    def __init__(self, store: Any, backend: str) -> None:
        self.store = store
        self.backend = backend
        if backend == "postgresql":
            self.database = make_url(store.url).database
            self.admin = create_engine(os.environ["LEDGER_TEST_PG_URL"], poolclass=NullPool)

    def __call__(self) -> int:
        if self.backend == "sqlite":
            return ledger_files(self.store.path)
        with self.admin.connect() as conn:
            q = text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d AND pid <> pg_backend_pid()")
            return int(conn.execute(q, {"d": self.database}).scalar_one())

    def bound(self) -> int:
        from ledger.store.postgres import POOL_SIZE

        return SQLITE_FILES if self.backend == "sqlite" else POOL_SIZE


def test_threads_that_come_and_go_share_a_bounded_set_of_connections(backend_url: str, backend: str) -> None:
    store = open_store(backend_url)
    store.migrate()
    count = Counter(store, backend)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            stream = f"card:t{i}"
            store.append(stream, opened(f"t{i}"), 0)
            assert [e.version for e in store.read_stream(stream)] == [1]
            assert store.stream_exists(stream) and store.count() >= 1
            store.streams(prefix="card:t")
        except BaseException as e:
            errors.append(e)

    seen = []
    for wave in range(12):
        threads = [threading.Thread(target=work, args=(wave * 25 + j,)) for j in range(25)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seen.append(count())
    assert not errors, errors[:3]
    assert store.count() == 300
    # 300 threads, each gone once it appended and read: the connections are the store's, not the threads'
    # (readers open as concurrency needs them, up to the bound, and stay for the next threads).
    assert max(seen) <= count.bound(), seen
    assert verify_ledger(store).ok
    store.close()
    if backend == "sqlite":
        assert ledger_files(store.path) == 0  # type: ignore[attr-defined]


def hold_every_reader(store: Any, stack: Any) -> None:
    for _ in range(READERS):
        stack.enter_context(store._readers.connection())


def test_waiting_past_the_busy_timeout_for_a_connection_is_a_clear_error(backend_url: str, backend: str) -> None:
    from contextlib import ExitStack

    store = open_store(backend_url, busy_timeout_ms=300)
    store.migrate()
    store.append("card:x", opened("x"), 0)
    with ExitStack() as stack:
        hold_every_reader(store, stack)
        with pytest.raises(StoreError, match="busy timeout") as err:
            store.count()
        assert "\n" not in str(err.value)
    assert store.count() == 1  # released: reads go on

    holding, release = threading.Event(), threading.Event()

    def writer_kept_busy() -> None:
        with store._writer.locked():  # type: ignore[attr-defined]
            holding.set()
            release.wait(30)

    t = threading.Thread(target=writer_kept_busy)
    t.start()
    holding.wait(30)
    with pytest.raises(StoreError, match="another thread of this process kept writing"):
        store.append("card:x", opened("x"), 1)
    release.set()
    t.join()
    assert [e.version for e in store.append("card:x", opened("x"), 1)] == [2]
    store.close()


def test_a_writer_left_inside_a_transaction_is_replaced(db_path: Path) -> None:
    store = open_store(db_path)
    store.migrate()
    store.append("card:a", opened("a"), 0)
    stuck = store._write_dbapi()  # type: ignore[attr-defined]
    stuck.execute("BEGIN")  # as a ROLLBACK that failed would leave it
    assert [e.version for e in store.append("card:a", opened("a"), 1)] == [2]
    assert store._write_dbapi() is not stuck  # type: ignore[attr-defined]
    store.close()


def _child(store: LogStore, results: Any) -> None:
    try:
        got = store.append("card:child", opened("child"), 0)
        mine = id(store._write_dbapi())  # type: ignore[attr-defined]
        n = store.count()
        store.close()
        results.put(([e.version for e in got], n, mine))
    except BaseException as e:
        results.put(repr(e))


def test_a_forked_child_opens_its_own_sqlite_connections(db_path: Path) -> None:
    store = open_store(db_path)
    store.migrate()
    store.append("card:p", opened("p"), 0)
    parent_writer = store._write_dbapi()  # type: ignore[attr-defined]
    assert store.count() == 1  # a reader is open too
    results = mp.get_context("fork").Queue()
    child = mp.get_context("fork").Process(target=_child, args=(store, results))
    child.start()
    got = results.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0, got
    versions, n, child_writer = got
    assert versions == [1] and n == 2
    assert child_writer != id(parent_writer)  # the parent's object lives on in the child: a new one is elsewhere
    # The parent's connections were neither used nor closed by the child.
    assert store._write_dbapi() is parent_writer  # type: ignore[attr-defined]
    assert [e.version for e in store.append("card:p", opened("p"), 1)] == [2]
    assert store.count() == 3 and verify_ledger(store).ok
    store.close()
