"""Withdrawing a card (a CardRetracted event, the record kept), and how every list chooses its cards."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from ledger.domain.events import CardRetracted
from ledger.domain.projection import CardState
from ledger.errors import InputError, StoreError
from ledger.ledger import Ledger
from ledger.rules.timeline import listed, retraction, retraction_note
from ledger.store.cards import apply_events

MAX_REASON = 2000


class RetractedCard(InputError):
    def __init__(self, card: CardState, hint: str) -> None:
        super().__init__(f"card {card.card_id} is {retraction_note(card)}; {hint}")
        self.card_id = card.card_id


def retract_card(ledger: Ledger, ref: str, reason: str, *, ts: datetime | None = None) -> CardState:
    """Append ``CardRetracted(reason)`` to the card ``ref`` names; an open card is refused (a capture may append)."""
    why = " ".join(reason.split())
    if not why:
        raise InputError("give a reason: --reason TEXT (it is kept with the card and shown wherever it is read)")
    if len(why) > MAX_REASON:
        raise InputError(f"the reason is {len(why)} characters; at most {MAX_REASON}")
    card_id = ledger.resolve_card(ref)
    read = ledger.repository.read(card_id)
    card = read.state
    if card.retracted_at is not None:
        raise InputError(f"card {card_id} is already {retraction_note(card)}; nothing written")
    if not card.closed:
        raise InputError(
            f"card {card_id} is open (it has no close event, even if `ledger cards` shows it lapsed): close it first "
            f"(`ledger close {card_id}`), then retract it; nothing written"
        )
    ev = CardRetracted(ts=ts or datetime.now(UTC), reason=why)
    state = apply_events(card_id, [ev], card)
    ledger.append_card(card_id, [ev], read.version, state=state)
    return state


def retraction_of(ledger: Ledger, card_id: str) -> dict[str, str] | None:
    """``{"at", "reason", "note"}`` when the card was retracted, else None."""
    try:
        card = ledger.load_card(card_id)
    except StoreError:
        return None  # an event that does not decode: the audit's own checks report it
    return retraction(card)


def choose_cards(
    ledger: Ledger,
    refs: Sequence[str] = (),
    tags: Sequence[str] = (),
    *,
    every: bool = False,
    include_retracted: bool = False,
    hint: str = "add --include-retracted to show it",
) -> list[CardState]:
    """The cards ``refs`` name, then every card with one of ``tags`` (or ``every``), each once; retracted ones left
    out unless ``include_retracted`` (naming one raises :class:`RetractedCard`)."""
    ids = list(dict.fromkeys(ledger.resolve_card(r) for r in refs))
    cards = ledger.load_cards(ids)
    for c in cards.values():
        if not listed(c, include_retracted):
            raise RetractedCard(c, hint)
    if every or tags:
        want = set(tags)
        others = [c for c in ledger.card_ids() if c not in cards]
        for cid, card in ledger.load_cards(others).items():
            if listed(card, include_retracted) and (every or want.intersection(card.all_tags)):
                cards[cid] = card
    return list(cards.values())
