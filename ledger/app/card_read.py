"""One read of a card by the names a user gives, shown as the toolkit would show it now (`ledger replay`), and each
card's own calculator for the lists."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.domain import calculators
from ledger.domain.calculators import Calculator
from ledger.domain.projection import CardState
from ledger.rules.timeline import shown_close as timeline_close

if TYPE_CHECKING:
    from ledger.ledger import CardRead, Ledger
    from ledger.rules.rescoring import Match


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
    """:meth:`Ledger.read` with the user's names resolved (card prefix, baseline label, calculator release)."""
    chosen = calculators.get(calculator) if calculator is not None else None
    card_id = ledger.resolve_card(card_id) if card is None else card.card_id
    seq = None if until is None else ledger.seq_at_version(card_id, until)
    return ledger.read(
        card_id,
        until=seq,
        set_of=(lambda: _resolve(ledger, baselines)) if baselines is not None else None,
        calculator=chosen,
        match=match,
        all_environments=all_environments,
        card=card if seq is None else None,
        allow_broken=allow_broken,
    )


def _resolve(ledger: Ledger, ref: str) -> str:
    # Loaded only by a read under another set: an export of a card as played needs no labels.
    from ledger.app.baseline_sets import resolve

    return resolve(ledger, ref)


def shown_close(card: CardState, now: datetime | None = None) -> tuple[datetime, str, bool] | None:
    """(closed at, reason, lapsed) as read commands show the card (None while open), with the toolkit's auto-close."""
    return timeline_close(card, now or datetime.now(UTC), os.environ)


def own_calculators(ledger: Ledger, card_ids: Sequence[str]) -> dict[str, Calculator]:
    """Each card's own calculator, from the cards summary's keys, without reading the cards."""
    from ledger.store.summary import calculator_keys

    recorded = calculator_keys(ledger.store, card_ids)
    return {c: calculators.resolve(recorded.get(c))[0] for c in card_ids}


def recorded_calculators(ledger: Ledger) -> set[Calculator]:
    """The calculators the ledger's cards record (one index seek per release), and the one none means."""
    from ledger.store.summary import distinct_keys

    return {calculators.resolve(v)[0] for v in distinct_keys(ledger.store, "c")} | {calculators.UNRECORDED}


def one_of(own: Iterable[Calculator], calculator: str | None = None) -> Calculator:
    """``calculator`` when given, else the newest of ``own`` (the newest published one for none)."""
    if calculator is not None:
        return calculators.get(calculator)
    return max(set(own), key=calculators.PUBLISHED.index, default=calculators.NEWEST)


def rescored(ledger: Ledger, own: Mapping[str, Calculator], calc: Calculator) -> dict[str, float]:
    """The score under ``calc`` of each card of ``own`` whose arithmetic is not ``calc``'s."""
    return {
        c: ledger.document(c, calculator=calc).score for c, mine in own.items() if mine.arithmetic != calc.arithmetic
    }


class Replay(msgspec.Struct, frozen=True):
    """`ledger replay`: the card read, as shown (the toolkit's auto-close applied unless read ``until`` a version),
    with a benchmarking run's usage and cost kept with a card imported from its run folder."""

    read: CardRead
    shown: CardState
    usage: list[Any]
    match: str
    all_environments: bool
    #: Scored under another set than the card's own, or matched by base id, or in the competition view.
    by_set: bool

    def to_json(self) -> dict[str, Any]:
        """The card read, its plays, its document and what it was scored under."""
        import json

        from ledger.domain import document
        from ledger.rules.server import baselines_source

        read = self.read
        card = read.card
        out: dict[str, Any] = {
            "card_id": card.card_id,
            "events": card.events,
            "closed": self.shown.close_reason,
            "plays": {
                gid: [
                    {
                        "guid": p.guid,
                        "state": p.state,
                        "actions": p.actions,
                        "resets": p.resets,
                        "levels_completed": p.levels_completed,
                        "level_marks": [list(m) for m in p.marks],
                    }
                    for p in ps
                ]
                for gid, ps in card.games.items()
            },
            "retracted": read.retraction,
            "scorecard": json.loads(document.to_json(read.doc)),
            "baselines_source": baselines_source(card),
            "baselines_not_known": read.unknown,
            "calculator": {
                "version": read.calculator.version,
                "arithmetic": read.calculator.arithmetic,
                "card": read.own_calculator.version,
                "recorded": card.calculator,
                "source": card.calculator_source,
            },
        }
        if read.broken is not None:
            out["broken"] = read.broken
        if self.usage:
            out["run_usage"] = [msgspec.to_builtins(u) for u in self.usage]
        if self.by_set:
            out["baselines"] = {
                "set_id": read.set_id,
                "played_set_id": card.baselines_id,
                "match": self.match,
                "all_environments": self.all_environments,
                "matches": read.matches,
            }
        return out

    def lines(self) -> list[str]:
        """Per game and play the arithmetic, then the post-mortem (rules.text.replay_text) and the run's usage."""
        from ledger.app.usage import usage_lines
        from ledger.rules.rescoring import match_note
        from ledger.rules.text import replay_text

        read = self.read
        out = []
        if read.broken is not None:
            out.append(f"BROKEN: {read.broken}; shown as far as the log holds it, not as a whole card")
        if self.by_set:
            played = (read.card.baselines_id or "none")[:12]
            view = ", competition view" if self.all_environments else ""
            out.append(
                f"scored under baselines {(read.set_id or 'none')[:12]} (played under {played}), "
                f"match {self.match}{view}"
            )
            out += [f"  {n}" for n in filter(None, map(match_note, read.matches))]
        out.append(replay_text(self.shown, read.doc, read.unknown, read.calculator))
        return out + usage_lines(self.usage)


def replay(ledger: Ledger, card_id: str, **options: Any) -> Replay:
    """The card ``card_id`` names read as :func:`read_card` reads it (the same ``options``), for `ledger replay`."""
    from ledger.app.usage import card_usage

    match, all_environments = options["match"], options["all_environments"]
    read = read_card(ledger, card_id, **options)
    usage = card_usage(ledger, read.card.card_id)
    shown, close = read.card, shown_close(read.card) if options["until"] is None else None
    if close is not None and close[2]:  # the toolkit's auto-close has passed
        shown = msgspec.structs.replace(shown, closed_at=close[0], close_reason=close[1])
    by_set = options["baselines"] is not None or match != "exact" or all_environments
    return Replay(read, shown, usage, match, all_environments, by_set)
