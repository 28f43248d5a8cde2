"""The audit's lifecycle check (pure): where the toolkit's idle (STALE_MINUTES) and open-time
(MAX_OPEN_FOR_MINUTES) limits would have closed the card under the agent. A warning, never a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from ledger.domain.events import (
    ActionIgnored,
    ActionTaken,
    CardOpened,
    GameOver,
    LevelCompleted,
    LevelReset,
    Numbered,
    PlayStarted,
    Win,
)
from ledger.rules.audit_checks import Check

# The toolkit's limits live with the auto-close rule (ledger.rules.timeline), which lists need without the audit.
from ledger.rules.timeline import (
    DEFAULT_MAX_OPEN_FOR_MINUTES,
    DEFAULT_STALE_MINUTES,
    MAX_OPEN_RANGE,
    STALE_RANGE,
    env_minutes,
    limits,
)

__all__ = [
    "DEFAULT_MAX_OPEN_FOR_MINUTES",
    "DEFAULT_STALE_MINUTES",
    "MAX_OPEN_RANGE",
    "STALE_RANGE",
    "check_lifecycle",
    "env_minutes",
    "limits",
]


# -- 4. lifecycle -----------------------------------------------------------------------------------------------

#: Events that mean the toolkit's scorecard was touched (opened, or ``update_scorecard`` refreshed ``last_update``).
#: An ignored action's empty frame never reaches the scorecard; closes and import bookkeeping are not updates.
_ACTIVITY = (CardOpened, PlayStarted, ActionTaken, LevelReset, LevelCompleted, GameOver, Win)


def check_lifecycle(events: Sequence[Numbered], stale: int, max_open: int) -> Check:
    """Where the toolkit would have closed the card: idle for ``stale`` minutes, open for ``max_open`` minutes.

    The toolkit closes a card once ``now - last_update >= idle_for`` or ``now - open_at >= max_open_for``;
    an event that arrives past such a point would have landed on a new card. Pure.
    """
    idle_for = timedelta(minutes=stale)
    max_for = timedelta(minutes=max_open)
    gaps: list[dict[str, Any]] = []
    over: dict[str, Any] | None = None
    first_close_index: int | None = None
    opened_at = next((n.event.ts for n in events if isinstance(n.event, CardOpened)), None)
    if opened_at is None and events:
        opened_at = events[0].event.ts
    last: Numbered | None = None
    longest: tuple[timedelta, Numbered | None, Numbered | None] = (timedelta(0), None, None)
    for i, n in enumerate(events):
        ev = n.event
        if not isinstance(ev, _ACTIVITY):
            continue
        if last is not None:
            gap = ev.ts - last.event.ts
            if gap > longest[0]:
                longest = (gap, last, n)
            if gap >= idle_for:
                gaps.append(_idle_gap(last, n, gap))
                if first_close_index is None:
                    first_close_index = i
        if over is None and opened_at is not None and ev.ts - opened_at >= max_for:
            over = _past_max_open(n, opened_at, max_for)
            if first_close_index is None or i < first_close_index:
                first_close_index = i
        last = n
    after_events = after_actions = 0
    if first_close_index is not None:
        for n in events[first_close_index:]:
            after_events += isinstance(n.event, (*_ACTIVITY, ActionIgnored))
            after_actions += isinstance(n.event, ActionTaken | LevelReset)
    open_minutes = (
        round(((last.event.ts if last else opened_at) - opened_at).total_seconds() / 60, 3) if opened_at else 0.0
    )
    details: dict[str, Any] = {
        "stale_minutes": stale,
        "max_open_minutes": max_open,
        "idle_gaps": gaps,
        "max_open": over,
        "open_minutes": open_minutes,
        "events_after_first_close": after_events,
        "actions_after_first_close": after_actions,
    }
    return _lifecycle_check(details, longest)


def _idle_gap(last: Numbered, n: Numbered, gap: timedelta) -> dict[str, Any]:
    """A gap between updates long enough for the toolkit to close the card as stale."""
    return {
        "previous_version": last.version,
        "previous_ts": last.event.ts.isoformat(),
        "version": n.version,
        "seq": n.seq,
        "ts": n.event.ts.isoformat(),
        "minutes": round(gap.total_seconds() / 60, 3),
    }


def _past_max_open(n: Numbered, opened_at: datetime, max_for: timedelta) -> dict[str, Any]:
    """The first update that came after the card had been open for the toolkit's maximum."""
    return {
        "version": n.version,
        "seq": n.seq,
        "ts": n.event.ts.isoformat(),
        "opened_at": opened_at.isoformat(),
        "closes_at": (opened_at + max_for).isoformat(),
        "minutes": round((n.event.ts - opened_at).total_seconds() / 60, 3),
    }


def _lifecycle_check(details: dict[str, Any], longest: tuple[timedelta, Numbered | None, Numbered | None]) -> Check:
    """The lifecycle check's status and message, from its details and the longest gap between updates."""
    stale, max_open, open_minutes = details["stale_minutes"], details["max_open_minutes"], details["open_minutes"]
    gaps, over = details["idle_gaps"], details["max_open"]
    after_events, after_actions = details["events_after_first_close"], details["actions_after_first_close"]
    if not gaps and over is None:
        lg, a, b = longest
        lg_txt = (
            f"longest {lg.total_seconds() / 60:.1f} min, between versions {a.version} and {b.version}"
            if a is not None and b is not None
            else "no gaps"
        )
        msg = (
            f"no idle gap of STALE_MINUTES={stale} or more ({lg_txt}); open {open_minutes:.1f} min "
            f"of MAX_OPEN_FOR_MINUTES={max_open}"
        )
        return Check("lifecycle", "PASS", msg, details)
    parts = []
    if gaps:
        shown = "; ".join(
            f"version {g['version']} at {g['ts']} came {g['minutes']:.1f} min after version {g['previous_version']}"
            for g in gaps[:3]
        )
        more = f" (+{len(gaps) - 3} more)" if len(gaps) > 3 else ""
        parts.append(f"{len(gaps)} idle gap(s) of STALE_MINUTES={stale} or more: {shown}{more}")
    if over is not None:
        parts.append(
            f"version {over['version']} at {over['ts']} came {over['minutes']:.1f} min after the card opened "
            f"(MAX_OPEN_FOR_MINUTES={max_open}: closed at {over['closes_at']})"
        )
    msg = (
        "; ".join(parts) + f"; the toolkit would have closed the card there, and the {after_events} later event(s) "
        f"({after_actions} action(s)) would have landed on a new card"
    )
    return Check("lifecycle", "WARN", msg, details)
