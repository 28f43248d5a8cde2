"""One read of a card for what a command shows: the document under the chosen baselines and calculator, up to a
version, with every note that goes beside it (:func:`read_card`). ``export``, ``replay``, ``cards CARD`` and the
viewer's card page all read a card through it, so each choice (retraction, ``--until``, ``--baselines``,
``--match``, ``--all-environments``, ``--calculator``) is applied once, in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledger.core import calculators
from ledger.core.calculators import Calculator
from ledger.core.document import ScorecardDoc
from ledger.core.projection import CardState
from ledger.core.rescoring import GameMatch, Match, match_note, score_under
from ledger.core.scoring import calculator_of
from ledger.core.server_baselines import unknown_baselines
from ledger.core.timeline import retraction_note

if TYPE_CHECKING:
    from ledger.ledger import Ledger


@dataclass(frozen=True, slots=True)
class CardRead:
    """A card, its document, and what chose and qualifies it."""

    card: CardState
    doc: ScorecardDoc
    #: The calculator ``doc`` is scored with, and the card's own.
    calculator: Calculator
    own_calculator: Calculator
    #: The baseline set ``doc`` is scored under (None: none), and how each played game met it.
    set_id: str | None
    matches: list[GameMatch]
    #: True when a choice other than the card's own baselines, exact match, its own view or calculator was made.
    rescored: bool
    #: Games whose baselines an ARC server has not revealed yet (only for the card's own baselines).
    unknown: list[str]
    #: Lines to show beside the document (export writes them to stderr): calculator, match, retraction.
    notes: list[str] = field(default_factory=list)
    retraction: dict[str, str] | None = None
    #: Why the card's chain is not whole (read with ``allow_broken``), else None.
    broken: str | None = None


def read_card(
    ledger: Ledger,
    card_id: str,
    *,
    until: int | None = None,
    baselines: str | None = None,
    calculator: str | None = None,
    match: Match = "exact",
    all_environments: bool = False,
    card: CardState | None = None,
    allow_broken: bool = False,
) -> CardRead:
    """The card ``card_id`` (an id or unique prefix) up to its version ``until``, scored under the set named by
    ``baselines`` (label, id or prefix; default: the set it was played under) and the calculator of the arc-agi
    release ``calculator`` (default: the card's own), matched by ``match``, optionally over every game of the set.

    ``card``: the card already loaded whole (the viewer's cache), read instead of the ledger's.
    ``allow_broken``: read a card whose chain is not whole as far as the log holds it (``broken`` says why, and
    the first note); otherwise :class:`~ledger.storage.cards.BrokenChain`.
    Raises :class:`UnknownCalculator` (exit 2) for a release that is not published, before reading anything.
    """
    from ledger.services.baseline_sets import resolve
    from ledger.services.retract import retraction_of_card

    chosen = calculators.get(calculator) if calculator is not None else None
    card_id = ledger.resolve_card(card_id) if card is None else card.card_id
    seq = None if until is None else ledger.seq_at_version(card_id, until)
    broken = None
    if card is None or seq is not None:
        loaded = ledger.repository.read(card_id, until=seq, allow_broken=allow_broken)
        card, broken = loaded.state, loaded.broken
    own = calculator_of(card)
    calc = chosen if chosen is not None else own
    by_set = baselines is not None or match != "exact" or all_environments
    if by_set:
        sid = resolve(ledger, baselines) if baselines is not None else card.baselines_id
        entries = ledger.baselines(sid) if sid is not None else {}
        doc, matches = score_under(card, entries, match=match, all_environments=all_environments, calculator=calc)
        unknown: list[str] = []
    else:
        sid, matches = card.baselines_id, []
        doc = ledger.document(card_id, card=card, calculator=calc)
        unknown = unknown_baselines(card, doc)
    notes: list[str] = []
    if broken is not None:
        notes.append(
            f"Note: card {card_id} is BROKEN ({broken}): shown as far as the log holds it, not as a whole card"
        )
    if chosen is not None and chosen != own:
        notes.append(
            f"Note: scored with the calculator of {calculators.label(chosen)}; the card's own is {own.version}"
        )
    elif (said := calculators.card_note(card.calculator, card.calculator_source)) is not None:
        notes.append(f"Note: {said}")
    if match == "base":
        notes += [n for n in (match_note(m) for m in matches) if n is not None]
    retraction = retraction_of_card(_whole(ledger, card_id, card, seq, allow_broken))
    if retraction is not None:
        notes.append(f"Note: card {card_id} was {retraction['note']}")
    return CardRead(
        card=card,
        doc=doc,
        calculator=calc,
        own_calculator=own,
        set_id=sid,
        matches=matches,
        rescored=by_set or (chosen is not None and chosen != own),
        unknown=unknown,
        notes=notes,
        retraction=retraction,
        broken=broken,
    )


def _whole(ledger: Ledger, card_id: str, card: CardState, seq: int | None, allow_broken: bool) -> CardState:
    # A retraction appended after --until still withdraws the card: it is read from the whole card.
    if seq is None or retraction_note(card) is not None:
        return card
    return ledger.load_card(card_id, allow_broken=allow_broken)


def own_calculators(ledger: Ledger, card_ids: Sequence[str]) -> dict[str, Calculator]:
    """Each card's own calculator, from the cards summary's keys (one query per 500 cards), without reading them."""
    from ledger.storage.summary_build import calculator_keys

    recorded = calculator_keys(ledger.store, card_ids)
    return {c: calculators.resolve(recorded.get(c))[0] for c in card_ids}


def recorded_calculators(ledger: Ledger) -> set[Calculator]:
    """The calculators the ledger's cards record (a loose scan of the keys' index: one seek per release), with
    the one a card that records none means: whether every card is scored alike is then known without a card."""
    from ledger.storage.summary_build import distinct_keys

    return {calculators.resolve(v)[0] for v in distinct_keys(ledger.store, "c")} | {calculators.UNRECORDED}


def one_of(own: Iterable[Calculator], calculator: str | None = None) -> Calculator:
    """The calculator cards scored under ``own`` are ranked with: ``calculator`` when given, else the newest of
    theirs (the newest published one for none)."""
    if calculator is not None:
        return calculators.get(calculator)
    return max(set(own), key=calculators.PUBLISHED.index, default=calculators.NEWEST)


def rescored(ledger: Ledger, own: Mapping[str, Calculator], calc: Calculator) -> dict[str, float]:
    """The score under ``calc`` of each card of ``own`` (card id -> its own calculator) whose arithmetic is not
    ``calc``'s (the others' scores are the same under either)."""
    return {
        c: ledger.document(c, calculator=calc).score for c, mine in own.items() if mine.arithmetic != calc.arithmetic
    }
