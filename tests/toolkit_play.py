"""Play cards through whichever arc-agi is importable (run by tests/test_calculators.py under each published
release, see tests/toolkit_versions.py), OFFLINE with the toolkit's own recordings, and write what that toolkit
says: ``expected.json`` maps each card id to its ``get_scorecard(card).model_dump_json()`` and names the release.

    python tests/toolkit_play.py OUT SEED CARDS

Cards over the bundled demo games (``OUT/demo/<card>/``) and the tests' games (``OUT/tests/<card>/``): several
games, plays and guids per card, level resets, levels completed in few and in many actions, and actions after
GAME_OVER or WIN (answered with empty frames: before 0.9.6 the toolkit counted them on the card).
"""

from __future__ import annotations

import json
import logging
import random
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from arc_agi import Arcade, OperationMode
from arcengine import GameAction

ROOT = Path(__file__).resolve().parent.parent
GAME_DIRS = {
    "demo": (ROOT / "ledger" / "capture" / "demo_games", ["dm01", "dm02"]),
    "tests": (ROOT / "tests" / "environment_files", ["cnt3", "clk2", "nobl", "nbas", "shrt", "wkex"]),
}
# Click cells where the tests' and demo games put targets, so clicks complete levels now and then.
TARGETS = [(2, 3), (5, 5), (1, 1), (6, 2), (5, 1), (1, 5)]


def _act(env: Any, rng: random.Random) -> None:
    obs = env.observation_space
    ended = obs is not None and obs.state.name in ("GAME_OVER", "WIN")
    if (ended and rng.random() < 0.6) or rng.random() < 0.06:
        env.step(GameAction.RESET)
        return
    avail = list(obs.available_actions) if obs is not None and obs.available_actions else [1]
    a = rng.choice([*avail, *([1, 1] if 1 in avail else [])])
    if a == 6:
        cx, cy = rng.choice(TARGETS) if rng.random() < 0.6 else (rng.randint(0, 7), rng.randint(0, 7))
        env.step(GameAction.ACTION6, data={"x": cx * 8 + rng.randint(0, 7), "y": cy * 8 + rng.randint(0, 7)})
    else:
        env.step(GameAction.from_id(a))


def play(out: Path, seed: int, cards: int) -> dict[str, str]:
    quiet = logging.getLogger("toolkit_play")
    quiet.setLevel(logging.ERROR)
    expected: dict[str, str] = {}
    rng = random.Random(seed)
    for name, (games_dir, games) in GAME_DIRS.items():
        arc = Arcade(
            operation_mode=OperationMode.OFFLINE,
            environments_dir=str(games_dir),
            recordings_dir=str(out / name),
            logger=quiet,
        )
        for _ in range(cards):
            card = arc.open_scorecard()
            envs = []
            for g in rng.sample(games, rng.randint(1, len(games))):
                envs.append(arc.make(g, scorecard_id=card, seed=rng.randint(0, 3), save_recording=True))
                if rng.random() < 0.3:  # a second guid on the same game and card
                    envs.append(arc.make(g, scorecard_id=card, seed=rng.randint(0, 3), save_recording=True))
            for _ in range(rng.randint(10, 90)):
                _act(rng.choice(envs), rng)
            expected[card] = arc.get_scorecard(card).model_dump_json()
    return expected


def main() -> None:
    out, seed, cards = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    expected = play(out, seed, cards)
    body = {"version": metadata.version("arc-agi"), "cards": expected}
    (out / "expected.json").write_text(json.dumps(body), encoding="utf-8")


if __name__ == "__main__":
    main()
