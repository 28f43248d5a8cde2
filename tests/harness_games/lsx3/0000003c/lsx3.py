"""Test game shaped like the public game ls20 and written the way the public games are: a 64x64 maze per level,
about 150 sprites each, seven levels, a player that moves one cell per action, an energy bar every move spends and
three lives (a level starts again when the energy runs out, GAME_OVER when the lives do).

Unlike lsx2 its state holds objects of classes defined in the game file itself (a HUD drawn by the camera that
reads the game, a tracker of the cells visited): the toolkit loads a game file as a module it does not register,
so such objects cannot be pickled by name. Like ls20's, its levels keep arcengine's default name, the string
``'Level'`` that is also the name of their class.
"""

import random

import numpy as np
from arcengine import ARCBaseGame, Camera, GameAction, Level, RenderableUserDisplay, Sprite

CELL = 4
SIZE = 64
ENERGY = 40
LIVES = 3
MOVES = {
    GameAction.ACTION1: (0, -1),
    GameAction.ACTION2: (0, 1),
    GameAction.ACTION3: (-1, 0),
    GameAction.ACTION4: (1, 0),
}


class Tracker:
    """The cells the player has stood on in this level (a move back onto one costs twice the energy)."""

    def __init__(self) -> None:
        self.seen: set[tuple[int, int]] = set()

    def visit(self, x: int, y: int) -> bool:
        new = (x, y) not in self.seen
        self.seen.add((x, y))
        return new


class Hud(RenderableUserDisplay):
    """Lives left, drawn in the top right corner; it reads the game it belongs to."""

    def __init__(self, game: "Lsx3") -> None:
        self.game = game

    def render_interface(self, frame: np.ndarray) -> np.ndarray:
        for i in range(self.game.lives):
            frame[1:3, SIZE - 3 - 3 * i : SIZE - 1 - 3 * i] = 8
        return frame


def _level(index: int) -> Level:
    rng = random.Random(2000 + index)
    cells = SIZE // CELL
    sprites = []
    for i in range(cells):
        for x, y in ((i, 0), (i, cells - 1), (0, i), (cells - 1, i)):
            sprites.append(Sprite(pixels=[[4] * CELL] * CELL, name="wall", x=x * CELL, y=y * CELL))
    taken = {(1, 1), (cells - 2, cells - 2), (2, 1), (1, 2)}
    while len(taken) < 4 + 60 + 4 * index:
        x, y = rng.randint(2, cells - 3), rng.randint(2, cells - 3)
        if (x, y) not in taken:
            taken.add((x, y))
            sprites.append(Sprite(pixels=[[4] * CELL] * CELL, name="wall", x=x * CELL, y=y * CELL))
    sprites.append(Sprite(pixels=[[3] * CELL] * CELL, name="goal", x=(cells - 2) * CELL, y=(cells - 2) * CELL))
    sprites.append(Sprite(pixels=[[9] * CELL] * CELL, name="player", x=CELL, y=CELL, layer=2))
    sprites.append(Sprite(pixels=[[11] * ENERGY], name="energy", x=2, y=1, layer=3, collidable=False))
    return Level(sprites=sprites, grid_size=(SIZE, SIZE))


class Lsx3(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self._energy = ENERGY
        self.lives = LIVES
        self.tracker = Tracker()
        super().__init__(
            game_id="lsx3",
            levels=[_level(i) for i in range(7)],
            camera=Camera(width=SIZE, height=SIZE, interfaces=[Hud(self)]),
            available_actions=[1, 2, 3, 4],
            seed=seed,
        )

    def on_set_level(self, level: Level) -> None:
        self._energy = ENERGY
        self.tracker = Tracker()

    def handle_reset(self) -> None:
        self.lives = LIVES
        super().handle_reset()

    def step(self) -> None:
        move = MOVES.get(self.action.id)
        if move is not None:
            player = self.current_level.get_sprites_by_name("player")[0]
            hit = self.try_move_sprite(player, move[0] * CELL, move[1] * CELL)
            self._energy -= 1 if self.tracker.visit(player.x, player.y) else 2
            bar = self.current_level.get_sprites_by_name("energy")[0]
            bar.pixels[0, :] = 11
            bar.pixels[0, max(self._energy, 0) :] = 0
            if any(s.name == "goal" for s in hit):
                self.next_level()
            elif self._energy <= 0:
                self.lives -= 1
                if self.lives <= 0:
                    self.lose()
                else:
                    self.level_reset()
        self.complete_action()
