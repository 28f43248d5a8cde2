"""SIGKILL at random moments of live capture (again and again on one ledger file) and of `ledger import`.

Each round forks an agent (tests.child_agent.kill_worker: cards opened, played on one or two games, closed or
abandoned) that reports every toolkit call once it returned, kills it after a random delay, reads everything it
reported, and checks: the ledger opens, verify passes, and every card is in the log as far as the agent saw it,
exporting exactly the toolkit's JSON at that point; at most the one call in flight is in the log beyond that.
The same file is used for every round, so each round also checks that nothing acknowledged in an earlier round
went missing, and that a ledger a killed writer left behind takes new writers.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.domain.events import (
    CARD_STREAM,
    ActionIgnored,
    ActionTaken,
    CardClosed,
    LevelReset,
    PlayStarted,
    card_stream,
    decode,
)
from ledger.imports.importing import import_recordings
from tests.child_agent import GAMES, Agent, import_worker, kill_worker
from tests.toolkit import arcade

pytestmark = pytest.mark.heavy

ROUNDS = 60
_PRIMARY = (PlayStarted, LevelReset, ActionTaken, ActionIgnored)


def run_and_kill(ctx: multiprocessing.context.BaseContext, db: Path, seed: int, delay: float) -> list[dict]:
    """Fork a worker, SIGKILL it ``delay`` seconds after its first report, return every line it reported."""
    report = db.with_name(f"round{seed}.jsonl")
    proc = ctx.Process(target=kill_worker, args=(str(db), seed, str(report)))  # type: ignore[attr-defined]
    proc.start()
    while proc.is_alive() and (not report.exists() or report.stat().st_size == 0):
        time.sleep(0.002)
    assert proc.is_alive(), f"the worker ended before its first report (exit {proc.exitcode})"
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert proc.exitcode == -signal.SIGKILL
    # Each line was written once its toolkit call returned; a line cut by the kill reports a call still in flight.
    lines = report.read_text().splitlines(keepends=True)
    return [json.loads(line) for line in lines if line.endswith("\n")]


def check_round(db: Path, acked: dict[str, dict], earlier: dict[str, int]) -> tuple[dict[str, int], int]:
    """Check the ledger after a kill; returns every card's event count and how many calls in flight were logged.

    ``acked`` holds the last line this round reported per card, ``earlier`` the event counts of the cards of
    earlier rounds (their writers are dead, so those streams must be exactly as they were).
    """
    in_flight = 0
    with Ledger.open(db) as led:
        report = verify_ledger(led.store)
        assert report.ok, report.errors
        counts = {s.stream.removeprefix(CARD_STREAM): s.count for s in led.store.streams(CARD_STREAM)}
        assert {c: counts.get(c) for c in earlier} == earlier
        for card, last in acked.items():
            rows = led.store.read_stream(card_stream(card))
            evs = [decode(r.body) for r in rows]
            calls = [i for i, e in enumerate(evs) if isinstance(e, _PRIMARY)]
            closed = [i for i, e in enumerate(evs) if isinstance(e, CardClosed)]
            if "closed" in last:
                assert len(closed) == 1 and closed[0] == len(evs) - 1
                assert led.export(card) == last["closed"]
                continue
            n = last["calls"]
            # The acknowledged calls are there; beyond them at most the call in flight (or the close in flight).
            assert n <= len(calls) <= n + 1
            assert len(closed) <= 1 and (not closed or len(calls) == n)
            cut = rows[calls[n]].seq - 1 if len(calls) > n else None
            if closed:
                cut = rows[closed[0]].seq - 1
            in_flight += cut is not None
            assert led.export(card, until=cut) == last["scorecard"]
    return counts, in_flight


def test_sigkill_at_random_moments(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("forkserver")
    # The forkserver imports the toolkit and the ledger once; each round's fork then starts in milliseconds.
    ctx.set_forkserver_preload(["tests.child_agent"])
    db = tmp_path / "killed.sqlite"
    counts: dict[str, int] = {}
    rng = random.Random(20261202)
    reported = in_flight = 0
    for seed in range(ROUNDS):
        lines = run_and_kill(ctx, db, seed, rng.uniform(0.0, 0.4))
        reported += len(lines)
        acked = {line["card"]: line for line in lines}
        counts, logged = check_round(db, acked, counts)
        in_flight += logged
    assert reported >= ROUNDS
    print(
        f"\n{ROUNDS} kills, {reported} acknowledged toolkit calls, {len(counts)} cards, {sum(counts.values())} card "
        f"events; {in_flight} kills landed after a commit and before the agent saw the result"
    )


# -- kills during `ledger import` ------------------------------------------------------------------------------

#: Kills spread over the import's lifetime; each round also verifies, re-imports and compares every card.
IMPORT_KILLS = 24


def make_recordings(folder: Path, cards: int = 24, steps: int = 150) -> None:
    """Real toolkit recordings (save_recording=True): ``cards`` cards of two games each, two of them with frames."""
    arc = arcade(recordings_dir=str(folder))
    rng = random.Random(7)
    for i in range(cards):
        card = arc.open_scorecard()
        agents = [
            Agent(
                arc.make(g, scorecard_id=card, seed=rng.randint(0, 3), save_recording=True, include_frame_data=i < 2),
                g,
                rng,
            )
            for g in GAMES
        ]
        for _ in range(steps):
            rng.choice(agents).act()
        arc.close_scorecard(card)


def first_half(src: Path, dst: Path) -> None:
    """The same recordings as they stood half-way through the run (same file names, first half of the lines)."""
    for f in src.rglob("*.jsonl"):
        lines = f.read_bytes().splitlines(keepends=True)
        out = dst / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"".join(lines[: len(lines) // 2]))


def card_states(db: Path) -> dict[str, tuple[int, str]]:
    """card id -> (events, export) of every card in the ledger; verify must pass."""
    with Ledger.open(db) as led:
        report = verify_ledger(led.store)
        assert report.ok, report.errors
        return {c: (led.load_card(c, use_cache=False).events, led.export(c)) for c in led.card_ids()}


def imported(db: Path, recordings: Path) -> dict[str, str]:
    with Ledger.open(db) as led:
        summary = import_recordings(led, [recordings])
    assert summary.exit_code == 0 and not summary.problems
    return {c.card_id: c.status for c in summary.cards}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Full and half-way recordings, and the reference ledgers: full import, half import, half then full."""
    root = tmp_path_factory.mktemp("recordings")
    make_recordings(root / "full")
    first_half(root / "full", root / "half")
    imported(root / "ref_full.sqlite", root / "full")
    imported(root / "ref_half.sqlite", root / "half")
    shutil.copy(root / "ref_half.sqlite", root / "ref_grown.sqlite")
    assert set(imported(root / "ref_grown.sqlite", root / "full").values()) == {"updated"}
    return {
        "root": root,
        "full": card_states(root / "ref_full.sqlite"),
        "half": card_states(root / "ref_half.sqlite"),
        "grown": card_states(root / "ref_grown.sqlite"),
    }


