"""What a harness recording's frames alone say about each line's action (rules in docs/import.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledger.formats.frame_lines import FrameLine, LineMap, LineSet

if TYPE_CHECKING:
    from ledger.formats.run_folders import Step


_ENDS = ("GAME_OVER", "WIN")


@dataclass(slots=True)
class FrameClassification:
    choices: LineMap[tuple[int, int | None, int | None]] = field(default_factory=LineMap)
    undecided: LineSet = field(default_factory=LineSet)
    unreproduced: list[int] = field(default_factory=list)
    #: lineno -> the actions (0: a level RESET) a line could answer when the frames leave it open, its choice first.
    candidates: LineMap[list[int]] = field(default_factory=lambda: LineMap(key=tuple))


def classify_from_frames(frames: Sequence[FrameLine], game_id: str, steps: dict[int, Step]) -> FrameClassification:
    """The actions as far as the frames tell them (rules in docs/import.md)."""
    out = FrameClassification()
    starts: dict[int, set[bytes]] = {}
    prev: FrameLine | None = None
    for line in frames:
        if not line.guid or line.game_id != game_id:
            out.unreproduced.append(line.lineno)
            continue
        if prev is not None and prev.state in _ENDS and line.state == prev.state and not line.empty:
            # After GAME_OVER or WIN the game answers a game action with an empty frame and RESET with a new start:
            # the end's frame again never reached it (the benchmarking harness's copy for an action it did not send).
            out.unreproduced.append(line.lineno)
            continue
        step = steps.get(line.lineno)
        offered = [a for a in (prev.available_actions if prev else line.available_actions) if 1 <= a <= 7]
        fallback = (
            (step.action, step.x, step.y)
            if step is not None and step.action != 0
            else (min(offered or [1]), None, None)
        )
        if line.full_reset or (not line.empty and prev is not None and prev.state == "GAME_OVER"):
            out.choices[line.lineno] = (0, None, None)
            starts.setdefault(line.levels_completed, set()).add(line.last_grid_key())
        elif line.empty:
            out.choices[line.lineno] = fallback
        else:
            key = line.last_grid_key()
            could_reset = prev is not None and prev.levels_completed == line.levels_completed
            known = starts.get(line.levels_completed)
            # A level whose start frame was never seen (the first play's, after Arcade.make's unrecorded RESET)
            # cannot rule a reset out.
            could_reset = could_reset and line.state == "NOT_FINISHED" and (known is None or key in known)
            if could_reset and step is not None:
                out.choices[line.lineno] = (0, None, None) if step.action == 0 else fallback
            else:
                out.choices[line.lineno] = fallback
                if could_reset:
                    out.undecided.add(line.lineno)
                if step is None:
                    # Which offered action it was, the frames alone do not say: keep them all for the audit.
                    # Agents also send actions the game does not offer (the harness's random agent does).
                    first = sorted(set(offered or [1]))
                    cands = first + [a for a in range(1, 8) if a not in first] + ([0] if could_reset else [])
                    if len(cands) > 1:
                        out.candidates[line.lineno] = cands  # equal lists held once (LineMap)
            if prev is not None and line.levels_completed > prev.levels_completed:
                starts.setdefault(line.levels_completed, set()).add(key)
        prev = line
    return out


def from_recorded(
    frames: Sequence[FrameLine], game_id: str, actions: LineMap[tuple[int, int | None, int | None]]
) -> tuple[FrameClassification, list[int]]:
    """The actions a recording that names them says, and the frame lines that name none. Nothing is undecided."""
    out = FrameClassification()
    missing: list[int] = []
    for line in frames:
        if not line.guid or line.game_id != game_id:
            out.unreproduced.append(line.lineno)
            continue
        act = actions.get(line.lineno)
        if act is None:
            missing.append(line.lineno)
        else:
            out.choices[line.lineno] = act
    return out, missing
