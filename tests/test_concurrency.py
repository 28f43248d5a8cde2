"""Many writers on one SQLite ledger: 8 agent processes, 8 agent threads on one Arcade, two writers on one card.

Each agent plays the real toolkit with the ledger attached. Afterwards every toolkit call an agent made is in
the log exactly once, in order (each call is one PlayStarted/ActionTaken/ActionIgnored/LevelReset event of its
guid), every chain verifies, and every card exports exactly the JSON its toolkit reported.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.domain.events import (
    ActionIgnored,
    ActionTaken,
    CardOpened,
    LevelReset,
    PlayStarted,
    card_stream,
    decode,
)
from ledger.errors import VersionConflict
from ledger.store.backends import open_store
from tests.child_agent import GAMES, Agent
from tests.toolkit import arcade

ROOT = Path(__file__).resolve().parent.parent
PROCESSES = 8
# Per process: enough that the eight contend for the write lock for the whole run.
ACTIONS = 2000
LEDGER_CLI = [sys.executable, "-c", "from ledger.cli import main; main()"]


def calls_by_guid(led: Ledger, card: str) -> dict[str, list[int]]:
    """The toolkit calls the log holds for each guid of a card (0 for a RESET), in log order."""
    out: dict[str, list[int]] = {}
    for row in led.store.read_stream(card_stream(card)):
        ev = decode(row.body)
        if isinstance(ev, PlayStarted | LevelReset):
            out.setdefault(ev.guid, []).append(0)
        elif isinstance(ev, ActionTaken | ActionIgnored):
            out.setdefault(ev.guid, []).append(ev.action)
    return out


def cli_reads(db: Path, rng: random.Random) -> tuple[int, list[str]]:
    """One `ledger cards --json` and, when there is a card, one `ledger export` of a random card."""
    problems = []
    r = subprocess.run([*LEDGER_CLI, "--db", str(db), "cards", "--json"], capture_output=True, text=True, cwd=ROOT)
    if r.returncode == 1 and r.stderr.startswith(f"Error: no ledger at {db} "):
        return 1, problems  # read commands never create it: the agents have not created it yet
    if r.returncode != 0 or r.stderr:
        problems.append(f"cards: exit {r.returncode}: {r.stderr.strip()}")
        return 1, problems
    ids = [c["card_id"] for c in json.loads(r.stdout)]
    if not ids:
        return 1, problems
    card = rng.choice(ids)
    r = subprocess.run([*LEDGER_CLI, "--db", str(db), "export", card], capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0 or r.stderr or json.loads(r.stdout)["card_id"] != card:
        problems.append(f"export {card}: exit {r.returncode}: {r.stderr.strip()}")
    return 2, problems


@pytest.mark.heavy
def test_eight_processes_one_ledger_file(tmp_path: Path) -> None:
    # The file does not exist yet: the eight agents (and the reader) open and create it at the same moment.
    db = tmp_path / "shared.sqlite"
    outs = [tmp_path / f"child{i}.json" for i in range(PROCESSES)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.child_agent", str(db), str(i), str(ACTIONS), str(outs[i])]
            + (["--close"] if i % 2 else []),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    rng = random.Random(0)
    reads, problems = 0, []
    while True:  # the reader: `ledger cards` / `ledger export` in a loop for as long as any agent plays
        n, p = cli_reads(db, rng)
        reads += n
        problems += p
        if all(proc.poll() is not None for proc in procs):
            break
    errors = [proc.stderr.read() for proc in procs]  # type: ignore[union-attr]
    assert [proc.returncode for proc in procs] == [0] * PROCESSES, errors
    assert errors == [""] * PROCESSES
    assert problems == []
    assert reads >= 1

    with Ledger.open(db) as led:
        report = verify_ledger(led.store)
        assert report.ok, report.errors
        results = [json.loads(o.read_text()) for o in outs]
        assert sorted(led.card_ids()) == sorted(r["card"] for r in results)
        card_events = 0
        for i, res in enumerate(results):
            card = res["card"]
            # Every toolkit call exactly once and in order, per guid.
            assert calls_by_guid(led, card) == res["guids"]
            assert sum(len(a) for a in res["guids"].values()) == ACTIONS + len(GAMES)
            assert led.export(card) == res["toolkit"]
            state = led.load_card(card, use_cache=False)
            assert state.closed == bool(i % 2)
            card_events += state.events
        # Nothing else in the log: the cards' events plus one shared baseline set.
        assert led.baseline_set_ids() and len(led.baseline_set_ids()) == 1
        assert report.events == card_events + 1 == led.store.count()
        print(f"\n{PROCESSES} processes appended {card_events} card events; reader ran {reads} CLI reads")


@pytest.mark.heavy
def test_eight_threads_sharing_one_arcade(tmp_path: Path) -> None:
    """The toolkit's swarm pattern: one Arcade, one card, one thread per game, while the CLI reads."""
    db = tmp_path / "swarm.sqlite"
    arc = arcade()
    with Ledger.open(db) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        games = [GAMES[i % len(GAMES)] for i in range(8)]
        agents = [Agent(arc.make(g, scorecard_id=card, seed=i), g, random.Random(i)) for i, g in enumerate(games)]
        errors: list[BaseException] = []
        steps = ACTIONS

        def run(agent: Agent) -> None:
            try:
                for _ in range(steps):
                    agent.act()
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(a,)) for a in agents]
        for t in threads:
            t.start()
        rng = random.Random(1)
        problems: list[str] = []
        while any(t.is_alive() for t in threads):
            problems += cli_reads(db, rng)[1]
        for t in threads:
            t.join()
        assert errors == []
        assert problems == []
        assert calls_by_guid(led, card) == {a.env._guid: a.actions for a in agents}
        toolkit = arc.get_scorecard(card).model_dump_json()
        assert led.export(card) == toolkit
        assert arc.close_scorecard(card).model_dump_json() == led.export(card)
        report = verify_ledger(led.store)
        assert report.ok, report.errors
        assert led.load_card(card, use_cache=False).events == report.events - 1  # + the baseline set


