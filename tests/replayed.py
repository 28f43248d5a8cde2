"""The cards list rebuilt from each card's events, beside the cards summary: the oracle the list is held to."""

from __future__ import annotations

import functools
import os
from datetime import UTC, datetime

import msgspec

from ledger import Ledger
from ledger.errors import StoreError
from ledger.rules.timeline import limits, listed
from ledger.store import tracking
from ledger.store.base import LogStore
from ledger.store.summary import (
    POSITION_SQL,
    SELECT_KEYS_SQL,
    SELECT_ROWS_SQL,
    CardSummary,
    Stored,
    _stored_of,
    card_score,
    check,
    query,
    row_of,
)


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


def stored(store: LogStore) -> dict[str, Stored]:
    """The summary tables caught up to the log's head, each card's row (None: only keys) and keys, read
    consistently: a catch-up by another process between the reads is read again."""
    for _ in range(100):
        overlay = store.summary_at_head()
        if overlay is not None:
            return _stored_of(overlay.query(SELECT_KEYS_SQL, ()), overlay.query(SELECT_ROWS_SQL, ()))
        before = _position(store)
        read = functools.partial(query, store) if before is None else store.rows
        have = _stored_of(read(SELECT_KEYS_SQL), read(SELECT_ROWS_SQL))
        if _position(store) == before:
            return have
    raise StoreError(f"the cards summary of the ledger at {store.describe()} kept moving while it was read")


def _position(store: LogStore) -> int | None:
    try:
        return int(store.rows(POSITION_SQL)[0][0])
    except StoreError:
        if store.has_table(tracking.TABLE):
            raise
        return None


def differences(store: LogStore) -> list[str]:
    """How the summary tables differ from a rebuild from the log, one line each."""
    return check(store)[1]
