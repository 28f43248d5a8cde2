"""`ledger events CARD` (a card's log, one line per event) and `ledger close CARD` (close a card left open)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import click

from ledger.cli.common import card_argument, json_option, open_ledger


@click.command("events")
@card_argument
@json_option("One JSON array: seq, version, type, ts, summary, hash, event.")
@click.pass_context
def events(ctx: click.Context, card_id: str, as_json: bool) -> None:
    """Each line: the card's own version (what --until and `ledger audit` take), the ledger-wide seq, the type, the
    time and what the event did.

    A card left open and idle past STALE_MINUTES (or open past MAX_OPEN_FOR_MINUTES) ends with a line saying when
    the toolkit would have closed it.

    Examples:

    \b
      ledger events CARD
      ledger events CARD --json
    """
    from ledger.app.card_rows import event_log

    with open_ledger(ctx) as ledger:
        _write(event_log(ledger, ledger.resolve_card(card_id), as_json=as_json))


def _write(parts: Iterable[str], batch: int = 2_000) -> None:
    """Write ``parts`` a batch at a time (one write per part would cost a flush each)."""
    chunk: list[str] = []
    for p in parts:
        chunk.append(p)
        if len(chunk) >= batch:
            click.echo("".join(chunk), nl=False)
            chunk.clear()
    click.echo("".join(chunk), nl=False)


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
    """Appends a card_closed event, with the scorecard's document hash, as capture does.

    Exit 2 if the card is already closed (nothing is written), 1 if it is unknown or another writer appended to it
    meanwhile.

    Examples:

    \b
      ledger cards --open                   # the cards still open
      ledger close CARD --reason abandoned
    """
    # Resolve the card read-only first: closing a card must never create or migrate a ledger (a typo in --db, or a
    # database that is not a ledger, is refused without touching it).
    with open_ledger(ctx) as ledger:
        card_id = ledger.resolve_card(card_id)
    with open_ledger(ctx, write=True) as ledger:
        card = ledger.close_card(card_id, reason, ts=datetime.now(UTC))  # type: ignore[arg-type]
    click.echo(f"closed card {card_id} ({reason}) after {card.events - 1} events at {card.closed_at}")
