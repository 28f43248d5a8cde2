"""The search's game states (ledger/toolkit/game_states.py): every test game is copied by pickle, not deep-copied, and
equal states get one fingerprint whichever objects hold their strings (a copy holds fresh ones where the game held
its code's constants or its classes' names, as arcengine's default level name ``'Level'`` is).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ledger.toolkit import game_files
from ledger.toolkit.game_states import Choice, Engine
from tests.harness_recorder import HARNESS_GAMES

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = (ROOT / "tests" / "environment_files", HARNESS_GAMES)
GAMES = sorted((g, i) for f in FOLDERS for g, i in game_files.scan_games(f).items())

#: A game whose one state can be held two ways: ``mode`` the same constant object as ``start``, or an equal string
#: made at run time.
STRINGS = """
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite


class Strs(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self.start = "walk"
        self.mode = "walk"
        level = Level(sprites=[Sprite(pixels=[[3]], name="p", x=0, y=0)], grid_size=(8, 8))
        super().__init__(game_id="strs", levels=[level], camera=Camera(width=8, height=8), available_actions=[1, 2])

    def step(self) -> None:
        self.mode = "walk" if self.action.id == GameAction.ACTION1 else "".join(["wa", "lk"])
        self.complete_action()
"""


class _Node:
    def __init__(self, fp: bytes, game: object) -> None:
        self.fp, self.game = fp, game


def _start(info: game_files.GameInfo) -> object:
    from ledger.toolkit.harness_search import start_game

    return start_game(info)


@pytest.mark.parametrize(("game_id", "info"), GAMES, ids=[g for g, _ in GAMES])
def test_every_test_game_is_copied_by_pickle_and_a_copy_steps_to_the_same_fingerprint(
    game_id: str, info: game_files.GameInfo
) -> None:
    game = _start(info)
    engine = Engine(game)
    assert engine.fast, game_id
    actions = sorted({int(a) for a in getattr(game, "_available_actions", [1, 2, 3, 4])} - {6}) or [1]
    rng = random.Random(game_id)
    for i in range(120):
        c = Choice(0) if i % 40 == 39 else Choice(rng.choice(actions))
        fp, snap = engine.freeze(game)
        # A copy is in the same state, and stays in it after the same action as the game.
        copy = engine.thaw(snap)
        assert engine.freeze(copy)[0] == fp, (game_id, i)
        result = engine.step(_Node(fp, snap), c)
        assert result is not None
        from arcengine import ActionInput, GameAction

        game.perform_action(ActionInput(id=GameAction.from_id(c.action)), raw=True)
        assert engine.freeze(game)[0] == result[1], (game_id, i, c)


def test_equal_strings_held_by_different_objects_are_one_state(tmp_path: Path) -> None:
    d = tmp_path / "strs"
    d.mkdir()
    (d / "metadata.json").write_text(json.dumps({"game_id": "strs-01"}))
    (d / "strs.py").write_text(STRINGS)
    game = _start(game_files.scan_games(tmp_path)["strs-01"])
    engine = Engine(game)
    assert engine.fast
    fp, snap = engine.freeze(game)
    node = _Node(fp, snap)
    same, made = engine.step(node, Choice(1)), engine.step(node, Choice(2))
    assert same is not None and made is not None
    assert same[0] == made[0] and same[1] == made[1]