def kill_import(ctx: Any, db: Path, recordings: Path, delay: float, *, wait: bool = False) -> bool:
    """Run an import in a forked worker and SIGKILL it after ``delay`` s; False if it finished first."""
    proc = ctx.Process(target=import_worker, args=(str(db), str(recordings)))
    proc.start()
    proc.join(delay) if wait else time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):  # it finished (the forkserver already reaped it)
        os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert proc.exitcode in (0, -signal.SIGKILL)
    return proc.exitcode == -signal.SIGKILL


def test_sigkill_during_import(tmp_path: Path, recordings: dict[str, Any]) -> None:
    """Each card is one transaction: after a kill every card is whole (as before, or fully imported), never half;
    importing again completes it with no duplicates. Half the rounds import new cards, half grown ones."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.child_agent", "ledger.importer"])
    root = recordings["root"]
    # How long a whole import takes in a worker (fork, open, import): kills are spread over that time. The first
    # run also starts the forkserver, so the second one is timed.
    for run in ("warm-up", "timed"):
        t0 = time.perf_counter()
        assert not kill_import(ctx, tmp_path / f"{run}.sqlite", root / "full", 60.0, wait=True)
        lifetime = time.perf_counter() - t0
        assert card_states(tmp_path / f"{run}.sqlite") == recordings["full"]
    rng = random.Random(6)
    kills = rounds = partial = 0
    while kills < IMPORT_KILLS:
        rounds += 1
        assert rounds < 4 * IMPORT_KILLS, "the import kept finishing before the kill"
        grow = rounds % 2 == 0
        db = tmp_path / f"import{rounds}.sqlite"
        if grow:
            shutil.copy(root / "ref_half.sqlite", db)
        before, after = (recordings["half"] if grow else {}), recordings["grown" if grow else "full"]
        if not kill_import(ctx, db, root / "full", rng.uniform(0.2 * lifetime, lifetime)):
            continue
        kills += 1
        now = card_states(db) if db.exists() else {}
        done = {c for c, s in now.items() if s == after[c]}
        assert {c: s for c, s in now.items() if c not in done} == {c: before[c] for c in now if c not in done}
        assert set(before) <= set(now)
        partial += 0 < len(done) < len(after)
        statuses = imported(db, root / "full")
        assert {c for c, s in statuses.items() if s == "already imported"} == done
        assert card_states(db) == after
    print(
        f"\n{kills} kills during import in {rounds} rounds of {lifetime:.2f} s imports "
        f"({partial} with some cards done and others not)"
    )


@pytest.mark.parametrize(("durability", "synchronous"), [("normal", 1), ("full", 2)])
def test_what_each_durability_asks_of_sqlite(db_path: Path, durability: str, synchronous: int) -> None:
    """The Guarantees rest on these: WAL always; synchronous NORMAL (survives a killed process, a power cut may lose
    the last commits) by default, FULL (every commit on disk before it returns) with --durability full."""
    with Ledger.open(db_path, durability=durability) as led:  # type: ignore[arg-type]
        con = led.store._write_dbapi()
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert con.execute("PRAGMA synchronous").fetchone() == (synchronous,)
        assert con.execute("PRAGMA busy_timeout").fetchone() == (60_000,)
