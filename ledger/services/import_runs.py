"""A benchmarking run folder beside a harness recording: its model and run id as the card's tags, its usage and
cost kept with the card (``RunUsage``, split by the level being played), and what of it the import did not use."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec

from ledger.core.events import LevelUsage, RunUsage, card_stream, decode
from ledger.toolkit.frame_lines import FrameLine
from ledger.toolkit.import_problems import Problem
from ledger.toolkit.run_folders import Step, Usage, read_run_folder, read_run_meta, step_usages

if TYPE_CHECKING:
    from ledger.ledger import Ledger


def run_tags(folder: Path | None) -> list[str]:
    """``model:<model>`` and ``run:<run id>`` of the run folder (none without one)."""
    meta = read_run_meta(folder) if folder is not None else None
    if meta is None:
        return []
    return [
        t for t in (f"model:{meta.model}" if meta.model else None, f"run:{meta.run_id}" if meta.run_id else None) if t
    ]


def run_usage(
    folder: Path, frames: Sequence[FrameLine], matched: dict[int, Step], ts: datetime, problems: list[Problem]
) -> RunUsage | None:
    """The run's usage event (None without a readable run_meta.json); notes what was not used into ``problems``."""
    meta = read_run_meta(folder)
    if meta is None:
        return None
    usages = step_usages(folder)
    per_level: dict[int, list[float | int | None]] = {}
    prev_levels = 0
    for line in frames:
        step = matched.get(line.lineno)
        if step is not None:
            u = usages.get(step.step)
            acc = per_level.setdefault(prev_levels, [0, 0, 0.0])
            acc[0] = int(acc[0] or 0) + 1
            acc[1] = None if u is None or u.total_tokens is None or acc[1] is None else int(acc[1]) + u.total_tokens
            acc[2] = None if u is None or u.cost is None or acc[2] is None else float(acc[2]) + u.cost
        prev_levels = line.levels_completed
    levels = [LevelUsage(lv, int(a[0] or 0), a[1], a[2]) for lv, a in sorted(per_level.items())]  # type: ignore[arg-type]
    used = {s.step for s in matched.values()}
    steps = read_run_folder(folder)
    unmatched = [s.step for s in steps if s.step not in used]
    where = str(folder)
    unread = sum(1 for _ in folder.glob("step_*.json")) - len(steps)
    if unread > 0:
        msg = f"{unread} step file(s) unreadable or without a parsed_action, not used"
        problems.append(Problem(where, None, "harness", msg))
    if unmatched:
        shown = ", ".join(f"step_{n:03d}" for n in unmatched[:5]) + (" ..." if len(unmatched) > 5 else "")
        problems.append(Problem(where, None, "harness", f"{len(unmatched)} step(s) matched no line, not used: {shown}"))
    if meta.unused:
        problems.append(Problem(where, None, "harness", f"run_meta.json keys not used: {', '.join(meta.unused)}"))
    u = meta.usage
    if unmatched:
        u = _steps_only(where, meta.usage, [usages[s.step] for s in matched.values() if s.step in usages], problems)
        left = [usages[n] for n in unmatched if n in usages]
        if left:
            out = _sum(left)
            problems.append(
                Problem(
                    where,
                    None,
                    "harness",
                    f"usage left out with the {len(unmatched)} step(s) not used: {_figures(out)}",
                )
            )
    # The event's fields one by one, from two sources (run_meta.json and its usage): no struct to copy whole.
    return RunUsage(
        ts=ts,
        folder=folder.name,
        run_id=meta.run_id,
        model=meta.model,
        started_at=meta.started_at,
        ended_at=meta.ended_at,
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.total_tokens,
        cost=u.cost,
        levels=levels,
        cached_tokens=u.cached_tokens,
        reasoning_tokens=u.reasoning_tokens,
        cache_write_tokens=u.cache_write_tokens,
        usage_other=u.other,
    )


_SUMMED = (
    *("input_tokens", "output_tokens", "total_tokens", "cost"),
    *("cached_tokens", "reasoning_tokens", "cache_write_tokens"),
)


