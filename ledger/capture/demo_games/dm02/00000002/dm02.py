"""Demo game: two levels won by clicking the right cell (ACTION6)."""

from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite

NEEDS = [30, 30]  # ACTION1 presses that complete each level
TARGETS = [(1, 1), (6, 2)]  # per level: the (column, row) cell an ACTION6 click must hit, or None
LOSE_ON = None  # the action id that ends the game (GAME_OVER), or None
ODD_SEED_EXTRA = 0  # an odd seed makes level 1 need this many more presses


# dm01.py's code with other constants: a game file stands alone, as the toolkit loads one file per game folder.
class Dm02(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self._presses = 0
        self._extra = ODD_SEED_EXTRA if seed % 2 else 0
        levels = [
            Level(
                sprites=[Sprite(pixels=[[i % 9 + 1]], name="marker", x=i, y=0)], grid_size=(8, 8), name=f"level{i + 1}"
            )
            for i in range(len(NEEDS))
        ]
        super().__init__(
            game_id="dm02", levels=levels, camera=Camera(width=8, height=8), available_actions=[1, 6], seed=seed
        )

    def on_set_level(self, level: Level) -> None:
        self._presses = 0

    def step(self) -> None:
        idx = self.level_index
        action = self.action.id
        if action == GameAction.ACTION1:
            self._presses += 1
            if self._presses >= NEEDS[idx] + (self._extra if idx == 0 else 0):
                self.next_level()
        elif action == GameAction.ACTION6 and TARGETS[idx] is not None:
            x, y = int(self.action.data.get("x", -1)), int(self.action.data.get("y", -1))
            if (x // 8, y // 8) == TARGETS[idx]:
                self.next_level()
        elif LOSE_ON is not None and action.value == LOSE_ON:
            self.lose()
        self.complete_action()
