"""Recover the actions a harness recording does not hold, by re-simulating the game and matching its frames.

The harness records every answer but not the action it answers (see :mod:`ledger.formats.harness`). Given the
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
"zero or not", the only thing ``handle_reset`` reads, unless the game's own code reads it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.formats.frame_lines import FrameLine, LineMap, LineSet
from ledger.formats.run_folders import Step
from ledger.toolkit.game_states import Choice, Engine, StateNotCopied, keyed
from ledger.toolkit.search_budget import Room, SearchSpent, allowance, deadline, step_limit

#: Hypotheses kept per line at most (the first ones in priority order); beyond it lines may be misread.
MAX_HYPOTHESES = 400
#: Lines between looks for the state every hypothesis comes from: the lines before it are decided, and let go.
SETTLE_EVERY = 1024


@dataclass(slots=True)
class Recovery:
    """What re-simulation found for one recording."""

    #: lineno -> the action that line answers (lines not listed were skipped).
    choices: LineMap[Choice] = field(default_factory=LineMap)
    #: Lines no action reproduces (skipped).
    unreproduced: list[int] = field(default_factory=list)
    #: Lines where a level RESET and a game action both stay consistent with every later line.
    undecided: LineSet = field(default_factory=LineSet)
    #: Lines read after the hypotheses had to be cut to MAX_HYPOTHESES.
    cut: list[int] = field(default_factory=list)
    error: str | None = None
    #: Game steps run and game states copied (the cost, whatever the machine); whether the full search ran.
    steps: int = 0
    copies: int = 0
    searched: bool = False


class _Node:
    __slots__ = ("choice", "fp", "game", "lineno", "merged", "parent")

    def __init__(self, game: Any, fp: bytes, parent: _Node | None, lineno: int, choice: Choice | None) -> None:
        self.game = game
        self.fp = fp
        self.parent = parent
        self.lineno = lineno
        self.choice = choice
        self.merged: set[int] | None = None


def line_signature(line: FrameLine, arr: Any = None) -> tuple[str, int, bool, bytes]:
    """What the game's answer must be to reproduce ``line``: state, levels_completed, full_reset, frame bytes
    (``arr``: ``line.grids()`` if the caller has it)."""
    if line.empty:
        return line.state, line.levels_completed, False, b""
    arr = line.grids() if arr is None else arr
    return line.state, line.levels_completed, line.full_reset, arr.tobytes() + str(arr.shape).encode()


def _simple(step: Step | None, default_click: tuple[int, int]) -> list[Choice]:
    order = [Choice(a) if a != 6 else Choice(6, *default_click) for a in range(1, 8)] + [Choice(0)]
    if step is not None:
        first = Choice(step.action, step.x, step.y) if step.action == 6 else Choice(step.action)
        order = [first, *(c for c in order if c != first)]
    return order


class Favoured:
    """The order an agent's actions are tried in where one fitting action is enough: agents repeat actions and favour
    some, so the one it took last first, then its most used, then the order given."""

    __slots__ = ("last", "used")

    def __init__(self) -> None:
        self.last: Choice | None = None
        self.used: dict[Choice, int] = {}

    def order(self, choices: list[Choice]) -> list[Choice]:
        used = self.used
        return sorted(choices, key=lambda c: (c != self.last, -used.get(c, 0))) if used else choices

    def took(self, c: Choice) -> None:
        self.last = c
        self.used[c] = self.used.get(c, 0) + 1


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

    def __init__(self, engine: Engine, want: tuple[str, int, bool, bytes] | None, lineno: int) -> None:
        self.engine = engine
        self.want = want
        self.lineno = lineno
        self.nodes: list[_Node] = []
        #: Every state the line gave (those not kept without their game: their paths still tell what differs).
        self.by_fp: dict[bytes, _Node] = {}
        self.room = Room(MAX_HYPOTHESES)

    def expand(self, node: _Node, choices: Iterable[Choice]) -> bool:
        """Add what ``choices`` from ``node`` give that reproduces the line; False if none does."""
        matched = False
        want = self.want
        keep = None if want is None else want.__eq__
        for c in choices:
            r = self.engine.step(node, c, keep)
            if r is None or r[1] is None:
                continue
            matched = True
            child = _Node(r[2], r[1], node, self.lineno, c)
            kept = self.by_fp.get(r[1])
            if kept is None:
                self._add(child)
            else:
                diff = _classify_diff(kept, child)
                if diff:
                    kept.merged = (kept.merged or set()) | diff
        return matched

    def skip(self, node: _Node) -> None:
        """Keep ``node``'s own state for this line: the line never reached the game (an action leaving that state
        stays first)."""
        if node.fp not in self.by_fp:
            self._add(_Node(node.game, node.fp, node, self.lineno, None))

    def _add(self, child: _Node) -> None:
        """A new state of this line: kept while there is room, else its game let go (its path still counts)."""
        self.by_fp[child.fp] = child
        if self.room.admit(child.game):
            self.nodes.append(child)
        else:
            child.game = None


def _copy_of(line: FrameLine, prev: FrameLine | None) -> bool:
    """Whether ``line`` repeats the frame line before it: what the benchmarking harness writes for an action it
    did not send."""
    return (
        prev is not None
        and line.packed == prev.packed
        and line.state == prev.state
        and line.levels_completed == prev.levels_completed
        and line.full_reset == prev.full_reset
        and line.available_actions == prev.available_actions
    )


def start_game(info: Any, seed: int = 0) -> Any:
    """The game as ``Arcade.make`` leaves it: built with ``seed``, then RESET (the answer the harness never records).
    Raises :class:`~ledger.toolkit.game_files.GameStartError`."""
    from ledger.toolkit.game_files import start

    return start(info, seed)[0]


def recover(
    frames: Iterable[FrameLine],
    info: Any,
    steps: dict[int, Step] | None = None,
    seed: int = 0,
    lost: Iterable[int] = (),
    tick: Callable[[], None] | None = None,
) -> Recovery:
    """Re-simulate one recording's play and recover the action each frame line answers.

    ``tick`` is called once a line (the caller's safe point: it may raise to stop the search; nothing is kept).

    ``lost``: line numbers of frame lines that could not be read (cut, wrong types): an action the game did see,
    whose answer is unknown, so every action is allowed there (and none is imported for it).
    """
    result = Recovery()
    try:
        game = start_game(info, seed)
    except Exception as e:  # a game whose code fails to load
        result.error = f"cannot start {info.game_id} from its code: {e}"
        return result
    lines = frames if isinstance(frames, Sequence) else list(frames)
    engine = Engine(game)
    engine.stop_at, engine.deadline = step_limit(len(lines)), deadline(len(lines))
    try:
        return _search(result, game, engine, lines, info.game_id, steps, list(lost), tick)
    except StateNotCopied as e:
        return Recovery(error=f"the state of {info.game_id} could not be copied to search it ({e})")
    except SearchSpent as e:
        return Recovery(
            error=f"the search of {info.game_id} was given up after {e} ({allowance()} are allowed): too many of "
            "its actions give the same frames and leave different states"
        )


def _search(
    result: Recovery,
    game: Any,
    engine: Engine,
    frames: Sequence[FrameLine],
    game_id: str,
    steps: dict[int, Step] | None,
    lost: list[int],
    tick: Callable[[], None] | None,
) -> Recovery:
    spent = (0, 0)
    if not lost:
        # The first path merges no states: its snapshots need not pickle alike (the costliest part of a freeze).
        engine.canonical = False
        fast = _first_path(engine, game, frames, game_id, steps or {}, tick)
        if fast is not None:
            engine.release()
            return fast
        result.searched = True
        spent = (engine.steps, engine.copies)
        engine.release()
        # The search merges equal states by their fingerprints: an engine whose snapshots all pickle alike.
        left, until = engine.stop_at - engine.steps, engine.deadline
        engine = Engine(game)
        engine.stop_at, engine.deadline = left, until
    fp, snapshot = engine.freeze(game)
    root = _Node(snapshot, fp, None, 0, None)
    hyps = [root]
    steps = steps or {}
    # Both in line order: merged as the search goes (a long recording's lines are never all made at once).
    sequence: Iterable[tuple[int, FrameLine | None]] = heapq.merge(
        ((f.lineno, f) for f in frames), ((ln, None) for ln in sorted(lost)), key=lambda t: t[0]
    )
    offered: tuple[int, ...] = ()
    prev: FrameLine | None = None
    settled = _Settled()
    for lineno, line in sequence:
        if tick is not None:
            tick()
        settled.look(hyps, result)
        if line is None:
            layer = _Layer(engine, None, -lineno)
            for node in hyps:
                layer.expand(node, _simple(None, engine.cells(node)[0]))
            hyps = _advance(hyps, layer.nodes or hyps)
            continue
        if not line.guid or line.game_id != game_id:
            result.unreproduced.append(line.lineno)
            continue
        want = keyed(line_signature(line))
        step = steps.get(line.lineno)
        layer = _Layer(engine, want, line.lineno)
        # Every display cell is tried only where the game offered clicks (a 64x64 display is 4096 candidates).
        clickable = not offered or 6 in offered
        for node in hyps:
            default = (step.x or 0, step.y or 0) if step is not None and step.action == 6 else None
            cells = engine.cells(node)
            simple = _simple(step, default or cells[0])
            if not layer.expand(node, simple) and not line.empty and clickable:
                layer.expand(node, (Choice(6, x, y) for x, y in cells if Choice(6, x, y) not in simple))
        if _copy_of(line, prev):
            # A copy may never have reached the game even where an action shows the same frame (a move into a
            # wall, RESET at a level's start): later lines tell (a full reset follows a RESET only).
            for node in hyps:
                layer.skip(node)
        prev = line
        offered = line.available_actions
        nxt = layer.nodes
        if not nxt:
            result.unreproduced.append(line.lineno)
            continue
        if layer.room.full:
            result.cut.append(line.lineno)
        hyps = _advance(hyps, nxt)
    _choose_best(hyps, result, settled)
    result.steps, result.copies = engine.steps + spent[0], engine.copies + spent[1]
    engine.release()
    if frames and not result.choices:
        # Not one line of an honest recording is a line the game never saw: this code is not the game that
        # answered them (or its copies do not act as it does).
        result.error = f"the code of {game_id} reproduces none of its {len(frames)} frame line(s)"
    return result


def _advance(old: list[_Node], new: list[_Node]) -> list[_Node]:
    """``new``, the states of the next line; the states of ``old`` are let go (their paths are kept): memory stays
    that of one line's states whatever the length."""
    if new is not old:
        for n in old:
            n.game = None
    return new


def _grid_key(grid: Any) -> bytes:
    import numpy as np

    return np.asarray(grid, dtype=np.int16).tobytes()


def _first_path(
    engine: Engine,
    game: Any,
    frames: Sequence[FrameLine],
    game_id: str,
    steps: dict[int, Step],
    tick: Callable[[], None] | None = None,
) -> Recovery | None:
    """The search's answer when every line is reproduced from one state by the first action (in priority order)
    that reproduces it, found without keeping alternatives; None when some line is not (then the whole search runs).

    The path taken is the first one in priority order, the one the search keeps too. A line answered by a game
    action whose frame is also the start frame of its level is tried with RESET as well: undecided if that
    reproduces it too (whether that RESET's own path would have lasted is not explored, so this may list more
    lines than the search does, never fewer).
    """
    result = Recovery()
    fp, snap = engine.freeze(game)
    node = _Node(snap, fp, None, 0, None)
    starts: dict[int, set[bytes]] = {0: {_grid_key(game.camera.render(game.current_level.get_sprites()))}}
    offered: tuple[int, ...] = ()
    levels = 0
    favoured = Favoured()
    for line in frames:
        if tick is not None:
            tick()
        if not line.guid or line.game_id != game_id:
            result.unreproduced.append(line.lineno)
            continue
        arr = None if line.empty else line.grids()
        want = keyed(line_signature(line, arr))
        keep = want.__eq__
        step = steps.get(line.lineno)
        default = (step.x or 0, step.y or 0) if step is not None and step.action == 6 else None
        cells = engine.cells(node)
        simple = _simple(step, default or cells[0])
        if step is None:
            simple = favoured.order(simple)
        clickable = (not offered or 6 in offered) and not line.empty
        tries = (
            simple
            if not clickable
            else [*simple, *(Choice(6, x, y) for x, y in cells if Choice(6, x, y) not in simple)]
        )
        found = None
        for c in tries:
            r = engine.step(node, c, keep)
            if r is not None and r[1] is not None:
                found = (c, r)
                break
        if found is None:
            return None
        c, r = found
        grid = b"" if arr is None else _grid_key(arr[-1])
        at_start = line.levels_completed == levels and line.state == "NOT_FINISHED" and grid in starts.get(levels, ())
        if c.action != 0 and not line.empty and at_start:
            again = engine.step(node, Choice(0), keep)
            if again is not None and again[1] is not None:
                result.undecided.add(line.lineno)
        if c.action == 0 or line.levels_completed != levels:
            starts.setdefault(line.levels_completed, set()).add(grid)
        levels = line.levels_completed
        result.choices[line.lineno] = c
        if c.action != 0:  # a RESET is what the game's end asks for, not what the agent favours
            favoured.took(c)
        assert r[1] is not None  # a kept answer
        node = _Node(r[2], r[1], None, line.lineno, c)
        offered = line.available_actions
    result.steps, result.copies = engine.steps, engine.copies
    return result


class Looks:
    """When to look for the latest state every kept state comes from: every SETTLE_EVERY lines, at doubling
    intervals while the states keep disagreeing (then each look walks back further: the looks cost a bounded share
    of the search)."""

    __slots__ = ("every", "left")

    def __init__(self) -> None:
        self.every = self.left = SETTLE_EVERY

    def due(self, nodes: list[_Node]) -> _Node | None:
        """That state when a look is due and finds one after the paths' last cut, else None."""
        self.left -= 1
        if self.left > 0:
            return None
        common = _common(nodes)
        self.every = SETTLE_EVERY if common is not None else self.every * 2
        self.left = self.every
        return common


class _Settled:
    """What the paths agree on: every hypothesis comes from one state, so the lines up to it are decided whichever
    hypothesis is kept at the end. Recorded as they are found and cut from the paths, so that a long search holds
    the lines since that state, not every line (the memory of a recording whose hypotheses keep disagreeing still
    grows)."""

    __slots__ = ("looks", "skipped", "undecided")

    def __init__(self) -> None:
        self.looks = Looks()
        self.undecided: set[int] = set()
        self.skipped: list[int] = []

    def look(self, hyps: list[_Node], result: Recovery) -> None:
        common = self.looks.due(hyps)
        if common is not None:
            self.record(common, result)
            common.parent = None

    def record(self, last: _Node, result: Recovery) -> None:
        """The choices on the path to ``last`` since the last cut (its root is recorded already), in line order;
        lines merged as ambiguous on it are undecided."""
        path: list[_Node] = []
        n = last
        while n.parent is not None:
            path.append(n)
            n = n.parent
        for n in reversed(path):
            if n.merged:
                self.undecided |= n.merged
            if n.choice is None:  # a copy of the line before that never reached the game
                self.skipped.append(n.lineno)
            elif n.lineno > 0:  # not a lost line
                result.choices[n.lineno] = n.choice


def _common(hyps: list[_Node]) -> _Node | None:
    """The latest state every hypothesis comes from, if it is after the paths' last cut (they are all as long)."""
    level = list({id(n): n for n in hyps}.values())
    while len(level) > 1:
        up: dict[int, _Node] = {}
        for n in level:
            if n.parent is None:
                return None
            up[id(n.parent)] = n.parent
        level = list(up.values())
    return level[0] if level else None


def _choose_best(hyps: list[_Node], result: Recovery, settled: _Settled) -> None:
    """Record the first hypothesis's choices in ``result`` (after those ``settled``); lines where another one
    disagrees on RESET versus a game action, or that were merged as ambiguous on its path, are undecided."""
    best = hyps[0]
    undecided = settled.undecided
    for other in hyps[1:]:
        undecided |= _classify_diff(best, other)
    settled.record(best, result)
    if settled.skipped:
        result.unreproduced = sorted([*result.unreproduced, *settled.skipped])
    for ln in sorted(undecided):
        if ln in result.choices:
            result.undecided.add(ln)


@dataclass(slots=True)
class Replayed:
    """The recorded actions stepped through the game's code: the first line whose answer it does not reproduce
    (None: every one), and the game steps run."""

    first_off: int | None = None
    steps: int = 0
    error: str | None = None


def replay_recorded(
    frames: Iterable[FrameLine],
    info: Any,
    choices: Callable[[int], tuple[int, int | None, int | None] | None],
    seed: int = 0,
    tick: Callable[[], None] | None = None,
) -> Replayed:
    """Step one game through the actions the lines name (``choices``: lineno -> the line's action, None for a line
    not imported), comparing each answer with its line: one game step a line, no copy and no search (the actions
    are known, only the code is checked)."""
    from ledger.toolkit.game_states import answer_signature, perform

    out = Replayed()
    try:
        game = start_game(info, seed)
    except Exception as e:  # a game whose code fails to load
        out.error = f"cannot start {info.game_id} from its code: {e}"
        return out
    for line in frames:
        c = choices(line.lineno)
        if c is None:
            continue
        if tick is not None:
            tick()
        out.steps += 1
        try:
            got = answer_signature(perform(game, *c))
        except Exception:  # the game raised where the recording holds an answer
            got = None
        if got != keyed(line_signature(line)):
            out.first_off = line.lineno
            return out
    return out
