"""The capture scenarios, in-process, under whichever arc-agi release this Python imports (tests/test_toolkit_eras.py).

``python -m tests.era_driver DIR`` runs every scenario and prints one JSON object: per scenario, ``pairs`` (a list
of ``[what, ledger's JSON, toolkit's JSON]`` for the parent to compare) and ``facts`` (what else it checks), and
``version``. Scenarios: ``attach`` (OFFLINE: plays, RESETs, level completions, GAME_OVER, several plays and guids,
actions after the end; the open card and the closed one), ``close`` (the close reasons the release's own
auto-close rules give) and ``import`` (the release's own recordings imported).
"""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger import Ledger
from ledger.toolkit import arc_adapter
from tests import toolkit

Pairs = list[list[str]]


def scripted(arc: Any, card: str) -> None:
    """Two level completions, a level RESET, GAME_OVER and actions after it, a WIN, a RESET after the WIN."""
    env = arc.make("cnt3", scorecard_id=card)
    for a in [1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 1, 3, 1, 1, 0, 0, 1]:
        toolkit.step(env, a)
    clicks = arc.make("clk2", scorecard_id=card)
    for x, y in [(0, 0), (20, 28), (44, 44), (44, 44), (1, 1)]:
        toolkit.step(clicks, 6, x, y)
    toolkit.step(clicks, 0)
    toolkit.step(clicks, 6, 20, 28)


def attach(tmp: Path) -> dict[str, Any]:
    pairs: Pairs = []
    with Ledger.open(tmp / "attach.sqlite") as led:
        arc = toolkit.arcade()
        led.attach(arc)
        cards = []
        card = arc.open_scorecard(tags=["scripted"])
        scripted(arc, card)
        cards.append(card)
        for seed in range(3):
            cards.append(toolkit.play_random_card(arc, random.Random(seed), steps=50))
        for c in cards:
            pairs.append([f"open {c}", led.export(c), arc.get_scorecard(c).model_dump_json()])
        for c in cards:
            closed = arc.close_scorecard(c).model_dump_json()
            pairs.append([f"closed {c}", led.export(c), closed])
    return {"pairs": pairs, "facts": {}}


def close(tmp: Path) -> dict[str, Any]:
    with Ledger.open(tmp / "close.sqlite") as led:
        arc = toolkit.arcade()
        led.attach(arc)
        mgr = arc.scorecard_manager
        idle, old, explicit = arc.open_scorecard(), arc.open_scorecard(), arc.open_scorecard()
        for c in (idle, old, explicit):
            toolkit.step(arc.make("cnt3", scorecard_id=c), 1)
        now = datetime.now(UTC)
        mgr.scorecards[idle].last_update = now - timedelta(minutes=61)
        mgr.scorecards[old].open_at = now - timedelta(days=8)
        # What the toolkit's own stale-card sweep closes, at this release:
        stale = sorted(mgr.get_stale_cards())
        for c in stale:
            mgr.close_scorecard(c, None)
        arc.close_scorecard(explicit)
        reasons = {"idle": idle, "old": old, "explicit": explicit}
        facts = {
            "swept": sorted(k for k, v in reasons.items() if v in stale),
            "reasons": {k: led.load_card(v).close_reason for k, v in reasons.items() if v in stale or k == "explicit"},
        }
    return {"pairs": [], "facts": facts}


class _Recording:
    """An Arcade whose ``make`` records (``save_recording=True``), for :func:`scripted`."""

    def __init__(self, arc: Any) -> None:
        self.arc = arc

    def make(self, *args: Any, **kwargs: Any) -> Any:
        return self.arc.make(*args, save_recording=True, **kwargs)


def import_(tmp: Path) -> dict[str, Any]:
    from ledger.imports.importing import import_recordings

    rec = tmp / "rec"
    arc = toolkit.arcade(recordings_dir=str(rec))
    expected = {}
    rng = random.Random(7)
    for i in range(4):
        card = arc.open_scorecard()
        envs = [arc.make(g, scorecard_id=card, save_recording=True) for g in rng.sample(toolkit.GAMES, 2)]
        for _ in range(40):
            env = rng.choice(envs)
            toolkit.step(env, *toolkit.random_action(rng, env))
        if i == 0:
            scripted_rec = arc.open_scorecard()
            scripted(_Recording(arc), scripted_rec)
            expected[scripted_rec] = arc.get_scorecard(scripted_rec).model_dump_json()
        expected[card] = arc.get_scorecard(card).model_dump_json()
    with Ledger.open(tmp / "import.sqlite") as led:
        # The release is stated, as `ledger import --calculator` does (a file does not say which one wrote it).
        s = import_recordings(led, [rec], environments=toolkit.ENV_DIR, calculator=arc_adapter.installed_version())
        problems = [str(p) for p in s.problems]
        pairs = [[f"imported {c}", led.export(c), want] for c, want in expected.items()]
    return {"pairs": pairs, "facts": {"exit_code": s.exit_code, "problems": problems}}


SCENARIOS = {"attach": attach, "close": close, "import": import_}

if __name__ == "__main__":
    folder = Path(sys.argv[1])
    # One interpreter for all of them: starting one under each release is most of the time a scenario takes.
    out: dict[str, Any] = {name: run(folder) for name, run in SCENARIOS.items()}
    out["version"] = arc_adapter.installed_version()
    print(json.dumps(out))
