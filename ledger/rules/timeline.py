"""A card's events for people (``ledger events``) and the toolkit's auto-close as of a moment passed in (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import msgspec

from ledger.domain.events import (
    ActionIgnored,
    ActionTaken,
    CardClosed,
    CardOpened,
    CardReopened,
    CardRetracted,
    GameOver,
    LevelCompleted,
    LevelReset,
    PlayStarted,
    RecordingImported,
    Win,
    type_of,
)
from ledger.domain.projection import CardState

#: The toolkit's defaults and clamping windows (``arc_agi/scorecard.py``).
DEFAULT_STALE_MINUTES = 15
DEFAULT_MAX_OPEN_FOR_MINUTES = 4320
STALE_RANGE = (1, 60)
MAX_OPEN_RANGE = (60, 60 * 24 * 7)


def limits(environ: Mapping[str, str]) -> tuple[int, int]:
    return (
        env_minutes(environ, "STALE_MINUTES", DEFAULT_STALE_MINUTES, *STALE_RANGE),
        env_minutes(environ, "MAX_OPEN_FOR_MINUTES", DEFAULT_MAX_OPEN_FOR_MINUTES, *MAX_OPEN_RANGE),
    )


def env_minutes(environ: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    """A minutes setting read exactly as the toolkit does (a non-int is ``default``), clamped to ``lo..hi``."""
    raw = environ.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        value = default
    return max(lo, min(hi, value))


#: Events that show the toolkit's scorecard was touched (its ``last_update`` refreshed), as the audit's
#: lifecycle check counts them: an ignored action, a close or import bookkeeping is not activity.
ACTIVITY = (CardOpened, PlayStarted, ActionTaken, LevelReset, LevelCompleted, GameOver, Win)

_ACTION_NAMES = {0: "RESET", **{i: f"ACTION{i}" for i in range(1, 8)}}


def _short(guid: str | None) -> str:
    return (guid or "?")[:8]


def summary(event: Any) -> str:
    t = type(event)
    if t is CardRetracted:
        return f"card retracted: {_clip(event.reason, 60)}"
    if t is CardOpened:
        parts = [f"card {event.card_id} opened"]
        if event.tags:
            parts.append("tags " + ",".join(event.tags))
        if event.baselines_id:
            parts.append(f"baselines {event.baselines_id[:12]}")
        if event.competition_mode:
            parts.append("competition")
        return ", ".join(parts)
    if t is PlayStarted:
        seed = f", seed {event.seed}" if event.seed is not None else ""
        return f"{event.game_id} new play, guid {_short(event.guid)}{seed}"
    if t is ActionTaken:
        where = f" at ({event.x},{event.y})" if event.x is not None or event.y is not None else ""
        name = _ACTION_NAMES.get(event.action, f"action {event.action}")
        return f"{event.game_id} {name}{where} -> {event.state}, levels {event.levels_completed}"
    if t is ActionIgnored:
        name = _ACTION_NAMES.get(event.action, f"action {event.action}")
        return f"{event.game_id} {name} ignored (game already {event.state}), not counted"
    if t is LevelReset:
        return f"{event.game_id} RESET of the level (1 action, 1 reset), levels {event.levels_completed}"
    if t is LevelCompleted:
        return f"{event.game_id} level {event.levels_completed} completed after {event.actions} actions"
    if t is GameOver:
        return f"{event.game_id} GAME_OVER, guid {_short(event.guid)}"
    if t is Win:
        return f"{event.game_id} WIN, guid {_short(event.guid)}"
    if t is CardClosed:
        sha = f", document {event.document_sha256[:12]}" if event.document_sha256 else ""
        return f"card closed ({event.reason}){sha}"
    if t is CardReopened:
        return f"card reopened ({event.reason})"
    if t is RecordingImported:
        return f"imported {event.file} up to line {event.lines} (byte {event.offset}), {event.skipped} skipped"
    return _generic(event)


def _generic(event: Any) -> str:
    # Event types added later still get a line: their fields, without the timestamp and long values.
    fields = {k: v for k, v in msgspec.to_builtins(event).items() if k not in ("type", "ts") and v is not None}
    inner = ", ".join(f"{k} {_clip(v)}" for k, v in fields.items())
    return f"{type_of(event).replace('_', ' ')}" + (f": {inner}" if inner else "")


def _clip(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode("utf-8")
    return text if len(text) <= width else text[: width - 3] + "..."


def lapse(
    card: CardState, last_activity: datetime | None, now: datetime, stale_minutes: int, max_open_minutes: int
) -> tuple[datetime, str] | None:
    """When and why (``idle``, ``max_open``: the earlier) the toolkit would have closed this open card by ``now``."""
    if card.closed:
        return None
    moments: list[tuple[datetime, str]] = []
    if last_activity is not None:
        moments.append((last_activity + timedelta(minutes=stale_minutes), "idle"))
    if card.opened_at is not None:
        moments.append((card.opened_at + timedelta(minutes=max_open_minutes), "max_open"))
    due = [m for m in moments if m[0] <= now]
    return min(due) if due else None


def listed(card: CardState, include_retracted: bool = False) -> bool:
    """Whether lists, comparisons, leaderboards and bundles show ``card``: the one rule every list applies."""
    return include_retracted or card.retracted_at is None


def retraction_note(card: CardState) -> str | None:
    """What every reader of a retracted card says (None: not retracted)."""
    if card.retracted_at is None:
        return None
    return retraction_text(card.retracted_at.isoformat(), card.retract_reason)


def retraction_text(when: str, reason: str | None) -> str:
    return f"retracted on {when}, reason: {reason or '(none given)'}"


def shown_close(card: CardState, now: datetime, environ: Mapping[str, str]) -> tuple[datetime, str, bool] | None:
    """(closed at, reason, lapsed) as every reader shows the card, the auto-close passed by ``now``; None while open."""
    if card.closed and card.closed_at is not None:
        return card.closed_at, card.close_reason or "?", False
    at = lapse(card, card.last_ts, now, *limits(environ))
    return (at[0], at[1], True) if at is not None else None


def retraction(card: CardState) -> dict[str, str] | None:
    note = retraction_note(card)
    if note is None or card.retracted_at is None:
        return None
    return {"at": card.retracted_at.isoformat(), "reason": card.retract_reason or "", "note": note}
