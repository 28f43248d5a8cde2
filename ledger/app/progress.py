"""The viewer's progress chart: each tag's card scores over the time each card was opened, one series per tag. A series
is the newest ``limit`` cards of the tag; ``older`` names where the previous page starts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.errors import InputError

if TYPE_CHECKING:
    from ledger.ledger import Ledger

PER_TAG = 200
#: Tags drawn when none are chosen: those of the newest cards.
DEFAULT_TAGS = 6
MOST_TAGS = 12
#: The trend line of a tag: the median of its last this many cards drawn.
TREND_CARDS = 9


class TagSeries(msgspec.Struct, frozen=True, kw_only=True):
    """One tag's cards on the chart, oldest first (``x``: ``opened`` in seconds since 1970)."""

    tag: str
    cards: list[str]
    opened: list[str]
    x: list[float]
    scores: list[float]
    more: bool = False
    #: How many cards have the tag in the whole ledger (retracted ones too), when known.
    total: int | None = None
    trend: list[float] = msgspec.field(default_factory=list)


class Progress(msgspec.Struct, frozen=True, kw_only=True):
    series: list[TagSeries]
    limit: int
    #: The card the page starts before (None: the newest cards), and the one the next older page starts before.
    before: str | None = None
    older: str | None = None
    #: The arc-agi release whose calculator scores every drawn card, and the cards whose own calculator is another.
    calculator: str = ""
    rescored: list[str] = msgspec.field(default_factory=list)


def seconds(opened: str) -> float:
    return datetime.fromisoformat(opened).timestamp()


def _series(tag: str, newest_first: Sequence[tuple[str, str, Any, float]], limit: int) -> TagSeries:
    import statistics

    shown = list(reversed(newest_first[:limit]))
    scores = [p[3] for p in shown]
    return TagSeries(
        tag=tag,
        cards=[p[0] for p in shown],
        opened=[p[1] for p in shown],
        x=[seconds(p[1]) for p in shown],
        scores=scores,
        more=len(newest_first) > limit,
        trend=[statistics.median(scores[max(0, i + 1 - TREND_CARDS) : i + 1]) for i in range(len(scores))],
    )


def _older(series: Sequence[TagSeries], keys: dict[str, Any]) -> str | None:
    # The older page starts before the latest of the first cards of the series that were cut: a series that was
    # not cut is whole, and starting any earlier would skip cards of a cut series that this page did not draw.
    cut = [s.cards[0] for s in series if s.more and s.cards]
    return max(cut, key=lambda c: (keys[c], c), default=None)


def tag_progress(
    ledger: Ledger,
    tags: Sequence[str],
    *,
    limit: int = PER_TAG,
    before: str | None = None,
    calculator: str | None = None,
) -> Progress:
    """The progress chart of ``tags`` (none: the newest cards'), each its newest ``limit`` cards before ``before``."""
    from ledger.app.card_read import one_of, own_calculators, rescored
    from ledger.store.summary import recent_tags, tag_count, tag_points

    if limit < 1:
        raise InputError("the progress chart draws at least one card per tag")
    start = ledger.resolve_card(before) if before else None
    chosen = list(dict.fromkeys(tags))[:MOST_TAGS] or recent_tags(ledger.store, 100)[:DEFAULT_TAGS]
    keys: dict[str, Any] = {}
    drawn: dict[str, list[tuple[str, str, Any, float]]] = {}
    for tag in chosen:
        drawn[tag] = tag_points(ledger.store, tag, limit + 1, start)
        keys.update({p[0]: p[2] for p in drawn[tag]})
    own = own_calculators(ledger, list(keys))
    calc = one_of(own.values(), calculator)
    moved = rescored(ledger, own, calc)
    series = [
        msgspec.structs.replace(
            _series(t, [(p[0], p[1], p[2], moved.get(p[0], p[3])) for p in pts], limit),
            total=tag_count(ledger.store, t),
        )
        for t, pts in drawn.items()
    ]
    return Progress(
        series=series,
        limit=limit,
        before=start,
        older=_older(series, keys),
        calculator=calc.version,
        rescored=list(moved),
    )


def rows_progress(rows: Sequence[Any], *, calculator: str = "", rescored: Sequence[str] = ()) -> Progress:
    """The progress chart of the bundle's card rows: the most recently used tags, each its newest cards."""
    live = sorted(
        (r for r in rows if r.retracted is None and r.opened is not None),
        key=lambda r: (seconds(r.opened), r.card_id),
        reverse=True,
    )
    by_tag: dict[str, list[tuple[str, str, float, float]]] = {}
    for r in live:
        for t in dict.fromkeys(r.tags):
            by_tag.setdefault(t, []).append((r.card_id, r.opened, seconds(r.opened), r.score))
    chosen = list(by_tag)[:MOST_TAGS]
    series = [_series(t, by_tag[t], PER_TAG) for t in chosen]
    return Progress(series=series, limit=PER_TAG, calculator=calculator, rescored=list(rescored))
