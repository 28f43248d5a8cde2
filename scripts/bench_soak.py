"""Soak figures of the long-lived processes (``ledger serve`` over REST, a process with a ledger attached, ``ledger
view``): open descriptors, threads and resident memory at the start, middle and end of a long run, from /proc/PID.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from pathlib import Path

from ledger import Ledger
from tests import soak_driver as sd
from tests import toolkit


def _figures(what: str, samples: list[sd.Sample], unit: str) -> list[str]:
    """Start (after the first fifth: connections and arenas opened as first needed), middle and end readings."""
    last = samples[-1].done
    steady = [s for s in samples if s.done >= last // 5]
    picks = [steady[0], steady[len(steady) // 2], steady[-1]]
    out = [f"{what}: after {', '.join(f'{s.done:,}' for s in picks)} {unit}:"]
    out.append(f"  open descriptors {' / '.join(str(s.fds) for s in picks)} (max {max(s.fds for s in samples)})")
    out.append(
        f"  threads          {' / '.join(str(s.threads) for s in picks)} (max {max(s.threads for s in samples)})"
    )
    rss = " / ".join(f"{s.rss_kb / 1024:.1f}" for s in picks)
    out.append(f"  RSS MB           {rss} (growth {(picks[-1].rss_kb - picks[0].rss_kb) / 1024:+.1f} MB)")
    return out


def _serve(folder: Path, requests: int) -> list[str]:
    db = str(folder / "served.sqlite")
    server = sd.start_serve(db, nofile=256)
    try:
        run = sd.drive_serve(server.pid, server.port, requests=requests, agents=4, samples=40)
    finally:
        code, _ = server.stop()
    errors = sum(1 for c in run.cards for _, status in c.statuses if status >= 500)
    wrong = sd.closed_cards_match(db, run.cards)
    closed = sum(c.close_status == 200 for c in run.cards)
    return [
        f"serve (ulimit -n 256): {run.requests:,} requests, {len(run.cards):,} cards, {run.seconds:.0f} s "
        f"({run.requests / run.seconds:.0f} requests/s), exit {code}",
        f"  5xx answers {errors}; cards closed 200: {closed:,}, of which exported differently: {len(wrong)}",
        *_figures("serve", run.samples, "requests"),
    ]


def _attached(folder: Path, cards: int) -> tuple[list[str], str, list[str]]:
    db = str(folder / "attached.sqlite")
    samples: list[sd.Sample] = []
    ids: list[str] = []
    lock = threading.Lock()
    t0 = time.perf_counter()
    with Ledger.open(db) as led:
        arc = toolkit.arcade()
        capture = led.attach(arc)

        def play(i: int) -> None:
            rng = random.Random(i)
            card = arc.open_scorecard(tags=["bench"])
            env = arc.make(rng.choice(toolkit.GAMES), scorecard_id=card, seed=i)
            for _ in range(12):
                toolkit.step(env, *toolkit.random_action(rng, env))
            arc.close_scorecard(card)
            with lock:
                ids.append(card)

        samples.append(sd.sample(os.getpid(), 0))
        for start in range(0, cards, 4):
            threads = [threading.Thread(target=play, args=(i,)) for i in range(start, start + 4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if (start + 4) % max(4, cards // 40) == 0:
                samples.append(sd.sample(os.getpid(), start + 4))
        capture.detach()
    seconds = time.perf_counter() - t0
    head = f"attached process: {len(ids):,} cards (12 steps each, a thread per card, 4 at a time), {seconds:.0f} s"
    return [head, *_figures("attached", samples, "cards")], db, sorted(ids)


def _view(db: str, cards: list[str], loads: int) -> list[str]:
    server = sd.start_view(db)
    t0 = time.perf_counter()
    try:
        samples = sd.view_pages(server.pid, server.port, cards[:20], loads=loads, samples=40)
    finally:
        server.stop()
    seconds = time.perf_counter() - t0
    head = f"view: {loads:,} page loads (cards list, card pages and their JSON, compare), {seconds:.0f} s"
    return [head, *_figures("view", samples, "page loads")]


def run(quick: bool) -> list[str]:
    requests, cards, loads = (2_000, 200, 500) if quick else (100_000, 2_000, 10_000)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        out = _serve(folder, requests)
        attached, db, ids = _attached(folder, cards)
        return out + attached + _view(db, ids, loads)