def _sum(usages: list[Usage]) -> Usage:
    """The figures of ``usages`` added up (None where one of them gives none); numbers in their other keys' objects
    (``cost_details``) added up key by key."""
    out = Usage()
    for f in _SUMMED:
        values = [getattr(u, f) for u in usages]
        setattr(out, f, None if not values or any(v is None for v in values) else sum(values))
    other: dict[str, dict[str, float]] = {}
    for u in usages:
        for k, v in (u.other or {}).items():
            if isinstance(v, dict):
                acc = other.setdefault(k, {})
                for kk, n in v.items():
                    if isinstance(n, int | float) and not isinstance(n, bool):
                        acc[kk] = acc.get(kk, 0) + n
    out.other = other or None
    return out


def _figures(u: Usage) -> str:
    tokens = f"{u.total_tokens} tokens" if u.total_tokens is not None else "tokens not given"
    return tokens + (f", cost {u.cost!r}" if u.cost is not None else ", cost not given")


def _steps_only(where: str, whole: Usage, used: list[Usage], problems: list[Problem]) -> Usage:
    """The usage of the steps used, when steps were left out: the run's own total counts them too."""
    u = _sum(used)
    msg = (
        f"usage counts only the steps used: {_figures(u)} (run_meta.json's total, {_figures(whole)}, counts the steps "
        "not used too)"
    )
    problems.append(Problem(where, None, "harness", msg))
    return u


def usage_lines(usages: list[RunUsage]) -> list[str]:
    """How ``replay`` shows a card's run usage: the run, its totals, the cost per level where the steps give it."""
    out = []
    for u in usages:
        head = f"run {u.run_id or u.folder}" + (f", model {u.model}" if u.model else "")
        figures = []
        if u.total_tokens is not None:
            figures.append(f"{u.total_tokens} tokens")
        if u.cost is not None:
            figures.append(_cost(u.cost, f"${u.cost!r}"))
        parts = [
            f"{n} {what}"
            for n, what in (
                (u.input_tokens, "input"),
                (u.output_tokens, "output"),
                (u.cached_tokens, "cached"),
                (u.reasoning_tokens, "reasoning"),
                (u.cache_write_tokens, "cache-write"),
            )
            if n is not None
        ]
        parts += [f"{k} {json.dumps(v)}" for k, v in (u.usage_other or {}).items()]
        out.append(head + (": " + ", ".join(figures) if figures else "") + (f" ({', '.join(parts)})" if parts else ""))
        for lv in u.levels:
            cost = _cost(lv.cost, f"${lv.cost:.4f}") if lv.cost is not None else "cost not given"
            tokens = f", {lv.tokens} tokens" if lv.tokens is not None else ""
            out.append(f"  level {lv.levels_completed + 1}: {lv.steps} step(s), {cost}{tokens}")
    return out


def _cost(cost: float, shown: str) -> str:
    # A run that reports 0 (no price configured for its model) did not run for free: say what the file says.
    return f"cost reported as {cost!r}" if cost == 0 else shown


def card_usage(ledger: Ledger, card_id: str) -> list[RunUsage]:
    """The run usage kept with a card (empty for a card no file gave usage to), a run given by several snapshots
    as its latest (:func:`current`)."""
    bodies, _, _ = ledger.store.read_bodies(card_stream(card_id))
    return current(_usage_events(bodies))


def _usage_events(bodies: Iterable[bytes]) -> list[RunUsage]:
    # Only these few events are decoded: a long card's actions are skipped by their leading tag.
    return [cast(RunUsage, decode(b)) for b in bodies if bytes(b).startswith(b'{"type":"run_usage"')]


def _snapshot_key(u: RunUsage) -> tuple[str, str] | None:
    # A reader's files of one run each give its running total (run_id set, folder "<reader>:<file>"): the latest
    # stands for the run. A run folder's usage (its folder's name, no reader) is a whole of its own.
    if u.run_id is None or ":" not in u.folder:
        return None
    return u.folder.split(":", 1)[0], u.run_id


def current(usages: Sequence[RunUsage]) -> list[RunUsage]:
    """``usages`` without the snapshots a later one of the same run replaced (the events keep them all)."""
    last = {k: i for i, u in enumerate(usages) if (k := _snapshot_key(u)) is not None}
    return [u for i, u in enumerate(usages) if (k := _snapshot_key(u)) is None or last[k] == i]


def same_run(usages: Sequence[RunUsage], usage: RunUsage) -> RunUsage | None:
    """The snapshot of ``usage``'s run among ``usages`` (None: the card holds none of it)."""
    key = _snapshot_key(usage)
    return next((u for u in reversed(usages) if key is not None and _snapshot_key(u) == key), None)


