"""The cards list rebuilt from each card's events, beside the cards summary: the oracle the list is held to."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import msgspec

from ledger import Ledger
from ledger.rules.timeline import limits, listed
from ledger.store.summary import CardSummary, card_score, row_of


def replayed_cards(led: Ledger, *, include_retracted: bool = False) -> list[CardSummary]:
    """Every card as ``ledger cards`` lists it, each folded from its events instead of read from the summary."""
    now, lapse_after = datetime.now(UTC), limits(os.environ)
    out = []
    for c in led.load_cards(led.card_ids()).values():
        if listed(c, include_retracted):
            row = row_of(c, c.events, card_score(c, led.card_baselines(c)))
            shown = CardSummary.of(row, now, lapse_after, led.baselines_known(c))
            out.append(msgspec.structs.replace(shown, competition=c.competition_mode is True))
    return out
