"""Recover the actions a harness recording does not hold, by re-simulating the game and matching its frames. See
docs/import.md, 'The harnesses' recordings': the path kept is the first in priority order; a line where paths disagree
on RESET versus a game action is undecided; a line no action reproduces is skipped."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.formats.frame_lines import FrameLine, LineMap, LineSet
from ledger.formats.run_folders import Step
from ledger.resim.state_search import (
    ActionOrder,
    Layer,
    Node,
    SettleSchedule,
    Signature,
    differ,
    first_fit,
    in_priority,
    let_go,
    new_engine,
    path,
    widen,
)
from ledger.toolkit.game_states import Choice, Engine, StateNotCopied, answer_signature, keyed, perform
from ledger.toolkit.search_budget import SearchSpent, allowance, deadline, step_limit
from ledger.toolkit.seeds import start_game

#: Hypotheses kept per line at most (the first ones in priority order); beyond it lines may be misread.
MAX_HYPOTHESES = 400


@dataclass(slots=True)
class Recovery:
    choices: LineMap[Choice] = field(default_factory=LineMap)
    unreproduced: list[int] = field(default_factory=list)
    #: Lines where a level RESET and a game action both stay consistent with every later line.
    undecided: LineSet = field(default_factory=LineSet)
    cut: list[int] = field(default_factory=list)
    error: str | None = None
    #: The cost, whatever the machine; whether the full search ran.
    steps: int = 0
    copies: int = 0
    searched: bool = False


def line_signature(line: FrameLine, arr: Any = None) -> Signature:
    """What the game's answer must be to reproduce ``line`` (``arr``: ``line.grids()`` if the caller has it)."""
    if line.empty:
        return line.state, line.levels_completed, False, b""
    arr = line.grids() if arr is None else arr
    return line.state, line.levels_completed, line.full_reset, arr.tobytes() + str(arr.shape).encode()


def _choices(engine: Engine, step: Step | None) -> Callable[[Node], list[Choice]]:
    """A line's simple actions from a state: ACTION6 at the step's coordinate, else at the state's first cell."""
    first = None if step is None else Choice(step.action, step.x, step.y) if step.action == 6 else Choice(step.action)
    default = (step.x or 0, step.y or 0) if step is not None and step.action == 6 else None

    def of(node: Node) -> list[Choice]:
        cell = engine.cells(node)[0]
        return in_priority(first, default or cell)

    return of


def _shows(want: Signature) -> Callable[[Signature, Choice], bool]:
    return lambda sig, c: sig == want


def _resets_apart(a: Choice | None, b: Choice | None) -> bool:
    """Whether two choices disagree on RESET versus a game action (every other difference shows in no score)."""
    return a is not None and b is not None and (a.action == 0) != (b.action == 0)


def _merge(kept: Node, child: Node) -> None:
    diff = differ(kept, child, _resets_apart)
    if diff:
        kept.merged = (kept.merged or set()) | diff


def _copy_of(line: FrameLine, prev: FrameLine | None) -> bool:
    """Whether ``line`` repeats the line before it: what the benchmarking harness writes for an action not sent."""
    return (
        prev is not None
        and line.packed == prev.packed
        and line.state == prev.state
        and line.levels_completed == prev.levels_completed
        and line.full_reset == prev.full_reset
        and line.available_actions == prev.available_actions
    )


def _started(info: Any) -> tuple[Any, str | None]:
    try:
        return start_game(info), None
    except Exception as e:  # a game whose code fails to load
        return None, f"cannot start {info.game_id} from its code: {e}"


