"""Soak tests of the long-lived processes, at CI sizes (``scripts/bench_soak.py`` runs them at full size).

- ``ledger serve``, a real subprocess on 127.0.0.1, driven by agent threads over REST (most requests on a new TCP
  connection, so a new server thread each): open descriptors, threads and resident memory read from ``/proc/PID``
  stay flat, under the default open-file limit and under ``ulimit -n 256``; every card the server closed with 200
  exports exactly as the close answer.
- The same with the disk filling up under it (a small tmpfs): the requests the ledger could not record are answered
  503, their cards 500 from then on, never a 200; once space is back, new cards are recorded again.
- One process with a ledger attached to an Arcade, cards played by threads that come and go; then ``ledger view``
  over that ledger for many page loads. Descriptors flat in both.

Bounds (the figures of one run are in docs/figures.md): after the first fifth of a run (the store's readers and
the WAL checkpointer open as they are first needed, Python's allocator grows its arenas), descriptors do not grow
(:data:`FD_GROWTH`) and stay within :data:`FD_OPENED` of the first reading, threads stay under
:data:`THREADS_MAX` (a bound set by the agents' concurrency), and memory grows by at most :data:`RSS_GROWTH_KB`.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Ledger
from tests import soak_driver as sd
from tests import toolkit
from tests.test_disk_faults import fill, tmpfs

pytestmark = pytest.mark.heavy

REQUESTS = 1500
AGENTS = 4
#: Descriptors: no growth (the busiest moment of the run's last third opens at most this many more than that of its
#: first third), and never more than FD_OPENED above what the process had open at the run's first reading: the
#: writer and up to 4 readers (each its file, WAL and shared memory), the listening socket, the agents' connections
#: in flight, the toolkit's game files.
FD_GROWTH = 4
FD_OPENED = 33
#: Server threads: per agent the one answering it and the previous one still exiting, plus the main thread, the
#: WAL checkpointer and two to spare.
THREADS_MAX = 2 * AGENTS + 4
RSS_GROWTH_KB = 12_000
ATTACHED_CARDS = 200
VIEW_LOADS = 1000


def warm(samples: list[sd.Sample]) -> list[sd.Sample]:
    """The samples after the first fifth of the run."""
    last = samples[-1].done
    return [s for s in samples if s.done >= last // 5]


def assert_flat(samples: list[sd.Sample], *, threads: int | None = None) -> None:
    steady = warm(samples)
    assert len(steady) >= 5, samples
    third = max(1, len(steady) // 3)
    early, late = max(s.fds for s in steady[:third]), max(s.fds for s in steady[-third:])
    opened = max(s.fds for s in steady) - samples[0].fds
    assert late <= early + FD_GROWTH and opened <= FD_OPENED, [s.fds for s in samples]
    assert steady[-1].rss_kb - steady[0].rss_kb <= RSS_GROWTH_KB, [s.rss_kb for s in samples]
    if threads is not None:
        assert max(s.threads for s in samples) <= threads, [s.threads for s in samples]


@pytest.mark.parametrize("nofile", [None, 256], ids=["default-limit", "ulimit-256"])
def test_serve_stays_flat_and_every_card_it_closed_is_in_the_ledger(tmp_path: Path, nofile: int | None) -> None:
    db = str(tmp_path / "served.sqlite")
    server = sd.start_serve(db, nofile=nofile)
    try:
        run = sd.drive_serve(server.pid, server.port, requests=REQUESTS, agents=AGENTS, seed=1)
    finally:
        code, err = server.stop()
    assert code == 130, err[-2000:]
    assert "Traceback" not in err and "answered 5" not in err
    assert run.requests >= REQUESTS
    assert all(status < 500 for c in run.cards for _, status in c.statuses), [c.errors for c in run.cards]
    assert_flat(run.samples, threads=THREADS_MAX)
    assert all(c.close_status == 200 for c in run.cards)
    assert sd.closed_cards_match(db, run.cards) == []


class DiskFills:
    """Fills the ledger's small filesystem a third of the way in, frees it once a request was refused."""

    def __init__(self, folder: Path, requests: int) -> None:
        self.folder = folder
        self.requests = requests
        self.ballast: Path | None = None
        self.freed_at: int | None = None

    def __call__(self, card: sd.Card, sent: int) -> bool:
        if self.ballast is None and self.freed_at is None and sent >= self.requests // 3:
            self.ballast = fill(self.folder)
        refused = any(e.get("error") == "LEDGER_NOT_RECORDED" for e in card.errors if isinstance(e, dict))
        if self.ballast is not None and refused:
            self.ballast.unlink()
            self.ballast, self.freed_at = None, sent
        # Go on until the disk was full, refused, and freed, and some cards were played after that.
        return self.freed_at is None and sent < 6 * self.requests


