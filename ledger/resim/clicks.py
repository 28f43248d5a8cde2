"""Where to try a click the recording does not place: one pixel per camera cell, then every pixel (e.g. ``bp35``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

DISPLAY = 64

_BEYOND: dict[int, tuple[Sequence[tuple[int, int]], list[tuple[int, int]]]] = {}


def beyond(cells: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The display pixels that are not among ``cells``, in raster order (empty for a 64x64 camera)."""
    found = _BEYOND.get(id(cells))
    if found is not None and found[0] is cells:
        return found[1]
    taken = set(cells)
    out = [(x, y) for y in range(DISPLAY) for x in range(DISPLAY) if (x, y) not in taken]
    _BEYOND[id(cells)] = (cells, out)  # the cells lists are the engine's, kept per camera: a few at most
    return out


def display(engine: Any, node: Any) -> Any:
    """The 64x64 display of ``node``'s state, rendered from a copy; None if it cannot be rendered."""
    import numpy as np

    try:
        game = engine.thaw(node.game)
        grid = np.asarray(game.camera.render(game.current_level.get_sprites()))
    except Exception:  # a game whose copy does not render: the plain order then
        return None
    return grid if grid.shape == (DISPLAY, DISPLAY) else None


def by_object(grid: Any, coords: Iterable[tuple[int, int]], recent: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``coords`` reordered: the agent's recent clicks, a pixel of each one-colour region (smallest first), the rest."""
    coords = list(coords)
    wanted = set(coords)
    first: list[tuple[int, int]] = [p for p in dict.fromkeys(reversed(recent)) if p in wanted]
    if grid is not None:
        first += [p for p in _regions(grid) if p in wanted]
    head = list(dict.fromkeys(first))
    seen = set(head)
    return head + [p for p in coords if p not in seen]


def _regions(grid: Any) -> list[tuple[int, int]]:
    """One pixel (its first in raster order) of each 4-connected region of one colour, smallest regions first."""
    values = grid.tolist()
    label = [[-1] * DISPLAY for _ in range(DISPLAY)]
    regions: list[tuple[int, int, int]] = []  # (size, y, x)
    for y0 in range(DISPLAY):
        for x0 in range(DISPLAY):
            if label[y0][x0] >= 0:
                continue
            colour = values[y0][x0]
            n = len(regions)
            label[y0][x0] = n
            todo = [(x0, y0)]
            size = 0
            while todo:
                x, y = todo.pop()
                size += 1
                for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
                    if 0 <= nx < DISPLAY and 0 <= ny < DISPLAY and label[ny][nx] < 0 and values[ny][nx] == colour:
                        label[ny][nx] = n
                        todo.append((nx, ny))
            regions.append((size, y0, x0))
    return [(x, y) for _, y, x in sorted(regions)]
