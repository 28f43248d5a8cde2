"""Test game for harness imports: every action shows (a cursor steps on), like a real game's move counter.

Two levels, each won by enough ACTION1 presses or a click (ACTION6) on the target cell; ACTION7 loses. The cursor
shows how many actions this level has had since it started (or was RESET), so a RESET is visible in the frame; the
presses are not, as in real games where an action's effect can stay hidden until it matters.
"""

from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite

NEEDS = [4, 3]
TARGETS = [(2, 3), (5, 5)]


class Vis5(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self._presses = 0
        self._moves = 0
        levels = [
            Level(
                sprites=[
                    Sprite(pixels=[[i + 1]], name="marker", x=i, y=0),
                    Sprite(pixels=[[7]], name="cursor", x=0, y=1),
                ],
                grid_size=(8, 8),
                name=f"level{i + 1}",
            )
            for i in range(len(NEEDS))
        ]
        super().__init__(
            game_id="vis5",
            levels=levels,
            camera=Camera(width=8, height=8),
            available_actions=[1, 2, 3, 4, 5, 6, 7],
            seed=seed,
        )

    def on_set_level(self, level: Level) -> None:
        self._presses = 0
        self._moves = 0

    def step(self) -> None:
        idx = self.level_index
        action = self.action.id
        if action != GameAction.RESET:
            self._moves += 1
            cursor = self.current_level.get_sprites_by_name("cursor")[0]
            cursor.set_position(self._moves % 8, 1 + (self._moves // 8) % 7)
        if action == GameAction.ACTION1:
            self._presses += 1
            if self._presses >= NEEDS[idx]:
                self.next_level()
        elif action == GameAction.ACTION6:
            x, y = int(self.action.data.get("x", -1)), int(self.action.data.get("y", -1))
            if (x // 8, y // 8) == TARGETS[idx]:
                self.next_level()
        elif action == GameAction.ACTION7:
            self.lose()
        self.complete_action()