def test_serve_on_a_disk_that_fills_up_never_answers_200_for_what_it_did_not_record(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "48m") as folder:
        db = str(folder / "served.sqlite")
        fault = DiskFills(folder, REQUESTS)
        server = sd.start_serve(db)
        try:
            run = sd.drive_serve(server.pid, server.port, requests=REQUESTS, agents=AGENTS, seed=2, on_card=fault)
            # Once the disk has space again, new cards are recorded: a short run of its own after the fault (the
            # cards in flight when the ballast went may all have been refused already).
            again = sd.drive_serve(server.pid, server.port, requests=60, agents=1, seed=3)
        finally:
            code, err = server.stop()
        assert code == 130, err[-2000:]
        assert fault.freed_at is not None, "the ledger never refused a write on a full disk"
        refused = [c for c in run.cards if c.errors]
        assert refused
        for c in refused:
            first = c.errors[0]
            assert first["error"] == "LEDGER_NOT_RECORDED" and "not recorded" in first["message"]
            assert "database or disk is full" in first["message"]
            # From the refused request on, nothing about this card is answered 200: the close neither.
            told = [status for _, status in c.statuses]
            assert all(s >= 500 for s in told[told.index(503) :]), c.statuses
            assert all(e["error"] in ("LEDGER_NOT_RECORDED", "LEDGER_CARD_INCOMPLETE") for e in c.errors)
        assert "answered 503" in err
        # Every card the server closed with 200, before, during and after the fault, is exactly in the ledger.
        assert sd.closed_cards_match(db, run.cards) == []
        after = [c for c in again.cards if c.close_status == 200]
        refused_again = [e["message"] for c in again.cards for e in c.errors]
        assert after and not refused_again, refused_again[:2]
        assert sd.closed_cards_match(db, again.cards) == []
        with Ledger.open(db, readonly=True) as led:
            for c in refused:
                if c.card_id is not None and c.close_status == 500 and "retracted" in c.errors[-1]["message"]:
                    assert led.load_card(c.card_id).retracted_at is not None


@pytest.fixture(scope="module")
def attached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[sd.Sample], list[str]]]:
    """One process (this one) with a ledger attached to an Arcade: ATTACHED_CARDS cards, each played by a thread
    of its own, AGENTS at a time; (the ledger, samples of this process every tenth card, the card ids)."""
    db = str(tmp_path_factory.mktemp("attached") / "attached.sqlite")
    samples: list[sd.Sample] = []
    closes: dict[str, str] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()
    with Ledger.open(db) as led:
        arc = toolkit.arcade()
        capture = led.attach(arc)

        def play(i: int) -> None:
            try:
                rng = random.Random(i)
                card = arc.open_scorecard(tags=["attached"])
                env = arc.make(rng.choice(toolkit.GAMES), scorecard_id=card, seed=i)
                for _ in range(12):
                    a, x, y = toolkit.random_action(rng, env)
                    toolkit.step(env, a, x, y)
                doc = arc.close_scorecard(card)
                assert doc is not None
                with lock:
                    closes[card] = doc.model_dump_json()
            except BaseException as e:
                errors.append(e)

        samples.append(sd.sample(os.getpid(), 0))
        for start in range(0, ATTACHED_CARDS, AGENTS):
            threads = [threading.Thread(target=play, args=(i,)) for i in range(start, start + AGENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if (start + AGENTS) % (ATTACHED_CARDS // 20) == 0:
                samples.append(sd.sample(os.getpid(), start + AGENTS))
        capture.detach()
        assert not errors, errors[:3]
        for card, doc in closes.items():
            assert led.export(card) == doc
    yield db, samples, sorted(closes)


def test_an_attached_process_stays_flat_over_many_cards(attached: tuple[str, list[sd.Sample], list[str]]) -> None:
    _, samples, cards = attached
    assert len(cards) == ATTACHED_CARDS
    assert_flat(samples)


def test_view_stays_flat_over_many_page_loads(attached: tuple[str, list[sd.Sample], list[str]]) -> None:
    db, _, cards = attached
    server = sd.start_view(db)
    try:
        samples = sd.view_pages(server.pid, server.port, cards[:20], loads=VIEW_LOADS)
    finally:
        code, err = server.stop()
    assert code == 130 and "Traceback" not in err, err[-2000:]
    # The viewer answers each request on its own thread: the main thread, the request being served with the thread
    # that reads a cold card's events ahead (ledger/store/sqlite.py), and the request before it, still
    # finishing, at most; a thread left behind per request would grow past it.
    assert_flat(samples, threads=4)
