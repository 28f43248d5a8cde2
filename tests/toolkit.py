"""Playing the test games through the real toolkit (arc_agi.Arcade, OFFLINE) with scripted and random agents."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arc_agi import Arcade, OperationMode
from arcengine import GameAction

ENV_DIR = Path(__file__).resolve().parent / "environment_files"
GAMES = ["cnt3", "clk2", "nobl", "nbas", "shrt", "wkex"]

logging.getLogger("arc_agi.scorecard").setLevel(logging.WARNING)
_quiet = logging.getLogger("tests.arcade")
_quiet.setLevel(logging.ERROR)


def arcade(env_dir: Path = ENV_DIR, **kwargs: Any) -> Arcade:
    """An OFFLINE Arcade over the test games, logging only errors."""
    return Arcade(operation_mode=OperationMode.OFFLINE, environments_dir=str(env_dir), logger=_quiet, **kwargs)


def step(env: Any, action: int, x: int | None = None, y: int | None = None) -> Any:
    """One toolkit step; RESET goes through ``step`` too, as agents send it."""
    if action == 6:
        return env.step(GameAction.ACTION6, data={"x": x if x is not None else 0, "y": y if y is not None else 0})
    return env.step(GameAction.from_id(action))


def random_action(rng: random.Random, env: Any) -> tuple[int, int | None, int | None]:
    """A random action among RESET (sometimes) and the game's available ones, with click coordinates."""
    r = rng.random()
    if r < 0.08:
        return 0, None, None
    avail = env.observation_space.available_actions if env.observation_space else [1]
    pool = [*list(avail), 1, 1] if 1 in avail else list(avail)
    a = rng.choice(pool)
    if a == 6:
        # Often near the test games' targets so clicks complete levels now and then.
        cells = [(2, 3), (5, 5), (1, 1), (6, 2)]
        if rng.random() < 0.5:
            cx, cy = rng.choice(cells)
            return 6, cx * 8 + rng.randint(0, 7), cy * 8 + rng.randint(0, 7)
        return 6, rng.randint(0, 63), rng.randint(0, 63)
    return a, None, None


def play_random_card(
    arc: Arcade,
    rng: random.Random,
    *,
    games: list[str] | None = None,
    steps: int = 60,
    check: Any = None,
    tags: list[str] | None = None,
) -> str:
    """Open a card, play several games (some twice, interleaved) at random, call ``check(card_id)`` now and
    then, and return the (still open) card id."""
    card_id = arc.open_scorecard(tags=tags)
    chosen = games or rng.sample(GAMES, rng.randint(1, 3))
    envs = []
    for g in chosen:
        envs.append(arc.make(g, scorecard_id=card_id, seed=rng.randint(0, 3)))
        if rng.random() < 0.3:  # a second guid on the same game and card
            envs.append(arc.make(g, scorecard_id=card_id, seed=rng.randint(0, 3)))
    for i in range(steps):
        env = rng.choice(envs)
        a, x, y = random_action(rng, env)
        step(env, a, x, y)
        if check is not None and i % 17 == 0:
            check(card_id)
    return card_id


@dataclass
class RecordedRun:
    """One recorded single-game card: its file's lines, and the toolkit's scorecard after each line."""

    card: str
    name: str
    lines: list[bytes]
    after: list[str]


def record_runs(root: Path, n: int, rng: random.Random) -> list[RecordedRun]:
    """``n`` single-game cards played at random with ``save_recording``: the toolkit writes ``root/<card>/*.jsonl``."""
    arc = arcade(recordings_dir=str(root))
    runs = []
    for i in range(n):
        card = arc.open_scorecard()
        game = ["cnt3", "clk2", "nobl"][i % 3]
        env = arc.make(game, scorecard_id=card, save_recording=True, include_frame_data=i % 2 == 0)
        after = [arc.get_scorecard(card).model_dump_json()]
        for _ in range(rng.randint(4, 14)):
            a, x, y = random_action(rng, env)
            step(env, a, x, y)
            after.append(arc.get_scorecard(card).model_dump_json())
        (f,) = (root / card).glob("*.jsonl")
        lines = f.read_bytes().splitlines(keepends=True)
        assert len(lines) == len(after)
        runs.append(RecordedRun(card, f.name, lines, after))
    return runs