def usage_held(ledger: Ledger, card_id: str, usage: RunUsage) -> bool:
    """Whether the card holds this run's usage already (the same folder and run id)."""
    return any(u.folder == usage.folder and u.run_id == usage.run_id for u in card_usage(ledger, card_id))


class _Said(msgspec.Struct):
    game_id: str = ""
    reasoning: Any = None


_said = msgspec.json.Decoder(_Said)


def reasoning_tokens(bodies: Iterable[bytes]) -> int | None:
    """The tokens a REST harness says it has used in the reasoning it sent with each action (joinplank's
    arc-agi-3-benchmarking: ``"tokens:": [prompt, completion]``, the run's running total): per game its last
    action's, added up over the games. None when no action says any.

    Read from the card's actions whenever it is shown, not recorded as a usage event at close: that harness leaves
    every card it did not win open, so a close may never come; the counts are on the hash chain already (each
    action's reasoning), so a second copy of them could only disagree; and cards captured before this existed show
    theirs too.
    """
    last: dict[str, int] = {}
    for b in bodies:
        raw = bytes(b)
        if not raw.startswith(b'{"type":"action_taken"') or b'"tokens:"' not in raw:
            continue
        said = _said.decode(raw)
        t = said.reasoning.get("tokens:") if isinstance(said.reasoning, dict) else None
        if isinstance(t, list) and len(t) == 2 and all(type(n) is int and n >= 0 for n in t):
            last[said.game_id] = t[0] + t[1]
    return sum(last.values()) if last else None


def attach_usage(
    ledger: Ledger, card_id: str, usage: RunUsage, where: str, problems: list[Problem], *, check_held: bool = True
) -> None:
    """Add the run's usage to a card already in the ledger (captured live, or imported without its run folder): a
    fact beside its counts, so the card's numbers and its close stay as they are. ``check_held`` False: a later
    snapshot of a run the card holds (:func:`same_run`), added whatever its file's name."""
    if check_held and usage_held(ledger, card_id, usage):
        problems.append(Problem(where, None, "harness", f"its usage is on card {card_id} already"))
        return
    card = ledger.load_card(card_id)
    ledger.append_card(card_id, [msgspec.structs.replace(usage, ts=datetime.now(UTC))], card.events)
    msg = f"its usage attached to card {card_id}: {usage.total_tokens} tokens, cost {usage.cost!r}"
    problems.append(Problem(where, None, "harness", msg))


def usage_totals(ledger: Ledger, card_ids: Sequence[str]) -> dict[str, tuple[int | None, float | None]]:
    """card id -> (tokens, cost) of the runs' usage kept with it, else the tokens its actions' reasoning says
    (:func:`reasoning_tokens`, no cost); (None, None) for a card with neither, and a figure none of its runs gives
    is None. One read of each card's events."""
    out: dict[str, tuple[int | None, float | None]] = {}
    for cid in card_ids:
        bodies, _, _ = ledger.store.read_bodies(card_stream(cid))
        usages = current(_usage_events(bodies))
        if not usages:
            out[cid] = (reasoning_tokens(bodies), None)
            continue
        tokens = [u.total_tokens for u in usages if u.total_tokens is not None]
        costs = [u.cost for u in usages if u.cost is not None]
        out[cid] = (sum(tokens) if tokens else None, sum(costs) if costs else None)
    return out


def usage_costs(ledger: Ledger, card_ids: Sequence[str], chunk: int = 500) -> dict[str, float]:
    """card id -> the cost its runs' usage gives, for the cards of ``card_ids`` whose usage gives one: only their
    usage events are read, a query per ``chunk`` cards."""
    from ledger.storage.summary_build import query

    found: dict[str, list[RunUsage]] = {}
    streams = [card_stream(c) for c in card_ids]
    for i in range(0, len(streams), chunk):
        part = streams[i : i + chunk]
        sql = (
            f"SELECT stream, body FROM events WHERE type = 'run_usage' AND stream IN ({', '.join('?' * len(part))}) "
            "ORDER BY stream, version"
        )
        for stream, body in query(ledger.store, sql, part):
            found.setdefault(stream, []).append(cast(RunUsage, decode(bytes(body))))
    out: dict[str, float] = {}
    for cid, stream in zip(card_ids, streams, strict=True):
        costs = [u.cost for u in current(found.get(stream, [])) if u.cost is not None]
        if costs:
            out[cid] = sum(costs)
    return out