def recover(
    frames: Iterable[FrameLine],
    info: Any,
    steps: dict[int, Step] | None = None,
    lost: Iterable[int] = (),
    tick: Callable[[], None] | None = None,
) -> Recovery:
    """Re-simulate one recording's play and recover the action each frame line answers. ``tick`` is called once a line
    (it may raise to stop). ``lost``: unreadable lines the game did see, where every action is allowed (and none is
    imported)."""
    game, error = _started(info)
    if error is not None:
        return Recovery(error=error)
    lines = frames if isinstance(frames, Sequence) else list(frames)
    try:
        return _search(game, lines, info.game_id, steps or {}, list(lost), tick)
    except StateNotCopied as e:
        return Recovery(error=f"the state of {info.game_id} could not be copied to search it ({e})")
    except SearchSpent as e:
        return Recovery(
            error=f"the search of {info.game_id} was given up after {e} ({allowance()} are allowed): too many of "
            "its actions give the same frames and leave different states"
        )


def _search(
    game: Any,
    frames: Sequence[FrameLine],
    game_id: str,
    steps: dict[int, Step],
    lost: list[int],
    tick: Callable[[], None] | None,
) -> Recovery:
    result = Recovery()
    spent = (0, 0)
    eng = new_engine(game, step_limit(len(frames)), deadline(len(frames)), canonical=bool(lost))
    if not lost:
        fast = _first_path(eng, game, frames, game_id, steps, tick)
        if fast is not None:
            eng.release()
            return fast
        result.searched = True
        spent = (eng.steps, eng.copies)
        eng.release()
        # The search merges equal states by their fingerprints: their snapshots must all pickle alike.
        eng = new_engine(game, eng.stop_at - eng.steps, eng.deadline)
    fp, snapshot = eng.freeze(game)
    hyps = [Node(snapshot, fp, None, 0, None)]
    # Both in line order, merged lazily: a long recording's lines are never all made at once.
    sequence: Iterable[tuple[int, FrameLine | None]] = heapq.merge(
        ((f.lineno, f) for f in frames), ((ln, None) for ln in sorted(lost)), key=lambda t: t[0]
    )
    offered: tuple[int, ...] = ()
    prev: FrameLine | None = None
    settled = _Settled()
    for lineno, line in sequence:
        if tick is not None:
            tick()
        settled.looks.settle(hyps, lambda common: settled.record(common, result))
        if line is None:
            layer = Layer(eng, -lineno, None, _merge, MAX_HYPOTHESES)
            layer.each(hyps, _choices(eng, None), False)
            hyps = let_go(hyps, layer.nodes or hyps)
            continue
        if not line.guid or line.game_id != game_id:
            result.unreproduced.append(line.lineno)
            continue
        want = keyed(line_signature(line))
        layer = Layer(eng, line.lineno, _shows(want), _merge, MAX_HYPOTHESES)
        clickable = not line.empty and (not offered or 6 in offered)
        layer.each(hyps, _choices(eng, steps.get(line.lineno)), clickable)
        if _copy_of(line, prev):
            # A copy may never have reached the game even where an action shows the same frame (a move into a
            # wall, RESET at a level's start): later lines tell (a full reset follows a RESET only).
            for node in hyps:
                layer.skip(node)
        prev = line
        offered = line.available_actions
        if not layer.nodes:
            result.unreproduced.append(line.lineno)
            continue
        if layer.room.full:
            result.cut.append(line.lineno)
        hyps = let_go(hyps, layer.nodes)
    _choose_best(hyps, result, settled)
    result.steps, result.copies = eng.steps + spent[0], eng.copies + spent[1]
    eng.release()
    if frames and not result.choices:
        # Not one line of an honest recording is a line the game never saw: this code is not that game.
        result.error = f"the code of {game_id} reproduces none of its {len(frames)} frame line(s)"
    return result


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
    """The search's answer when every line fits the first fitting action from one state (no alternatives kept);
    None otherwise (then the whole search runs). May list more undecided lines than the search, never fewer."""
    result = Recovery()
    fp, snap = engine.freeze(game)
    node = Node(snap, fp, None, 0, None)
    starts: dict[int, set[bytes]] = {0: {_grid_key(game.camera.render(game.current_level.get_sprites()))}}
    offered: tuple[int, ...] = ()
    levels = 0
    favoured = ActionOrder()
    for line in frames:
        if tick is not None:
            tick()
        if not line.guid or line.game_id != game_id:
            result.unreproduced.append(line.lineno)
            continue
        arr = None if line.empty else line.grids()
        want = keyed(line_signature(line, arr))
        step = steps.get(line.lineno)
        simple = _choices(engine, step)(node)
        if step is None:
            simple = favoured.order(simple)
        clickable = (not offered or 6 in offered) and not line.empty
        tries = [*simple, *widen(engine, node, simple)] if clickable else simple
        c, r, _ = first_fit(engine, node, tries, _shows(want))
        if c is None or r is None:
            return None
        grid = b"" if arr is None else _grid_key(arr[-1])
        at_start = line.levels_completed == levels and line.state == "NOT_FINISHED" and grid in starts.get(levels, ())
        if c.action != 0 and not line.empty and at_start:
            again = engine.step(node, Choice(0), want.__eq__)
            if again is not None and again[1] is not None:
                result.undecided.add(line.lineno)
        if c.action == 0 or line.levels_completed != levels:
            starts.setdefault(line.levels_completed, set()).add(grid)
        levels = line.levels_completed
        result.choices[line.lineno] = c
        if c.action != 0:  # a RESET is what the game's end asks for, not what the agent favours
            favoured.took(c)
        assert r[1] is not None  # a kept answer
        node = Node(r[2], r[1], None, line.lineno, c)
        offered = line.available_actions
    result.steps, result.copies = engine.steps, engine.copies
    return result


