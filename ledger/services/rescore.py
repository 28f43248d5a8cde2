"""Re-scoring cards of a ledger (:func:`rescore_cards`) and one card under a chosen set (:func:`document_for`).

The scoring and the comparison are pure (:mod:`ledger.core.rescoring`); this module reads the cards.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledger.core.calculators import Calculator
from ledger.core.document import ScorecardDoc
from ledger.core.events import BaselineEntry
from ledger.core.projection import CardState
from ledger.core.rescoring import CardRescore, GameMatch, Match, rescore_card, score_under

if TYPE_CHECKING:
    from ledger.ledger import Ledger


def rescore_cards(
    ledger: Ledger,
    card_ids: Iterable[str],
    new_entries: Mapping[str, BaselineEntry] | None,
    *,
    match: Match = "exact",
    all_environments: bool = False,
    chunk: int = 256,
    calculator: Calculator | None = None,
) -> Iterator[CardRescore]:
    """:func:`rescore_card` for each card of the ledger, in the order given (a read: nothing is written), under
    ``new_entries`` (None: each card's own set) and ``calculator`` (None: each card's own).

    Cards are loaded ``chunk`` at a time with ``Ledger.load_cards`` (one query for their cached projections),
    so memory stays bounded however many cards there are.
    """
    ids = list(card_ids)
    for i in range(0, len(ids), chunk):
        cards = ledger.load_cards(ids[i : i + chunk])
        for cid in ids[i : i + chunk]:
            card = cards[cid]
            yield rescore_card(
                card,
                ledger.card_baselines(card),
                new_entries if new_entries is not None else ledger.card_baselines(card),
                match=match,
                all_environments=all_environments,
                calculator=calculator,
            )


# -- one card, for export and replay -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scored:
    """A card's document under a chosen set, with what chose it."""

    card: CardState
    doc: ScorecardDoc
    set_id: str | None
    matches: list[GameMatch]


def document_for(
    ledger: Ledger,
    card_id: str,
    *,
    until: int | None = None,
    baselines: str | None = None,
    match: Match = "exact",
    all_environments: bool = False,
) -> Scored:
    """The card (up to ``until``) scored under the set named by ``baselines`` (label, id or id prefix; default:
    the set it was played under), matched by ``match``, optionally over every game of the set."""
    from ledger.services.baseline_sets import resolve

    card = ledger.load_card(card_id, until=until)
    sid: str | None
    if baselines is not None:
        sid = chosen = resolve(ledger, baselines)
        entries = ledger.baselines(chosen)
    else:
        sid = card.baselines_id
        entries = ledger.card_baselines(card)
    doc, matches = score_under(card, entries, match=match, all_environments=all_environments)
    return Scored(card, doc, sid, matches)
