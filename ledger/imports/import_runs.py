"""A benchmarking run folder beside a harness recording: its model and run id as tags, its usage kept with the card."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ledger.app.usage import card_usage
from ledger.domain.events import LevelUsage, RunUsage
from ledger.formats.frame_lines import FrameLine
from ledger.formats.import_problems import Problem
from ledger.formats.run_folders import FIGURES, Step, Usage, read_run_folder, read_run_meta, step_usages

if TYPE_CHECKING:
    from ledger.ledger import Ledger


def run_tags(folder: Path | None) -> list[str]:
    meta = read_run_meta(folder) if folder is not None else None
    if meta is None:
        return []
    return [f"{k}:{v}" for k, v in (("model", meta.model), ("run", meta.run_id)) if v]


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
        # The run's own total counts the steps not used too.
        u = _sum([usages[s.step] for s in matched.values() if s.step in usages])
        msg = (
            f"usage counts only the steps used: {_figures(u)} (run_meta.json's total, {_figures(meta.usage)}, counts "
            "the steps not used too)"
        )
        problems.append(Problem(where, None, "harness", msg))
        left = [usages[n] for n in unmatched if n in usages]
        if left:
            msg = f"usage left out with the {len(unmatched)} step(s) not used: {_figures(_sum(left))}"
            problems.append(Problem(where, None, "harness", msg))
    return RunUsage(
        ts=ts,
        folder=folder.name,
        run_id=meta.run_id,
        model=meta.model,
        started_at=meta.started_at,
        ended_at=meta.ended_at,
        levels=levels,
        usage_other=u.other,
        **{f: getattr(u, f) for f in FIGURES},
    )


def _sum(usages: list[Usage]) -> Usage:
    """The figures of ``usages`` added up (None where one gives none), other keys' numbers key by key."""
    out = Usage()
    for f in FIGURES:
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


def usage_held(ledger: Ledger, card_id: str, usage: RunUsage) -> bool:
    return any(u.folder == usage.folder and u.run_id == usage.run_id for u in card_usage(ledger, card_id))


def attach_usage(
    ledger: Ledger, card_id: str, usage: RunUsage, where: str, problems: list[Problem], *, check_held: bool = True
) -> None:
    """Add the run's usage to a held card, its counts and close unchanged (``check_held`` False: a later snapshot)."""
    if check_held and usage_held(ledger, card_id, usage):
        problems.append(Problem(where, None, "harness", f"its usage is on card {card_id} already"))
        return
    card = ledger.load_card(card_id)
    ledger.append_card(card_id, [msgspec.structs.replace(usage, ts=datetime.now(UTC))], card.events)
    msg = f"its usage attached to card {card_id}: {usage.total_tokens} tokens, cost {usage.cost!r}"
    problems.append(Problem(where, None, "harness", msg))
