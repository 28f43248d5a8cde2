"""Frames for the viewer's replay: a recorded play re-simulated against the game code, one grid per step. Each step
keeps the response's last grid, one hex digit per cell; where the game diverges the frames stop."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ledger.domain.events import (
    ActionIgnored,
    ActionTaken,
    GameOver,
    LevelCompleted,
    LevelReset,
    PlayStarted,
    Win,
)
from ledger.resim.resimulate import DERIVED, INPUTS, Numbered, action_name, scan_games

#: Steps sent to the page at most, per window (a 64x64 grid is 4 KB of JSON).
DEFAULT_LIMIT = 2000

_HEX = "0123456789abcdef"


def palette_or_empty() -> list[str]:
    """The toolkit's 16 colours as ``#rrggbb``, or none when it is not installed (no page has frames then)."""
    try:
        from ledger.toolkit.arc_adapter import palette

        return palette()
    except ImportError:
        return []


class Step(msgspec.Struct, frozen=True, kw_only=True):
    """One point of the timeline: the play's start (``n`` 0) or one input the agent sent."""

    n: int
    version: int
    action: str
    x: int | None = None
    y: int | None = None
    levels_completed: int
    state: str
    #: What the recording says this input did: "level 2 completed", "level reset", "GAME_OVER", "WIN", ...
    marks: list[str] = msgspec.field(default_factory=list)
    grid: str | None = None
    width: int = 0
    height: int = 0
    reasoning: Any = None


class PlayFrames(msgspec.Struct, frozen=True, kw_only=True):
    """The steps of one play from ``start``; ``error`` says why there are no frames (then ``steps`` is empty)."""

    game_id: str
    play: int
    guid: str | None
    total_steps: int
    start: int
    steps: list[Step]
    error: str | None = None
    diverged: str | None = None


def encode_grid(grid: Any) -> tuple[str, int, int]:
    rows = [list(r) for r in grid]
    height = len(rows)
    width = len(rows[0]) if rows else 0
    return "".join(_HEX[int(v) & 15] for r in rows for v in r), width, height


def _play_events(events: Sequence[Numbered], game_id: str, play: int) -> tuple[str | None, int, int]:
    """The guid of play ``play`` (1-based) of ``game_id``, and the indexes of its first and own play_started."""
    seen = 0
    first_of_guid: dict[str, int] = {}
    for i, n in enumerate(events):
        e = n.event
        if type(e) is PlayStarted:
            first_of_guid.setdefault(e.guid, i)
            if e.game_id == game_id:
                seen += 1
                if seen == play:
                    return e.guid, first_of_guid[e.guid], i
    return None, -1, -1


def _marks(derived: Sequence[Any], ev: Any) -> list[str]:
    out: list[str] = []
    if type(ev) is PlayStarted:
        out.append("start" if ev.seed is None else f"start (seed {ev.seed})")
    elif type(ev) is LevelReset:
        out.append("level reset")
    elif type(ev) is ActionIgnored:
        out.append("ignored (after the end)")
    for d in derived:
        if type(d) is LevelCompleted:
            out.append(f"level {d.levels_completed} completed")
        elif type(d) is GameOver:
            out.append("GAME_OVER")
        elif type(d) is Win:
            out.append("WIN")
    return out


def _inputs(events: Sequence[Numbered], guid: str, first: int) -> list[tuple[Numbered, list[Any]]]:
    """Every input of ``guid`` from index ``first`` on, with the derived events recorded right after it."""
    out: list[tuple[Numbered, list[Any]]] = []
    for n in events[first:]:
        e = n.event
        if getattr(e, "guid", None) != guid:
            continue
        if type(e) in INPUTS:
            out.append((n, []))
        elif type(e) in DERIVED and out:
            out[-1][1].append(e)
    return out


def _send(wrapper: Any, ev: Any, chosen: tuple[int, int | None, int | None] | None) -> Any:
    """Send the recorded input (``chosen``: the action the game decided where the recording left it open)."""
    from ledger.toolkit.game_files import game_action

    if type(ev) in (PlayStarted, LevelReset):
        return wrapper.step(game_action(0))
    if chosen is None:
        chosen = (ev.action, ev.x, ev.y) if ev.action == 6 and type(ev) is ActionTaken else (ev.action, None, None)
    try:
        ga = game_action(chosen[0])
    except ValueError:
        return None
    return wrapper.step(ga, data={k: v for k, v in (("x", chosen[1]), ("y", chosen[2])) if v is not None})