class _Settled:
    """What the paths agree on, recorded as found and cut from the paths (a long search holds only the lines since)."""

    __slots__ = ("looks", "skipped", "undecided")

    def __init__(self) -> None:
        self.looks = SettleSchedule()
        self.undecided: set[int] = set()
        self.skipped: list[int] = []

    def record(self, last: Node, result: Recovery) -> None:
        """The choices on the path to ``last`` since the last cut; lines merged as ambiguous on it are undecided."""
        for n in path(last):
            if n.merged:
                self.undecided |= n.merged
            if n.choice is None:  # a copy of the line before that never reached the game
                self.skipped.append(n.lineno)
            elif n.lineno > 0:  # not a lost line
                result.choices[n.lineno] = n.choice


def _choose_best(hyps: list[Node], result: Recovery, settled: _Settled) -> None:
    """Record the first hypothesis's choices; lines where another disagrees on RESET, or merged, are undecided."""
    best = hyps[0]
    undecided = settled.undecided
    for other in hyps[1:]:
        undecided |= differ(best, other, _resets_apart)
    settled.record(best, result)
    if settled.skipped:
        result.unreproduced = sorted([*result.unreproduced, *settled.skipped])
    for ln in sorted(undecided):
        if ln in result.choices:
            result.undecided.add(ln)


@dataclass(slots=True)
class Replayed:
    """The first line whose answer the game's code does not reproduce (None: every one), and the game steps run."""

    first_off: int | None = None
    steps: int = 0
    error: str | None = None


def replay_recorded(
    frames: Iterable[FrameLine],
    info: Any,
    choices: Callable[[int], tuple[int, int | None, int | None] | None],
    tick: Callable[[], None] | None = None,
) -> Replayed:
    """Step one game through the actions the lines name, comparing each answer with its line (no search)."""
    game, error = _started(info)
    out = Replayed(error=error)
    if error is not None:
        return out
    for line in frames:
        c = choices(line.lineno)
        if c is None:
            continue
        if tick is not None:
            tick()
        out.steps += 1
        try:
            got: Signature | None = answer_signature(perform(game, *c))
        except Exception:  # the game raised where the recording holds an answer
            got = None
        if got != keyed(line_signature(line)):
            out.first_off = line.lineno
            return out
    return out
