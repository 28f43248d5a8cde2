"""Which arc-agi-3-benchmarking run folder belongs to a harness recording, and why the others do not.

A run folder (``{agent_name}.{run_id}/``) and the recording (``{agent_name}.{uuid}.recording.jsonl``) are written
by the same agent, but their names need not agree: the agent name carries the model config's id, which the
harness has spelled differently between versions, and the uuid in the recording's name is the recorder's, not the
run's. So a folder is matched by what it says, never by its name alone: its ``run_meta.json`` names the
recording's game and its own run id; every step written while the recording was being written answers a frame
line (a step is written just before its action is sent, so the line's time follows it); and where the recording
holds the token lines LLM agents write before each model call, each matched step's token count is the sum of those
written since the frame line before (a step with no model call, the RESET forced after GAME_OVER, has none; one
asked again after an unparsable answer, several). Exactly one folder passing all of these is used; a folder of the
same game that fails (or a second one that passes) is named with why.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path

from ledger.formats.frame_lines import FrameLine
from ledger.formats.harness import RUN_DIR, HarnessName
from ledger.formats.run_folders import Step, match_steps, read_run_folder, read_run_meta, step_usages


@dataclass(slots=True)
class RunMatch:
    """The folder used (None when none is) with its steps matched to lines, and the folders not used, with why."""

    folder: Path | None = None
    steps: dict[int, Step] = field(default_factory=dict)
    #: How the folder was matched, for the import's report.
    how: str = ""
    not_used: list[tuple[Path, str]] = field(default_factory=list)


def _span(times: list[datetime]) -> str:
    return f"{times[0].isoformat()} to {times[-1].isoformat()}" if times else "none"


def _judge(
    d: Path, name: HarnessName, frames: Sequence[FrameLine], tokens: Mapping[int, tuple[datetime, int]]
) -> tuple[dict[int, Step], str | None, bool]:
    """(matched steps, why the folder is not this recording's run or None, whether the token counts were compared)."""
    m = RUN_DIR.match(d.name)
    meta = read_run_meta(d)
    if m is None or meta is None:
        return {}, "its run_meta.json is unreadable", False
    if meta.game_id is not None and meta.game_id != name.game_id:
        return {}, f"its run_meta.json names game {meta.game_id}, the recording is of {name.game_id}", False
    if meta.run_id is not None and meta.run_id.lower() != m["run"].lower():
        return {}, f"its run_meta.json's run_id {meta.run_id} is not the folder's {m['run']}", False
    steps = read_run_folder(d)
    if not steps:
        return {}, "no step file with a parsed_action", False
    matched = match_steps(frames, steps)
    used = {s.step for s in matched.values()}
    last = frames[-1].ts if frames else None
    # A step after the recording's last line is one whose answer was never recorded (the run was stopped).
    missing = [s for s in steps if s.step not in used and (last is None or s.ts <= last)]
    if missing or not matched:
        return (
            {},
            f"{len(missing) or len(steps)} of its {len(steps)} step(s) match no frame line (its steps "
            f"{_span([s.ts for s in steps])}, the recording's frame lines {_span([f.ts for f in frames])})",
            False,
        )
    usages = step_usages(d)
    compared = False
    if tokens and usages:
        lines = [(f.lineno, f.ts, matched[f.lineno]) for f in frames if f.lineno in matched]
        for lineno, step, written in _written_before(tokens, lines):
            u = usages.get(step.step)
            if u is None or u.total_tokens is None or written is None:
                continue
            if written != u.total_tokens:
                return (
                    {},
                    f"step_{step.step:03d} says {u.total_tokens} tokens, the recording's token line(s) before its "
                    f"frame line {lineno} say {written}",
                    False,
                )
            compared = True
    return matched, None, compared


def _written_before(
    tokens: Mapping[int, tuple[datetime, int]], lines: list[tuple[int, datetime, Step]]
) -> Iterator[tuple[int, Step, int | None]]:
    """Each matched line (lineno, time, step) with the sum of the token lines written after the line before it and at
    or before its time (None if there is none): the model calls of its step, one token line each (a step asked again
    after an answer it could not parse made several, its usage their sum; a forced RESET made none). Read side by
    side where both go forward in time (a recorder writes them so); a file with lines out of order (imported with
    --allow-repeats) is read again for each line."""
    counts = tokens.values()
    if all(a[0] <= b[0] for a, b in pairwise(counts)) and all(a[1] <= b[1] for a, b in pairwise(lines)):
        left = iter(counts)
        nxt = next(left, None)
        for lineno, at, step in lines:
            written: int | None = None
            while nxt is not None and nxt[0] <= at:
                written, nxt = (written or 0) + nxt[1], next(left, None)
            yield lineno, step, written
        return
    before: datetime | None = None
    for lineno, at, step in lines:
        since = [n for ts, n in counts if ts <= at and (before is None or ts > before)]
        yield lineno, step, sum(since) if since else None
        before = at


def match_run_folder(
    folder: Path, name: HarnessName, frames: Sequence[FrameLine], tokens: Mapping[int, tuple[datetime, int]]
) -> RunMatch:
    """The run folder under ``folder`` that is the recording's run (see the module's rules), and those that are not."""
    out = RunMatch()
    passed: list[tuple[Path, dict[int, Step], bool]] = []
    for d in sorted(p for p in folder.iterdir() if p.is_dir() and (p / "run_meta.json").is_file()):
        m = RUN_DIR.match(d.name)
        meta = read_run_meta(d)
        same_name = m is not None and m["prefix"] == name.prefix
        same_game = (meta is not None and meta.game_id == name.game_id) or d.name.startswith(name.game_id + ".")
        if not (same_name or same_game):
            continue  # another game's run
        matched, why, compared = _judge(d, name, frames, tokens)
        if why is None:
            passed.append((d, matched, compared))
        elif same_name or _overlaps(d, frames):
            out.not_used.append((d, f"not this recording's run: {why}"))
    if len(passed) > 1:
        names = ", ".join(p[0].name for p in passed)
        for d, _, _ in passed:
            out.not_used.append((d, f"{len(passed)} run folders match this recording ({names}): none is used"))
        return out
    if passed:
        out.folder, out.steps, compared = passed[0]
        m = RUN_DIR.match(out.folder.name)
        by = "game, run id and the times of its steps" + (" and their token counts" if compared else "")
        out.how = f"matched by {by}" if m is None or m["prefix"] != name.prefix else f"its name and {by}"
    return out


def _overlaps(d: Path, frames: Sequence[FrameLine]) -> bool:
    """Whether the folder's steps fall in the recording's time (a folder of another time is another run)."""
    steps = read_run_folder(d)
    if not steps or not frames:
        return False
    return steps[0].ts <= frames[-1].ts and steps[-1].ts >= frames[0].ts
