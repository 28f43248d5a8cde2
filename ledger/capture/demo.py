"""``ledger demo``: two bundled arcengine games played through the real toolkit, OFFLINE, ledger attached."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.errors import MissingExtra

if TYPE_CHECKING:
    from ledger.store.cards import CardRepository

DEMO_GAMES = Path(__file__).resolve().parent / "demo_games"


def quiet_toolkit_logger(name: str) -> logging.Logger:
    """A logger for ``Arcade`` that shows warnings only (the toolkit logs every step at INFO on stdout)."""
    logging.getLogger("arc_agi.scorecard").setLevel(logging.WARNING)
    log = logging.getLogger(name)
    log.setLevel(logging.WARNING)
    return log


def run_demo(repository: CardRepository, *, seed: int = 0) -> str:
    from ledger.toolkit.game_files import game_action, missing

    if (problem := missing()) is not None:  # the arc extra (tests/test_interrupt_and_extras.py)
        raise MissingExtra(f"the demo needs the ARC toolkit ({problem}): pip install 'arc-scorecard-ledger[arc]'")
    from ledger.capture.capture import attach
    from ledger.toolkit.arc_adapter import offline_arcade

    rng = random.Random(seed)
    arcade = offline_arcade(str(DEMO_GAMES), logger=quiet_toolkit_logger("ledger.demo.arcade"))
    capture = attach(repository, arcade)
    try:
        card_id = arcade.open_scorecard(tags=["demo"], source_url="https://example.invalid/ledger-demo")
        # dm01: level 1 with a wasted move, a level reset, then level 2 with a few wasted moves.
        env = arcade.make("dm01", scorecard_id=card_id, seed=seed)
        for a in [1, 2, 1, 1]:
            env.step(game_action(a))
        env.step(game_action(1))
        env.step(game_action(0))  # level reset on level 2: one reset, one action
        for _ in range(rng.randint(1, 3)):
            env.step(game_action(2))
        for _ in range(4):
            env.step(game_action(1))
        # dm02: click the target of level 1 after a miss; give up on level 2.
        env2 = arcade.make("dm02", scorecard_id=card_id, seed=seed)
        env2.step(game_action(6), data={"x": 40, "y": 40})
        env2.step(game_action(6), data={"x": 12, "y": 12})
        for _ in range(3):
            env2.step(game_action(6), data={"x": rng.randint(0, 63), "y": rng.randint(0, 15)})
        arcade.close_scorecard(card_id)
    finally:
        capture.detach()
    return card_id


def viewer_commands(exe: str, db: str, card_id: str) -> list[str]:
    import shlex

    games = shlex.quote(str(DEMO_GAMES))
    return [
        f"{exe} --db {db} view --environments {games}",
        f"{exe} --db {db} bundle {card_id} --environments {games} -o ledger-demo-site",
    ]
