"""Test game shaped like the public game ls20: a 64x64 maze per level, many sprites, a player that moves one cell
per action, an energy bar that every move spends (GAME_OVER when it runs out) and seven levels.

The state is what makes a game costly to copy and compare: about 150 sprites per level, each with its pixels, in
seven levels, plus the clean copies the engine keeps for level resets.
"""

import random

from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite

CELL = 4
SIZE = 64
ENERGY = 60
MOVES = {
    GameAction.ACTION1: (0, -1),
    GameAction.ACTION2: (0, 1),
    GameAction.ACTION3: (-1, 0),
    GameAction.ACTION4: (1, 0),
}


def _level(index: int) -> Level:
    rng = random.Random(1000 + index)
    cells = SIZE // CELL
    sprites = []
    for i in range(cells):
        for x, y in ((i, 0), (i, cells - 1), (0, i), (cells - 1, i)):
            sprites.append(Sprite(pixels=[[5] * CELL] * CELL, name="wall", x=x * CELL, y=y * CELL))
    taken = {(1, 1), (cells - 2, cells - 2)}
    while len(taken) < 2 + 60 + 4 * index:
        x, y = rng.randint(2, cells - 3), rng.randint(2, cells - 3)
        if (x, y) not in taken:
            taken.add((x, y))
            sprites.append(Sprite(pixels=[[5] * CELL] * CELL, name="wall", x=x * CELL, y=y * CELL))
    sprites.append(Sprite(pixels=[[3] * CELL] * CELL, name="goal", x=(cells - 2) * CELL, y=(cells - 2) * CELL))
    sprites.append(Sprite(pixels=[[9] * CELL] * CELL, name="player", x=CELL, y=CELL, layer=2))
    sprites.append(Sprite(pixels=[[11] * ENERGY], name="energy", x=2, y=1, layer=3, collidable=False))
    return Level(sprites=sprites, grid_size=(SIZE, SIZE), name=f"level{index + 1}")


class Lsx2(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self._energy = ENERGY
        super().__init__(
            game_id="lsx2",
            levels=[_level(i) for i in range(7)],
            camera=Camera(width=SIZE, height=SIZE),
            available_actions=[1, 2, 3, 4],
            seed=seed,
        )

    def on_set_level(self, level: Level) -> None:
        self._energy = ENERGY

    def step(self) -> None:
        move = MOVES.get(self.action.id)
        if move is not None:
            player = self.current_level.get_sprites_by_name("player")[0]
            hit = self.try_move_sprite(player, move[0] * CELL, move[1] * CELL)
            self._energy -= 1
            bar = self.current_level.get_sprites_by_name("energy")[0]
            bar.pixels[0, self._energy :] = 0
            if any(s.name == "goal" for s in hit):
                self.next_level()
            elif self._energy <= 0:
                self.lose()
        self.complete_action()
