"""Re-scoring cards of a ledger; the scoring itself is pure (:mod:`ledger.rules.rescoring`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.domain.calculators import Calculator
from ledger.domain.events import BaselineEntry
from ledger.rules.rescoring import CardRescore, Match, rescore_card, rescore_text

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
    allow_broken: bool = False,
    on_broken: Callable[[str, str], None] | None = None,
) -> Iterator[CardRescore]:
    """:func:`rescore_card` per card, ``chunk`` at a time; ``allow_broken``: as far as a chain holds (``on_broken``)."""
    ids = list(card_ids)
    for i in range(0, len(ids), chunk):
        loaded = ledger.repository.read_many(ids[i : i + chunk], allow_broken=allow_broken)
        for cid in ids[i : i + chunk]:
            card, broken = loaded[cid].state, loaded[cid].broken
            if broken is not None and on_broken is not None:
                on_broken(cid, broken)
            yield rescore_card(
                card,
                ledger.card_baselines(card),
                new_entries if new_entries is not None else ledger.card_baselines(card),
                match=match,
                all_environments=all_environments,
                calculator=calculator,
            )


def rescore_targets(
    ledger: Ledger, card_ids: Sequence[str], every: bool, ref: str | None
) -> tuple[list[str], str | None, Mapping[str, BaselineEntry] | None]:
    """`ledger rescore`'s cards and the set ``ref`` names (its id and entries; None: each card's own)."""
    from ledger.app.baseline_sets import resolve

    ids = ledger.card_ids() if every else list(dict.fromkeys(ledger.resolve_card(c) for c in card_ids))
    set_id = resolve(ledger, ref) if ref is not None else None
    return ids, set_id, ledger.baselines(set_id) if set_id is not None else None


@dataclass(frozen=True, slots=True)
class Rescored:
    """`ledger rescore`: every card's changes, largest first, and what they were re-scored under (``set_id``, as
    ``ref`` named it; None: each card's own)."""

    cards: list[CardRescore]
    set_id: str | None
    ref: str | None
    calculator: str | None
    match: Match
    all_environments: bool

    def to_json(self) -> dict[str, Any]:
        """Every field, what it was re-scored under first."""
        return {f: getattr(self, f) for f in ("set_id", "ref", "calculator", "match", "all_environments", "cards")}

    def lines(self) -> list[str]:
        if not self.cards:
            return ["no cards in this ledger"]
        if self.set_id is None:
            name = "each card's own baselines"
        else:
            name = f"{self.ref} ({self.set_id[:12]})" if self.ref != self.set_id else self.set_id[:12]
        text = rescore_text(
            self.cards,
            set_name=name,
            match=self.match,
            all_environments=self.all_environments,
            calculator=self.calculator,
        )
        return [text]
