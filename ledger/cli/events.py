"""`ledger events CARD` (a card's log, one line per event) and `ledger close CARD` (close a card left open)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from ledger.cli.common import card_argument, echo_json, open_ledger
from ledger.errors import StoreError


@click.command("events")
@card_argument
@click.option("--json", "as_json", is_flag=True, help="One JSON array: seq, version, type, ts, summary, hash, event.")
@click.pass_context
def events(ctx: click.Context, card_id: str, as_json: bool) -> None:
    """List a card's events in order: its own version (what `--until` and `ledger audit` take), the ledger-wide
    seq, the type, the time and what the event did.

    A card left open and idle past STALE_MINUTES (or open past MAX_OPEN_FOR_MINUTES) ends with a line saying when
    the toolkit would have closed it.
    """
    from ledger.services.listing import shown_close

    with open_ledger(ctx) as ledger:
        card_id = ledger.resolve_card(card_id)
        rows = ledger.card_events(card_id)
        try:
            card = ledger.load_card(card_id)
        except StoreError:  # an event that does not decode: still list them all (each says what it is)
            card = None
    shown = shown_close(card) if card is not None else None
    lapsed = shown if shown is not None and shown[2] else None
    decoded = [(r, _decode(r.body)) for r in rows]
    if as_json:
        echo_json(
            {
                "card_id": card_id,
                "events": [
                    {
                        "version": r.version,
                        "seq": r.seq,
                        "type": r.type,
                        "ts": r.ts,
                        "summary": _summary(ev, r.type),
                        "hash": r.hash,
                        "event": _body(ev),
                    }
                    for r, ev in decoded
                ],
                "lapsed": {"closed": lapsed[0].isoformat(), "reason": lapsed[1]} if lapsed else None,
            }
        )
        return
    vw = max(len("version"), len(str(rows[-1].version)))
    sw = max(len("seq"), len(str(rows[-1].seq)))
    tw = max(len(r.type) for r in rows)
    click.echo(f"{'version':>{vw}}  {'seq':>{sw}}  {'type':<{tw}}  {'time':<26}  what")
    for r, ev in decoded:
        click.echo(f"{r.version:>{vw}}  {r.seq:>{sw}}  {r.type:<{tw}}  {r.ts[:26]:<26}  {_summary(ev, r.type)}")
    if lapsed:
        click.echo(
            f"(no close event: the toolkit would have closed the card at {lapsed[0].isoformat()} ({lapsed[1]}); "
            f"`ledger close {card_id}` records a close)"
        )


def _decode(body: bytes) -> Any:
    from ledger.core.events import decode  # here, not at the top: `ledger --help` must start fast

    try:
        return decode(body)
    except Exception:
        return None


def _summary(ev: Any, type_: str) -> str:
    if ev is None:
        return f"(body does not decode as {type_}: see `ledger audit`)"
    from ledger.core.timeline import summary

    return summary(ev)


def _body(ev: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(ev) if ev is not None else None


@click.command("close")
@card_argument
@click.option(
    "--reason",
    type=click.Choice(["explicit", "abandoned"]),
    default="explicit",
    show_default=True,
    help="abandoned: the agent died and left the card open; explicit: as close_scorecard would have.",
)
@click.pass_context
def close(ctx: click.Context, card_id: str, reason: str) -> None:
    """Close an open card: append a card_closed event (with the scorecard's document hash, as capture does).

    Exit 2 if the card is already closed (nothing is written), 1 if it is unknown or another writer appended to it
    meanwhile.
    """
    # Resolve the card read-only first: closing a card must never create or migrate a ledger (a typo in --db, or a
    # database that is not a ledger, is refused without touching it).
    with open_ledger(ctx) as ledger:
        card_id = ledger.resolve_card(card_id)
    with open_ledger(ctx, write=True) as ledger:
        card = ledger.close_card(card_id, reason, ts=datetime.now(UTC))  # type: ignore[arg-type]
    click.echo(f"closed card {card_id} ({reason}) after {card.events - 1} events at {card.closed_at}")
