"""What ``ledger cards`` lists: every card's summary, shown as the toolkit would show it now, filtered and sorted.

A card left open by an agent that died is shown closed the way the toolkit would have closed it (``idle`` after
STALE_MINUTES without an event, ``max_open`` after MAX_OPEN_FOR_MINUTES), at that moment; nothing is written.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from ledger.core.projection import CardState
from ledger.core.server_baselines import unknown_baselines
from ledger.core.timeline import listed
from ledger.core.timeline import shown_close as timeline_close
from ledger.ledger import CardSummary, Ledger

SortKey = Literal["opened", "closed", "score", "actions", "events", "id"]
SORT_KEYS: tuple[str, ...] = ("opened", "closed", "score", "actions", "events", "id")


@dataclass(frozen=True, slots=True)
class CardFilter:
    """``ledger cards`` options: every field None/False means "no filter"."""

    tags: tuple[str, ...] = ()
    games: tuple[str, ...] = ()
    state: Literal["open", "closed"] | None = None
    since: datetime | None = None
    limit: int | None = None
    sort: SortKey = "opened"
    reverse: bool = False
    #: Retracted cards are left out unless this is True (then they are listed, marked).
    include_retracted: bool = False


def shown_close(
    card: CardState, now: datetime | None = None, environ: Mapping[str, str] | None = None
) -> tuple[datetime, str, bool] | None:
    """(closed at, reason, lapsed) as every read command shows the card: its own close, or the toolkit's
    auto-close (``lapsed`` True) when it has passed by ``now``; None while the card is open."""
    return timeline_close(card, now or datetime.now(UTC), os.environ if environ is None else environ)


def as_shown(card: CardState, now: datetime | None = None, environ: Mapping[str, str] | None = None) -> CardState:
    """A copy of ``card`` with the toolkit's auto-close applied when it has passed (the card itself is untouched)."""
    shown = shown_close(card, now, environ)
    if shown is None or not shown[2]:
        return card
    return dataclasses.replace(card, closed_at=shown[0], close_reason=shown[1])


def _summary(ledger: Ledger, card_id: str, card: CardState, now: datetime, environ: Mapping[str, str] | None):
    doc = ledger.document(card_id, card=card)
    shown = shown_close(card, now, environ)
    return CardSummary(
        card_id=card_id,
        opened=card.opened_at.isoformat() if card.opened_at else None,
        closed=shown[0].isoformat() if shown else None,
        close_reason=shown[1] if shown else None,
        games=len(card.games),
        plays=sum(len(p) for p in card.games.values()),
        actions=card.total_actions,
        score=doc.score,
        events=card.events,
        tags=card.all_tags or None,
        lapsed=bool(shown and shown[2]),
        retracted=card.retracted_at.isoformat() if card.retracted_at else None,
        retract_reason=card.retract_reason,
        baselines_known=not unknown_baselines(card, doc),
    )


def _keep(card: CardState, f: CardFilter, shown: bool) -> bool:
    if not listed(card, f.include_retracted):
        return False
    if f.tags and not set(f.tags) <= set(card.all_tags):
        return False
    if f.games and not any(g == gid or gid.split("-", 1)[0] == g for g in f.games for gid in card.games):
        return False
    if f.state == "open" and shown:
        return False
    if f.state == "closed" and not shown:
        return False
    return not (f.since is not None and (card.opened_at is None or card.opened_at < f.since))


def _sort_key(s: CardSummary, key: str) -> tuple[object, ...]:
    if key == "id":
        return (s.card_id,)
    if key in ("score", "actions", "events"):
        return (getattr(s, key), s.opened or "", s.card_id)
    value = s.closed if key == "closed" else s.opened
    # Cards without the time sort last, then by id so the order is stable.
    return (value is None, _instant(value), s.card_id)


def _instant(iso: str | None) -> datetime:
    if iso is None:
        return datetime.min.replace(tzinfo=UTC)
    t = datetime.fromisoformat(iso)
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def list_cards(
    ledger: Ledger,
    f: CardFilter | None = None,
    *,
    now: datetime | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[CardSummary]:
    """Every card matching ``f``, sorted by ``f.sort`` (default: when opened, oldest first), at most ``f.limit``."""
    f = f or CardFilter()
    moment = now or datetime.now(UTC)
    out = []
    for cid, card in ledger.load_cards(ledger.card_ids()).items():
        closed = shown_close(card, moment, environ) is not None
        if _keep(card, f, closed):
            out.append(_summary(ledger, cid, card, moment, environ))
    out.sort(key=lambda s: _sort_key(s, f.sort), reverse=f.reverse)
    return out[: f.limit] if f.limit is not None else out
