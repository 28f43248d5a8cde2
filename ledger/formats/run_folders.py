"""arc-agi-3-benchmarking's run folders: ``run_meta.json`` and ``step_NNN.json``; key names vary between its versions,
so each figure is read from the first key that holds it. Folder and recording names need not agree, so
:func:`match_run_folder` matches by content (game, run id, step times, token counts); exactly one passing folder is
used."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from ledger.formats.builtin_readers import ACTION_NAMES, RUN_DIR, HarnessName
from ledger.formats.frame_lines import FrameLine


@dataclass(slots=True)
class RunMatch:
    """The folder used (None when none is) with its steps matched to lines, and the folders not used, with why."""

    folder: Path | None = None
    steps: dict[int, Step] = field(default_factory=dict)
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
    """Each matched line (lineno, time, step) with its step's model calls: the token lines since the line before."""
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
    steps = read_run_folder(d)
    if not steps or not frames:
        return False
    return steps[0].ts <= frames[-1].ts and steps[-1].ts >= frames[0].ts


#: Each figure of :class:`Usage` with the keys that may hold it (key names vary between versions), the first used.
_KEYS = {
    "input_tokens": ("input_tokens", "prompt_tokens"),
    "output_tokens": ("output_tokens", "completion_tokens"),
    "total_tokens": ("total_tokens", "tokens"),
    "cost": ("total_cost", "cost", "cost_usd"),
    "cached_tokens": ("cached_tokens", "cache_read_tokens"),
    "reasoning_tokens": ("reasoning_tokens",),
    "cache_write_tokens": ("cache_write_tokens", "cache_creation_tokens"),
}
FIGURES = tuple(_KEYS)
_NAMED = {k for keys in _KEYS.values() for k in keys}
_META_READ = {"run_id", "game_id", "model", "config", "started_at", "start_time", "ended_at", "end_time"}
_META_READ |= {"finished_at", "usage", "total_usage", "token_usage", *_NAMED}


@dataclass(slots=True)
class Usage:
    """``other``: the usage object's other keys, as given."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cost: float | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None
    other: dict[str, Any] | None = None


@dataclass(slots=True)
class RunMeta:
    run_id: str | None
    game_id: str | None
    model: str | None
    started_at: str | None
    ended_at: str | None
    usage: Usage
    unused: list[str] = field(default_factory=list)


def _number(d: dict[str, Any], keys: tuple[str, ...], kind: type) -> Any:
    for k in keys:
        v = d.get(k)
        if isinstance(v, dict):
            v = next((v[j] for j in _KEYS["cost"] if isinstance(v.get(j), int | float)), None)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return kind(v)
    return None


def usage_of(d: Any) -> Usage:
    """Tokens and cost from a usage object (or the object holding them at its top, the top's figures first)."""
    if not isinstance(d, dict):
        return Usage()
    inner = next((d[k] for k in ("usage", "total_usage", "token_usage") if isinstance(d.get(k), dict)), None)
    u = usage_of_flat(d, keep_other=False)
    if inner is not None:
        v = usage_of_flat(inner)
        u = Usage(**{f: getattr(u, f) if getattr(u, f) is not None else getattr(v, f) for f in (*FIGURES, "other")})
    if u.total_tokens is None and u.input_tokens is not None and u.output_tokens is not None:
        u.total_tokens = u.input_tokens + u.output_tokens
    return u


def usage_of_flat(d: dict[str, Any], *, keep_other: bool = True) -> Usage:
    other = {k: v for k, v in d.items() if k not in _NAMED} if keep_other else {}
    figures = {f: _number(d, keys, float if f == "cost" else int) for f, keys in _KEYS.items()}
    return Usage(**figures, other=other or None)


def _text(d: dict[str, Any], *keys: str) -> str | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def read_run_meta(folder: Path) -> RunMeta | None:
    try:
        d = json.loads((folder / "run_meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict):
        return None
    return RunMeta(
        run_id=_text(d, "run_id"),
        game_id=_text(d, "game_id"),
        model=_text(d, "model", "config"),
        started_at=_text(d, "started_at", "start_time"),
        ended_at=_text(d, "ended_at", "end_time", "finished_at"),
        usage=usage_of(d),
        unused=sorted(k for k in d if k not in _META_READ),
    )


def _step_files(folder: Path) -> Iterator[tuple[int, Any]]:
    """Each step file's number and JSON, in name order; a file unreadable or without a ``step`` number left out."""
    for f in sorted(folder.glob("step_*.json")):
        try:
            d = json.loads(f.read_text(encoding="utf-8"))
            n = int(d["step"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        yield n, d


def step_usages(folder: Path) -> dict[int, Usage]:
    out: dict[int, Usage] = {}
    for n, d in _step_files(folder):
        u = usage_of(d)
        if u.total_tokens is not None or u.cost is not None:
            out[n] = u
    return out


@dataclass(frozen=True, slots=True)
class Step:
    """One ``step_NNN.json``: the action the agent chose (``x``/``y`` for ACTION6) and when."""

    step: int
    ts: datetime
    action: int
    x: int | None = None
    y: int | None = None


def _parse_action(value: Any) -> tuple[int, int | None, int | None] | None:
    if isinstance(value, str):
        a = ACTION_NAMES.get(value.strip().upper())
        return (a, None, None) if a is not None else None
    if isinstance(value, dict):
        a = ACTION_NAMES.get(str(value.get("action", "")).upper())
        if a is None:
            return None
        x, y = value.get("x"), value.get("y")
        return a, x if isinstance(x, int) else None, y if isinstance(y, int) else None
    return None


def read_run_folder(folder: Path) -> list[Step]:
    steps: list[Step] = []
    for n, d in _step_files(folder):
        try:
            ts = utc(str(d["timestamp"]))
        except (ValueError, KeyError):
            continue
        parsed = _parse_action(d.get("parsed_action"))
        if parsed is not None:
            steps.append(Step(n, ts, *parsed))
    steps.sort(key=lambda s: s.step)
    return steps


def utc(text: str) -> datetime:
    """An ISO 8601 time (``Z`` for UTC), UTC when it gives no zone."""
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def match_steps(frames: Sequence[FrameLine], steps: list[Step]) -> dict[int, Step]:
    """lineno -> the step whose action it answers: the first frame line from the step's time, before the next's."""
    out: dict[int, Step] = {}
    i = 0
    for k, s in enumerate(steps):
        nxt = steps[k + 1].ts if k + 1 < len(steps) else None
        while i < len(frames) and frames[i].ts < s.ts:
            i += 1
        if i < len(frames) and (nxt is None or frames[i].ts <= nxt):
            out[frames[i].lineno] = s
            i += 1
    return out
