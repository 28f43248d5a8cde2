"""Recover the actions a harness recording does not hold, by re-simulating the game and matching its frames.

The harness records every answer but not the action it answers (see :mod:`ledger.toolkit.harness`). Given the
game's code, the play is re-run from the start (``Arcade.make``: the game built with seed 0, then its RESET) and
each frame line is matched against what each possible action produces: RESET, ACTION1..7, and ACTION6 at a
coordinate. A match is the same state, levels_completed, full_reset and frame (every animation grid, or both
empty).

**Lookahead.** Several actions can give the same frame (a press that only counts inside the game, a click on
nothing, a level RESET whose answer is the level-start frame) yet leave the game in different states, which later
frames tell apart. So every consistent hypothesis is kept (a breadth-first search), hypotheses whose game states
are identical are merged, and the one kept at the end is the first in priority order: the benchmarking step's
``parsed_action`` when there is one, then ACTION1..ACTION7, then RESET. A line where surviving or merged
hypotheses disagree on RESET versus a game action is *undecided*: imported as the game action (no reset is
invented) and counted; every score-bearing number (actions, levels, state) is the same either way.

**Clicks.** ACTION6 is first tried at one coordinate (the step's, else the top-left display cell); only when no
simple action reproduces a line from a hypothesis is it tried at every display cell (one coordinate per game grid
cell, as ``Camera.display_to_grid`` maps clicks). A click that changes nothing visible is taken at that first
coordinate.

**Lines no action reproduces** (the benchmarking harness's copies of the last frame for actions it did not send,
the default ``FrameData`` it records for a refused first action, an edited line) are treated as never having
reached the game: skipped, with their line numbers, and the search goes on from the hypotheses before them.

Game states are compared by a fingerprint of the game object's attributes; the engine's bookkeeping that every
action overwrites (the current action, the full-reset flag) is left out, and ``_action_count`` is reduced to
"zero or not", the only thing ``handle_reset`` reads.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import pickle
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple

from ledger.toolkit.harness import FrameLine, Step

#: Hypotheses kept per line at most (the first ones in priority order); beyond it lines may be misread.
MAX_HYPOTHESES = 400
#: Transitions remembered (state fingerprint, action) -> result.
CACHE_SIZE = 50_000

_quiet = logging.getLogger("ledger.harness.toolkit")
_quiet.setLevel(logging.CRITICAL)

_SKIP_ATTRS = frozenset(("_action", "_full_reset", "_action_complete", "_clean_levels"))


class Choice(NamedTuple):
    """An action: 0 RESET, 1..7 ACTION1..7; x/y for ACTION6."""

    action: int
    x: int | None = None
    y: int | None = None


@dataclass(slots=True)
class Recovery:
    """What re-simulation found for one recording."""

    #: lineno -> the action that line answers (lines not listed were skipped).
    choices: dict[int, Choice] = field(default_factory=dict)
    #: Lines no action reproduces (skipped).
    unreproduced: list[int] = field(default_factory=list)
    #: Lines where a level RESET and a game action both stay consistent with every later line.
    undecided: list[int] = field(default_factory=list)
    #: Lines read after the hypotheses had to be cut to MAX_HYPOTHESES.
    cut: list[int] = field(default_factory=list)
    error: str | None = None


class _Node:
    __slots__ = ("choice", "fp", "game", "lineno", "merged", "parent")

    def __init__(self, game: Any, fp: bytes, parent: _Node | None, lineno: int, choice: Choice | None) -> None:
        self.game = game
        self.fp = fp
        self.parent = parent
        self.lineno = lineno
        self.choice = choice
        self.merged: set[int] | None = None


def fingerprint(game: Any) -> bytes:
    """A digest of a game object's state (see the module docstring for what is left out)."""
    h = hashlib.blake2b(digest_size=20)
    seen: dict[int, int] = {}
    up = h.update

    def walk(o: Any) -> None:
        t = type(o)
        if o is None or t is bool or t is int or t is float or t is str:
            up(t.__name__.encode())
            up(repr(o).encode())
            return
        oid = id(o)
        if oid in seen:
            up(b"@%d" % seen[oid])
            return
        seen[oid] = len(seen)
        if t is list or t is tuple:
            up(b"[%d" % len(o))
            for v in o:
                walk(v)
        elif t is dict:
            up(b"{%d" % len(o))
            for k, v in o.items():
                walk(k)
                walk(v)
        elif t is set or t is frozenset:
            up(b"<%d" % len(o))
            for v in sorted(o, key=repr):
                walk(v)
        elif hasattr(o, "tobytes") and hasattr(o, "dtype"):
            up(f"nd{o.dtype}{o.shape}".encode())
            up(o.tobytes())
        elif isinstance(o, Enum):
            up(f"E{t.__qualname__}.{o.name}".encode())
        elif isinstance(o, random.Random):
            walk(o.getstate())
        elif hasattr(o, "bit_generator"):
            walk(o.bit_generator.state)
        elif isinstance(o, bytes | bytearray):
            up(bytes(o))
        else:
            up(t.__qualname__.encode())
            d = getattr(o, "__dict__", None)
            if d is not None:
                walk(d)
            for s in getattr(t, "__slots__", ()):
                if hasattr(o, s):
                    walk(s)
                    walk(getattr(o, s))

    state = {k: v for k, v in vars(game).items() if k not in _SKIP_ATTRS}
    if "_action_count" in state:
        state["_action_count"] = min(int(state["_action_count"]), 1)
    walk(state)
    return h.digest()