def test_two_writers_racing_on_one_card(db_path: Path) -> None:
    """Both read the card's last version, both append: one wins, the other gets VersionConflict, reloads, retries."""
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    stream = card_stream("race")
    seeder = open_store(str(db_path))
    seeder.migrate()
    seeder.append(stream, [CardOpened(ts=ts, card_id="race")], expected_version=0)
    seeder.append(stream, [PlayStarted(ts=ts, game_id="clk2-0000000b", guid="g")], expected_version=1)
    seeder.close()

    rounds = 150
    barrier = threading.Barrier(2)
    conflicts = [0, 0]
    wins_first_try = [0, 0]
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        store = open_store(str(db_path))
        try:
            for k in range(rounds):
                version = store.read_stream(stream)[-1].version
                barrier.wait()  # both writers now hold the same version: their first appends race
                ev = ActionTaken(
                    ts=ts,
                    game_id="clk2-0000000b",
                    guid="g",
                    action=6,
                    x=k,
                    y=w,
                    levels_completed=0,
                    state="NOT_FINISHED",
                )
                first = True
                while True:
                    try:
                        store.append(stream, [ev], expected_version=version)
                        break
                    except VersionConflict:
                        conflicts[w] += 1
                        first = False
                        version = store.read_stream(stream)[-1].version  # reload, retry
                wins_first_try[w] += first
                barrier.wait()
        except BaseException as e:  # reported below
            errors.append(e)
            barrier.abort()
        finally:
            store.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # Every round exactly one writer won at once and the other conflicted exactly once, then succeeded.
    assert sum(wins_first_try) == rounds
    assert sum(conflicts) == rounds
    with Ledger.open(db_path) as led:
        rows = led.store.read_stream(stream)
        marks = [(e.x, e.y) for e in map(decode, (r.body for r in rows)) if isinstance(e, ActionTaken)]
        assert sorted(marks) == [(k, w) for k in range(rounds) for w in (0, 1)]
        assert [r.version for r in rows] == list(range(1, 2 * rounds + 3))
        assert led.load_card("race").games["clk2-0000000b"][0].actions == 2 * rounds
        assert verify_ledger(led.store).ok