def play_frames(
    events: Sequence[Numbered],
    game_id: str,
    play: int,
    environments_dir: str | os.PathLike[str] | None,
    *,
    start: int = 0,
    limit: int = DEFAULT_LIMIT,
    with_reasoning: bool = True,
) -> PlayFrames:
    """The frames of play ``play`` (1-based) of ``game_id``, steps ``start`` to ``start + limit``."""
    guid, first, own = _play_events(events, game_id, play)
    total = 0

    def frames(steps: list[Step], **kw: Any) -> PlayFrames:
        return PlayFrames(game_id=game_id, play=play, guid=guid, total_steps=total, start=start, steps=steps, **kw)

    if guid is None:
        return frames([], error=f"the card has no play {play} of {game_id}")
    inputs = _inputs(events, guid, first)
    own_at = next(i for i, (n, _) in enumerate(inputs) if n is events[own])
    nxt = next((i for i in range(own_at + 1, len(inputs)) if type(inputs[i][0].event) is PlayStarted), len(inputs))
    total = nxt - own_at
    if environments_dir is None:
        return frames([], error="no frames: no --environments folder of game files was given to re-simulate the play")
    try:
        infos = scan_games(environments_dir)
    except ImportError:
        return frames([], error="no frames: the toolkit is not installed (pip install 'arc-scorecard-ledger[arc]')")
    if game_id not in infos:
        return frames(
            [],
            error=f"no frames: game {game_id} not found under {environments_dir} (no metadata.json with that game_id)",
        )
    opening = inputs[0][0].event
    seed = opening.seed if isinstance(opening, PlayStarted) else None
    window = (infos[game_id], inputs[: min(nxt, own_at + start + limit)], own_at, own_at + start, with_reasoning)
    if not any(type(n.event) is ActionTaken and n.event.candidates for n, _ in inputs):
        steps, error, diverged = _simulate(*window, seed, {})
        if diverged is None or seed is not None:
            return frames(steps, error=error, diverged=diverged)
    # The record leaves the seed or some actions open: replay them as the audit's re-simulation decides them.
    from ledger.resim.resimulate import resimulate

    res = resimulate(events, environments_dir)
    steps, error, diverged = _simulate(*window, res.seeds_found.get(guid, seed), res.choices)
    return frames(steps, error=error, diverged=diverged)


def _simulate(
    info: Any,
    inputs: list[tuple[Numbered, list[Any]]],
    own_at: int,
    first: int,
    with_reasoning: bool,
    seed: int | None,
    choices: Mapping[int, tuple[int, int | None, int | None]],
) -> tuple[list[Step], str | None, str | None]:
    """The steps of ``inputs`` from ``first`` on, numbered from ``own_at``; an error, or where the game diverged."""
    from ledger.toolkit.game_files import LocalGame

    steps: list[Step] = []
    try:
        w = LocalGame(info, seed)
        frame = w.observation_space
        for i, (n, derived) in enumerate(inputs):
            if i > 0:
                frame = _send(w, n.event, choices.get(n.version))
            if i < first:
                continue
            diverged = _divergence(frame, n.event, i - own_at)
            if diverged is not None:
                return steps, None, diverged
            step = _step(i - own_at, n, derived, frame, with_reasoning)
            chosen = choices.get(n.version)
            if chosen is not None:
                step = msgspec.structs.replace(step, action=action_name(chosen[0]), x=chosen[1], y=chosen[2])
            steps.append(step)
    except Exception as e:  # game code that fails to load or step: say so instead of a 500
        return steps, f"no frames: the game code of {info.game_id} raised {type(e).__name__}: {e}", None
    return steps, None, None


def _divergence(frame: Any, ev: Any, n: int) -> str | None:
    if frame is None:
        return f"step {n}: the game returned no response to the recorded {_label(ev)}"
    if type(ev) in (ActionTaken, LevelReset) and len(frame.frame):
        state = getattr(frame.state, "value", str(frame.state))
        if (int(frame.levels_completed), state) != (ev.levels_completed, ev.state):
            return (
                f"step {n}: the game answers levels_completed={frame.levels_completed}, state={state}; the recording "
                f"says levels_completed={ev.levels_completed}, state={ev.state}: frames stop here"
            )
    return None


def _label(ev: Any) -> str:
    if type(ev) is PlayStarted:
        return "RESET (full reset)"
    if type(ev) is LevelReset:
        return "RESET"
    return action_name(ev.action)


def _step(n: int, num: Numbered, derived: list[Any], frame: Any, with_reasoning: bool) -> Step:
    ev = num.event
    grid, width, height = encode_grid(frame.frame[-1]) if len(frame.frame) else (None, 0, 0)
    state = getattr(frame.state, "value", str(frame.state))
    return Step(
        n=n,
        version=num.version,
        action="start" if type(ev) is PlayStarted else _label(ev),
        x=getattr(ev, "x", None),
        y=getattr(ev, "y", None),
        levels_completed=int(frame.levels_completed),
        state=state,
        marks=_marks(derived, ev),
        grid=grid,
        width=width,
        height=height,
        reasoning=getattr(ev, "reasoning", None) if with_reasoning else None,
    )
