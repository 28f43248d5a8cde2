"""PostgreSQL under concurrency: many capturing processes, a reader tailing the log by ``seq``, concurrent opens.

``seq`` must be assigned in commit order: otherwise a transaction that took seq n and commits after the one that
took n+1 is skipped by a reader that already moved past n+1. Appends take a transaction-level advisory lock
before reading the head and drawing the sequence value, so the tailing reader must see every event exactly once.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.domain.events import CardOpened
from ledger.errors import StoreError
from ledger.store.backends import open_store
from ledger.store.base import LogStore
from ledger.store.postgres import PG_APPEND_LOCK
from tests.toolkit import arcade, play_random_card, step

pytestmark = pytest.mark.postgres

WRITERS = 8
CARDS_PER_WRITER = 2
STEPS_PER_CARD = 150


def capture_worker(url: str, seed: int, start: Any, results: Any) -> None:
    """One agent process: plays random cards through the real toolkit with the ledger attached."""
    try:
        arc = arcade()
        led = Ledger.open(url)
        led.attach(arc)
        rng = random.Random(seed)
        start.wait()
        cards = {}
        for _ in range(CARDS_PER_WRITER):
            card = play_random_card(arc, rng, steps=STEPS_PER_CARD)
            cards[card] = arc.close_scorecard(card).model_dump_json()
        led.close()
        results.put((seed, cards, None))
    except BaseException as e:
        results.put((seed, {}, repr(e)))
        raise


def test_eight_capturing_processes_and_a_tailing_reader(pg_url: str) -> None:
    Ledger.open(pg_url).close()  # the schema exists before the reader starts
    # fork: the children start with the toolkit already imported (spawn would re-import it 8 times); no thread
    # runs in this process yet, and each child opens its own connections.
    ctx = mp.get_context("fork")
    start = ctx.Barrier(WRITERS + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=capture_worker, args=(pg_url, 100 + i, start, results)) for i in range(WRITERS)]
    for p in procs:
        p.start()

    seen: list[tuple[int, str, int]] = []
    seen_while_writing = 0
    writers_done = threading.Event()
    reader_errors: list[BaseException] = []

    def tail() -> None:
        nonlocal seen_while_writing
        reader = open_store(pg_url)
        last = 0
        try:
            while True:
                final = writers_done.is_set()  # read once more after the writers are done: that read is complete
                for e in reader.scan(after_seq=last, batch=200):
                    seen.append((e.seq, e.stream, e.version))
                    last = e.seq
                if not final:
                    seen_while_writing = len(seen)
                    time.sleep(0.002)
                    continue
                return
        except BaseException as e:
            reader_errors.append(e)
        finally:
            reader.close()

    reader = threading.Thread(target=tail)
    reader.start()
    start.wait(timeout=120)
    out = [results.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    writers_done.set()
    reader.join(timeout=60)

    assert [err for _, _, err in out if err] == []
    assert [p.exitcode for p in procs] == [0] * WRITERS
    assert reader_errors == []

    store = open_store(pg_url)
    everything = [(e.seq, e.stream, e.version) for e in store.scan()]
    # Every event exactly once, in seq order, none skipped while the writers were still committing.
    assert seen == everything
    assert len({s for s, _, _ in seen}) == len(seen)
    assert seen_while_writing > 0
    per_stream: dict[str, list[int]] = {}
    for _, stream, version in seen:
        per_stream.setdefault(stream, []).append(version)
    assert all(vs == list(range(1, len(vs) + 1)) for vs in per_stream.values())
    cards = {c: doc for _, docs, _ in out for c, doc in docs.items()}
    assert len(cards) == WRITERS * CARDS_PER_WRITER
    assert len(per_stream) == len(cards) + 1  # every card, and the one baseline set they share
    rep = verify_ledger(store)
    assert rep.ok, rep.errors
    assert rep.events == len(everything) > WRITERS * CARDS_PER_WRITER * STEPS_PER_CARD
    store.close()
    with Ledger.open(pg_url) as led:
        assert {c: led.export(c) for c in cards} == cards


def test_concurrent_first_opens_create_the_schema_once(pg_url: str) -> None:
    n = 6
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def open_it() -> None:
        s = open_store(pg_url)
        try:
            barrier.wait()
            s.migrate()
        except BaseException as e:
            errors.append(e)
        finally:
            s.close()

    threads = [threading.Thread(target=open_it) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    s = open_store(pg_url)
    assert s.revision() == s.head_revision()
    assert s.missing_triggers() == []
    s.close()


def test_a_writer_blocked_past_the_busy_timeout_gets_a_clear_error(pg_url: str) -> None:
    Ledger.open(pg_url).close()
    store = open_store(pg_url, busy_timeout_ms=200)
    holder = create_engine(pg_url, poolclass=NullPool)
    ev = CardOpened(ts=datetime(2026, 1, 1, tzinfo=UTC), card_id="x")
    with holder.connect() as conn, conn.begin():
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_APPEND_LOCK})
        with pytest.raises(StoreError, match=r"cannot append to the ledger at .*lock timeout"):
            store.append("card:x", [ev], expected_version=0)
    assert store.count() == 0
    assert [e.version for e in store.append("card:x", [ev], expected_version=0)] == [1]
    store.close()
    holder.dispose()


def kill_sessions(admin: Any) -> int:
    """Terminate every other session on the test database, as a server restart or an idle timeout would."""
    with admin.connect() as conn:
        return conn.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ).scalar_one()


def test_capture_reads_and_copies_go_on_when_the_server_drops_connections(pg_url: str, tmp_path: Any) -> None:
    """Terminated backends: the next append reconnects (nothing lost, nothing doubled), so do reads and copies."""
    arc = arcade()
    admin = create_engine(pg_url, poolclass=NullPool)
    with Ledger.open(pg_url) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        for i, a in enumerate([1, 1, 2, 1, 0, 1, 1, 3]):
            if i % 3 == 1:
                assert kill_sessions(admin) >= 1
            step(env, a)  # raises CaptureError if the event was not recorded
        for _ in range(2):  # reads: a pooled connection the server closed is replaced before use
            assert led.export(card) == arc.get_scorecard(card).model_dump_json()
            assert kill_sessions(admin) >= 1
        assert verify_ledger(led.store).ok
        machine = arcade()
        with Ledger.open(tmp_path / "machine.sqlite") as src:
            src.attach(machine)
            other = machine.open_scorecard()
            menv = machine.make("wkex", scorecard_id=other)
            for a in [2, 2, 1]:
                step(menv, a)
            rows = src.store.read_stream(f"card:{other}")  # its baseline set is the team's, recorded at another ts
        assert len(rows) >= 3
        assert led.store.insert_copied(rows[:2]) == 2
        assert kill_sessions(admin) >= 1
        assert led.store.insert_copied(rows) == len(rows) - 2
        assert verify_ledger(led.store).ok
    admin.dispose()


def _append_in_child(store: LogStore, results: Any) -> None:
    try:
        got = store.append("card:child", [CardOpened(ts=datetime(2026, 1, 1, tzinfo=UTC), card_id="child")], 0)
        session = store._write_dbapi().info.backend_pid
        store.close()
        results.put(([e.version for e in got], session))
    except BaseException as e:
        results.put(repr(e))


def test_a_forked_child_does_not_touch_its_parents_connections(pg_url: str) -> None:
    store = open_store(pg_url)
    store.migrate()
    ev = CardOpened(ts=datetime(2026, 1, 1, tzinfo=UTC), card_id="p")
    store.append("card:p", [ev], expected_version=0)  # the parent now holds a connection for appends
    parent_session = store._write_dbapi().info.backend_pid
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    child = ctx.Process(target=_append_in_child, args=(store, results))
    child.start()
    versions, child_session = results.get(timeout=60)
    assert versions == [1]
    assert child_session != parent_session  # its own session, never its parent's socket
    child.join(timeout=60)
    assert child.exitcode == 0
    # The parent's own connection still works: the child opened its own and closed only that.
    assert [e.version for e in store.append("card:p", [ev], expected_version=1)] == [2]
    assert store._write_dbapi().info.backend_pid == parent_session
    assert verify_ledger(store).ok
    store.close()


def test_a_read_whose_pooled_connection_was_ended_after_the_pools_look_is_sent_again(pg_url: str) -> None:
    """The server's goodbye to a terminated backend can reach its socket after the pool looked at the idle connection
    and found nothing there: the read that then finds it lost is sent once more, on a new connection."""
    admin = create_engine(pg_url, poolclass=NullPool)
    with Ledger.open(pg_url) as led:
        store: Any = led.store
        assert store.max_seq() == 0  # a reader connection, now idle in the pool
        assert kill_sessions(admin) >= 1
        time.sleep(0.2)
        # The race, made certain: the pool takes the idle connection as usable, as it does when it looks too early.
        store._readers._usable = lambda conn: True
        assert store.max_seq() == 0 and store.count() == 0
    admin.dispose()