def _clone(game: Any) -> Any:
    # The clean levels are never changed (levels are cloned from them): share them instead of copying.
    clean = getattr(game, "_clean_levels", None)
    memo = {id(clean): clean} if clean is not None else {}
    return copy.deepcopy(game, memo)


def _signature(resp: Any) -> tuple[str, int, bool, bytes]:
    import numpy as np

    state = resp.state.name if isinstance(resp.state, Enum) else str(resp.state)
    frames = resp.frame
    if len(frames) == 0:
        return state, int(resp.levels_completed), False, b""
    arr = np.stack([np.asarray(f, dtype=np.int16) for f in frames])
    return state, int(resp.levels_completed), bool(resp.full_reset), arr.tobytes() + str(arr.shape).encode()


def _line_signature(line: FrameLine) -> tuple[str, int, bool, bytes]:
    if line.empty:
        return line.state, line.levels_completed, False, b""
    arr = line.grids()
    return line.state, line.levels_completed, line.full_reset, arr.tobytes() + str(arr.shape).encode()


class _Engine:
    """Runs actions on copies of game states, remembering each transition.

    A state is kept as the pickle of the game's attributes (the engine's per-action bookkeeping normalized, the
    never-changed clean levels shared), which is also its fingerprint: ~10x cheaper than ``copy.deepcopy`` and
    walking the objects. A game whose state does not pickle is copied and fingerprinted the slow way.
    """

    def __init__(self, game: Any) -> None:
        from arcengine import ActionInput, GameAction

        self._input = ActionInput
        self._actions = {a.value: a for a in GameAction}
        self.cache: dict[tuple[bytes, Choice], tuple[Any, bytes, Any] | None] = {}
        self.cls = type(game)
        self.clean = getattr(game, "_clean_levels", None)
        self.action0 = getattr(game, "_action", None)
        self._cells: dict[bytes, list[tuple[int, int]]] = {}
        self.fast = True
        try:
            fp, snap = self.freeze(game)
            again = self.freeze(self.thaw(snap))[0]
            self.fast = again == fp
        except Exception:
            self.fast = False

    def freeze(self, game: Any) -> tuple[bytes, Any]:
        """(fingerprint, snapshot) of a game state."""
        if not self.fast:
            return fingerprint(game), game
        st = {k: v for k, v in vars(game).items() if k != "_clean_levels" and k != "_action"}
        if "_action_count" in st:
            st["_action_count"] = min(int(st["_action_count"]), 1)
        st["_full_reset"] = False
        st["_action_complete"] = True
        blob = pickle.dumps(st, protocol=5)
        return hashlib.blake2b(blob, digest_size=20).digest(), blob

    def thaw(self, snap: Any) -> Any:
        """A game to act on, from a snapshot (never the snapshot itself)."""
        if not self.fast:
            return _clone(snap)
        game = object.__new__(self.cls)
        d = pickle.loads(snap)
        d["_clean_levels"] = self.clean
        d["_action"] = self.action0
        game.__dict__.update(d)
        return game

    def cells(self, node: _Node) -> list[tuple[int, int]]:
        """The click coordinates to try from ``node``'s state (its camera's cells)."""
        found = self._cells.get(node.fp)
        if found is None:
            found = self._cells[node.fp] = _cells(self.thaw(node.game) if self.fast else node.game)
        return found

    def step(self, node: _Node, c: Choice) -> tuple[Any, bytes, Any] | None:
        """(response signature, fingerprint, snapshot) after ``c`` from ``node``'s state; None if the game raised."""
        key = (node.fp, c)
        hit = self.cache.get(key, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        game = self.thaw(node.game)
        data: dict[str, Any] = {}
        if c.x is not None:
            data["x"] = c.x
        if c.y is not None:
            data["y"] = c.y
        try:
            resp = game.perform_action(self._input(id=self._actions[c.action], data=data), raw=True)
            fp, snap = self.freeze(game)
            out: tuple[Any, bytes, Any] | None = (_signature(resp), fp, snap)
        except Exception:  # the game raised: no match from here
            out = None
        if len(self.cache) >= CACHE_SIZE:
            self.cache.clear()
        self.cache[key] = out
        return out


def _cells(game: Any) -> list[tuple[int, int]]:
    """One display coordinate per grid cell (the cell's top-left pixel), as the camera maps clicks to cells."""
    cam = game.camera
    try:
        scale, xo, yo = cam._calculate_scale_and_offset()
        key = (scale, xo, yo, cam.width, cam.height)
    except Exception:
        key = (1, 0, 0, 64, 64)
    cells = _CELLS.get(key)
    if cells is None:
        scale, xo, yo, w, h = key
        cells = _CELLS[key] = [(xo + gx * scale, yo + gy * scale) for gy in range(h) for gx in range(w)]
    return cells


def _simple(step: Step | None, default_click: tuple[int, int]) -> list[Choice]:
    order = [Choice(a) if a != 6 else Choice(6, *default_click) for a in range(1, 8)] + [Choice(0)]
    if step is not None:
        first = Choice(step.action, step.x, step.y) if step.action == 6 else Choice(step.action)
        order = [first, *(c for c in order if c != first)]
    return order


def _classify_diff(a: _Node, b: _Node) -> set[int]:
    """Lines where two paths of the same length disagree on RESET versus a game action."""
    out: set[int] = set()
    while a is not b and a.parent is not None and b.parent is not None:
        if a.choice is not None and b.choice is not None and (a.choice.action == 0) != (b.choice.action == 0):
            out.add(a.lineno)
        # Lines either side was already ambiguous on hold for the other too: their futures are the same.
        if a.merged:
            out |= a.merged
        if b.merged:
            out |= b.merged
        a, b = a.parent, b.parent
    return out


class _Layer:
    """The hypotheses after one line: each distinct game state once, first in priority order."""

    def __init__(self, engine: _Engine, want: tuple[str, int, bool, bytes] | None, lineno: int) -> None:
        self.engine = engine
        self.want = want
        self.lineno = lineno
        self.nodes: list[_Node] = []
        self.by_fp: dict[bytes, _Node] = {}

    def expand(self, node: _Node, choices: Iterable[Choice]) -> bool:
        """Add what ``choices`` from ``node`` give that reproduces the line; False if none does."""
        matched = False
        for c in choices:
            r = self.engine.step(node, c)
            if r is None or (self.want is not None and r[0] != self.want):
                continue
            matched = True
            child = _Node(r[2], r[1], node, self.lineno, c)
            kept = self.by_fp.get(r[1])
            if kept is None:
                self.by_fp[r[1]] = child
                self.nodes.append(child)
            else:
                diff = _classify_diff(kept, child)
                if diff:
                    kept.merged = (kept.merged or set()) | diff
        return matched


_CELLS: dict[tuple[int, int, int, int, int], list[tuple[int, int]]] = {}


def start_game(info: Any, seed: int = 0) -> Any:
    """The game as ``Arcade.make`` leaves it: built with ``seed``, then RESET (the answer the harness never records)."""
    from arc_agi import LocalEnvironmentWrapper

    w = LocalEnvironmentWrapper(environment_info=info, logger=_quiet, scorecard_id="ledger-import", seed=seed)
    game = getattr(w, "_game", None)
    if game is None or w.observation_space is None:
        raise RuntimeError(f"cannot start {info.game_id} from its code")
    return game


def recover(
    frames: Iterable[FrameLine],
    info: Any,
    steps: dict[int, Step] | None = None,
    seed: int = 0,
    lost: Iterable[int] = (),
) -> Recovery:
    """Re-simulate one recording's play and recover the action each frame line answers.

    ``lost``: line numbers of frame lines that could not be read (cut, wrong types): an action the game did see,
    whose answer is unknown, so every action is allowed there (and none is imported for it).
    """
    result = Recovery()
    try:
        game = start_game(info, seed)
    except Exception as e:  # a game whose code fails to load
        result.error = f"cannot start {info.game_id} from its code: {e}"
        return result
    engine = _Engine(game)
    fp, snapshot = engine.freeze(game)
    root = _Node(snapshot, fp, None, 0, None)
    hyps = [root]
    steps = steps or {}
    sequence: list[tuple[int, FrameLine | None]] = sorted(
        [(f.lineno, f) for f in frames] + [(ln, None) for ln in lost], key=lambda t: t[0]
    )
    for lineno, line in sequence:
        if line is None:
            layer = _Layer(engine, None, -lineno)
            for node in hyps:
                layer.expand(node, _simple(None, engine.cells(node)[0]))
            hyps = layer.nodes[:MAX_HYPOTHESES] or hyps
            continue
        if not line.guid or line.game_id != info.game_id:
            result.unreproduced.append(line.lineno)
            continue
        want = _line_signature(line)
        step = steps.get(line.lineno)
        layer = _Layer(engine, want, line.lineno)
        for node in hyps:
            default = (step.x or 0, step.y or 0) if step is not None and step.action == 6 else None
            cells = engine.cells(node)
            simple = _simple(step, default or cells[0])
            if not layer.expand(node, simple) and not line.empty:
                layer.expand(node, (Choice(6, x, y) for x, y in cells if Choice(6, x, y) not in simple))
        nxt = layer.nodes
        if not nxt:
            result.unreproduced.append(line.lineno)
            continue
        if len(nxt) > MAX_HYPOTHESES:
            result.cut.append(line.lineno)
            nxt = nxt[:MAX_HYPOTHESES]
        hyps = nxt
    _choose_best(hyps, result)
    return result


def _choose_best(hyps: list[_Node], result: Recovery) -> None:
    """Record the first hypothesis's choices in ``result``; lines where another one disagrees on RESET versus a
    game action, or that were merged as ambiguous on its path, are undecided."""
    best = hyps[0]
    undecided: set[int] = set()
    for other in hyps[1:]:
        undecided |= _classify_diff(best, other)
    n: _Node | None = best
    while n is not None and n.parent is not None:
        if n.merged:
            undecided |= n.merged
        assert n.choice is not None
        if n.lineno > 0:  # not a lost line
            result.choices[n.lineno] = n.choice
        n = n.parent
    result.undecided = sorted(ln for ln in undecided if ln in result.choices)
