"""The search's game states (ledger/toolkit/game_states.py): every test game is copied by pickle, not deep-copied, and
equal states get one fingerprint whichever objects hold their strings (a copy holds fresh ones where the game held
its code's constants or its classes' names, as arcengine's default level name ``'Level'`` is).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ledger.toolkit import game_files
from ledger.toolkit.game_states import Choice, Engine, answer_signature
from tests.harness_recorder import HARNESS_GAMES, game_dir

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


#: A game that keeps the last action it was sent (a GameAction, which pickle cannot find by value) and whose levels
#: are equal, distinct objects (kept once by content, named by one digest object).
KEEPS = """
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite


class Keep(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self.last = GameAction.RESET
        levels = [Level(sprites=[Sprite(pixels=[[3]], name="p", x=0, y=0)], grid_size=(8, 8)) for _ in range(3)]
        super().__init__(game_id="keep", levels=levels, camera=Camera(width=8, height=8), available_actions=[1, 2])

    def step(self) -> None:
        self.last = self.action.id
        if self.action.id == GameAction.ACTION2:
            self.next_level()
        self.complete_action()
"""


def test_a_game_that_keeps_its_last_action_and_equal_levels_is_copied_by_pickle(tmp_path: Path) -> None:
    from arcengine import ActionInput, GameAction

    game = _start(game_dir(tmp_path, "keep", KEEPS))
    engine = Engine(game)
    assert engine.fast
    for a in (1, 2, 1, 2, 1):
        fp, snap = engine.freeze(game)
        assert engine.freeze(engine.thaw(snap))[0] == fp, a
        result = engine.step(_Node(fp, snap), Choice(a))
        assert result is not None
        game.perform_action(ActionInput(id=GameAction.from_id(a)), raw=True)
        assert engine.freeze(game)[0] == result[1], a
    assert engine.thaw(engine.freeze(game)[1]).last is GameAction.ACTION1


#: A game that draws a step bar from arcengine's own action count, as cd82, cn04, m0r0 and r11l do.
COUNTS = """
from arcengine import ARCBaseGame, Camera, Level, Sprite


class Cnts(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self.left = 8
        level = Level(sprites=[Sprite(pixels=[[3] * 8], name="bar", x=0, y=0)], grid_size=(8, 8))
        super().__init__(game_id="cnts", levels=[level], camera=Camera(width=8, height=8), available_actions=[1])

    def step(self) -> None:
        self.left = max(0, 8 - self._action_count)
        self.current_level.get_sprites_by_name("bar")[0].pixels[0, self.left :] = 0
        self.complete_action()
"""


def test_a_game_that_reads_its_action_count_is_copied_with_it(tmp_path: Path) -> None:
    from arcengine import ActionInput, GameAction

    game = _start(game_dir(tmp_path, "cnts", COUNTS))
    engine = Engine(game)
    assert engine.fast
    answers = []
    for _ in range(4):
        fp, snap = engine.freeze(game)
        result = engine.step(_Node(fp, snap), Choice(1))
        assert result is not None
        resp = game.perform_action(ActionInput(id=GameAction.ACTION1), raw=True)
        # The copy draws the bar the game draws, and is in the game's state after it.
        assert result[0] == answer_signature(resp)
        assert engine.freeze(game)[0] == result[1]
        answers.append(game.left)
    assert answers == [7, 6, 5, 4]


#: A game that keeps sets (as wa30 does): built by adds and removes, a set iterates in an order its history decided,
#: which an equal set made afresh (a copy's) need not share; one of them is held twice.
SETS = """
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite


class Sets(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self.walls = set()
        for i in range(64):
            self.walls.add((i * 7 % 64, i % 5))
        for i in range(0, 64, 3):
            self.walls.discard((i * 7 % 64, i % 5))
        self.also = self.walls
        self.seen = frozenset({"a", "b", "c"})
        level = Level(sprites=[Sprite(pixels=[[3]], name="p", x=0, y=0)], grid_size=(8, 8))
        super().__init__(game_id="sets", levels=[level], camera=Camera(width=8, height=8), available_actions=[1, 2])

    def step(self) -> None:
        # Either action leaves the same set, reached in another order.
        if self.action.id == GameAction.ACTION1:
            self.walls.add((99, 1))
            self.walls.discard((0, 0))
        else:
            self.walls.discard((0, 0))
            self.walls.add((99, 1))
        self.complete_action()
"""


def test_a_game_that_keeps_sets_is_copied_by_pickle_and_its_equal_sets_are_one_state(tmp_path: Path) -> None:
    game = _start(game_dir(tmp_path, "sets", SETS))
    engine = Engine(game)
    assert engine.fast and engine.extended
    fp, snap = engine.freeze(game)
    copy = engine.thaw(snap)
    assert copy.walls == game.walls and copy.also is copy.walls and copy.seen == game.seen  # type: ignore[attr-defined]
    assert type(copy.seen) is frozenset  # type: ignore[attr-defined]
    assert engine.freeze(copy)[0] == fp
    node = _Node(fp, snap)
    one, two = engine.step(node, Choice(1)), engine.step(node, Choice(2))
    assert one is not None and two is not None
    assert one[1] == two[1] != fp


#: A game whose state holds functions made at run time (as tn36's and lf52's do): a helper keeps lambdas over
#: itself, and the game a lambda over the game; a copy's must act on the copy.
CLOSURES = """
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite


def shift(n):
    return lambda v: v + n


class Mover:
    def __init__(self, game):
        self.x = 0
        self.moves = [lambda: setattr(self, "x", self.x + 1), lambda: setattr(self, "x", self.x - 1)]
        self.scale = shift(2)
        self.read = lambda: game.player.x
        self.kind = shift


class Clos(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self.player = Sprite(pixels=[[3]], name="p", x=0, y=0)
        self.mover = Mover(self)
        level = Level(sprites=[self.player], grid_size=(8, 8))
        super().__init__(game_id="clos", levels=[level], camera=Camera(width=8, height=8), available_actions=[1, 2])

    def step(self) -> None:
        self.mover.moves[0 if self.action.id == GameAction.ACTION1 else 1]()
        self.player.set_position(self.mover.scale(self.mover.x) % 8, 0)
        self.complete_action()
"""


def test_a_game_that_keeps_functions_made_at_run_time_is_copied_with_them(tmp_path: Path) -> None:
    from arcengine import ActionInput, GameAction

    game = _start(game_dir(tmp_path, "clos", CLOSURES))
    engine = Engine(game)
    assert engine.fast and engine.extended
    for a in (1, 1, 2, 1):
        fp, snap = engine.freeze(game)
        copy = engine.thaw(snap)
        copy.mover.moves[0]()  # type: ignore[attr-defined]
        # The copy's lambdas act on the copy: the game is untouched.
        assert copy.mover.x == game.mover.x + 1 and engine.freeze(game)[0] == fp  # type: ignore[attr-defined]
        assert copy.mover.kind is game.mover.kind  # type: ignore[attr-defined]
        copy.player.set_position(5, 0)  # type: ignore[attr-defined]
        assert copy.mover.read() == 5 and game.mover.read() == game.player.x != 5  # type: ignore[attr-defined]
        result = engine.step(_Node(fp, snap), Choice(a))
        assert result is not None
        resp = game.perform_action(ActionInput(id=GameAction.from_id(a)), raw=True)
        assert result[0] == answer_signature(resp) and engine.freeze(game)[0] == result[1]


class _Node:
    def __init__(self, fp: bytes, game: object) -> None:
        self.fp, self.game = fp, game


def _start(info: game_files.GameInfo) -> object:
    from ledger.toolkit.seeds import start_game

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
    game = _start(game_dir(tmp_path, "strs", STRINGS))
    engine = Engine(game)
    assert engine.fast
    fp, snap = engine.freeze(game)
    node = _Node(fp, snap)
    same, made = engine.step(node, Choice(1)), engine.step(node, Choice(2))
    assert same is not None and made is not None
    assert same[0] == made[0] and same[1] == made[1]
