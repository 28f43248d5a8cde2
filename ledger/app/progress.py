"""A team's progress: each tag's card scores over time, one series per tag (is the agent getting better?).

A tag is how users name an agent and its versions, so the viewer's progress chart draws, for each chosen tag, the
score of each of its cards (as it stands now), placed at the time the card was opened. Retracted cards are left
out, as ``ledger compare`` leaves them out; a card without an opened time has no place on the time axis and is left
out too. The numbers are the cards summary's, the same as the ``score`` and ``opened`` of ``ledger compare --json
--tag T``.

Cards played under releases whose calculators differ are not drawn against each other as they stand: every drawn
card is scored with one calculator (the newest of theirs, or the one asked for), and the chart says which.

A series is bounded: the newest ``limit`` cards of the tag (one indexed query per tag), and ``older`` names the
card the previous page starts before, so a ledger of 100,000 cards draws a small page and pages back in time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.errors import InputError

if TYPE_CHECKING:
    from ledger.ledger import Ledger

#: Cards drawn per tag on one page of the progress chart.
PER_TAG = 200
#: Tags drawn when none are chosen: those of the newest cards, the most recently used first.
DEFAULT_TAGS = 6
#: The most tags one chart draws.
MOST_TAGS = 12
#: The trend line of a tag: the median of its last this many cards drawn (fewer at its first cards).
TREND_CARDS = 9


class TagSeries(msgspec.Struct, frozen=True, kw_only=True):
    """One tag's cards on the chart, oldest first: ``x`` is ``opened`` in seconds since 1970 (the chart's axis)."""

    tag: str
    cards: list[str]
    opened: list[str]
    x: list[float]
    scores: list[float]
    #: True when the tag has older cards than those drawn.
    more: bool = False
    #: How many cards have the tag in the whole ledger (retracted ones too), when known: what ``cards`` is out of.
    total: int | None = None
    #: At each card, the median score of the tag's last :data:`TREND_CARDS` cards drawn up to it (the trend line).
    trend: list[float] = msgspec.field(default_factory=list)


class Progress(msgspec.Struct, frozen=True, kw_only=True):
    """The progress chart: its series, how many cards each draws at most, and where the older page starts."""

    series: list[TagSeries]
    limit: int
    #: The card the page starts before (None: the newest cards).
    before: str | None = None
    #: The card the next older page starts before (None: every drawn series reaches its tag's first card).
    older: str | None = None
    #: The arc-agi release whose calculator scores every drawn card, and the cards whose own calculator is another.
    calculator: str = ""
    rescored: list[str] = msgspec.field(default_factory=list)


def seconds(opened: str) -> float:
    """An opened time (ISO 8601, as the summary and ``compare --json`` print it) in seconds since 1970."""
    return datetime.fromisoformat(opened).timestamp()


def rolling_median(values: Sequence[float], window: int = TREND_CARDS) -> list[float]:
    """At each value, the median of it and the ``window - 1`` before it (fewer at the start)."""
    import statistics

    return [statistics.median(values[max(0, i + 1 - window) : i + 1]) for i in range(len(values))]


def _series(tag: str, newest_first: Sequence[tuple[str, str, Any, float]], limit: int) -> TagSeries:
    shown = list(reversed(newest_first[:limit]))
    scores = [p[3] for p in shown]
    return TagSeries(
        tag=tag,
        cards=[p[0] for p in shown],
        opened=[p[1] for p in shown],
        x=[seconds(p[1]) for p in shown],
        scores=scores,
        more=len(newest_first) > limit,
        trend=rolling_median(scores),
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
    """The progress chart of ``tags`` (up to :data:`MOST_TAGS`; none: the tags of the newest cards), each the
    newest ``limit`` cards opened before card ``before`` (an id or unique prefix), from the cards summary, every
    card scored with one calculator (``calculator``, else the newest of the drawn cards' own)."""
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


def rows_progress(
    rows: Sequence[Any],
    *,
    limit: int = PER_TAG,
    most: int = MOST_TAGS,
    calculator: str = "",
    rescored: Sequence[str] = (),
) -> Progress:
    """The progress chart of a set of cards' rows (the bundle's cards: ``card_id``, ``tags``, ``opened``, ``score``,
    ``retracted``): the ``most`` tags most recently used, each its newest ``limit`` cards. The rows' scores are
    under ``calculator`` (the cards ``rescored`` with it are named)."""
    live = sorted(
        (r for r in rows if r.retracted is None and r.opened is not None),
        key=lambda r: (seconds(r.opened), r.card_id),
        reverse=True,
    )
    by_tag: dict[str, list[tuple[str, str, float, float]]] = {}
    for r in live:
        for t in dict.fromkeys(r.tags):
            by_tag.setdefault(t, []).append((r.card_id, r.opened, seconds(r.opened), r.score))
    chosen = list(by_tag)[:most]
    series = [_series(t, by_tag[t], limit) for t in chosen]
    return Progress(series=series, limit=limit, calculator=calculator, rescored=list(rescored))
