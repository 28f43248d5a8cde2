"""`ledger events CARD` (a card's log, one line per event) and `ledger close CARD` (close a card left open)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import click

from ledger.cli.common import card_argument, open_ledger
from ledger.errors import StoreError


@click.command("events")
@card_argument
@click.option("--json", "as_json", is_flag=True, help="One JSON array: seq, version, type, ts, summary, hash, event.")
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
    from ledger.app.card_rows import card_rows
    from ledger.app.listing import shown_close

    # The rows are read and written a page at a time: a long session's card has hundreds of thousands of events.
    with open_ledger(ctx) as ledger:
        card_id = ledger.resolve_card(card_id)
        rows = card_rows(ledger, card_id)
        try:
            card = ledger.load_card(card_id)
        except StoreError:  # an event that does not decode: still list them all (each says what it is)
            card = None
        shown = shown_close(card) if card is not None else None
        lapsed = shown if shown is not None and shown[2] else None
        if as_json:
            tail = {"closed": lapsed[0].isoformat(), "reason": lapsed[1]} if lapsed else None
            _write(_json_parts(card_id, rows, tail))
            return
        vw, sw, tw = len("version"), len("seq"), 0
        for r in rows:
            vw, sw, tw = max(vw, len(str(r.version))), max(sw, len(str(r.seq))), max(tw, len(r.type))
        head = f"{'version':>{vw}}  {'seq':>{sw}}  {'type':<{tw}}  {'time':<26}  what\n"
        lines = (
            f"{r.version:>{vw}}  {r.seq:>{sw}}  {r.type:<{tw}}  {r.ts[:26]:<26}  {_summary(_decode(r.body), r.type)}\n"
            for r in itertools.islice(card_rows(ledger, card_id), rows.read)
        )
        _write(itertools.chain([head], lines))
    if lapsed:
        click.echo(
            f"(no close event: the toolkit would have closed the card at {lapsed[0].isoformat()} ({lapsed[1]}); "
            f"`ledger close {card_id}` records a close)"
        )


def _json_parts(card_id: str, rows: Iterable[Any], lapsed: dict[str, str] | None) -> Iterator[str]:
    import msgspec

    yield '{\n  "card_id": ' + json.dumps(card_id) + ',\n  "events": ['
    sep = "\n"
    for r in rows:
        ev = _decode(r.body)
        item = {
            "version": r.version,
            "seq": r.seq,
            "type": r.type,
            "ts": r.ts,
            "summary": _summary(ev, r.type),
            "hash": r.hash,
            "event": msgspec.to_builtins(ev) if ev is not None else None,
        }
        yield sep + "    " + json.dumps(item, indent=2).replace("\n", "\n    ")
        sep = ",\n"
    yield '\n  ],\n  "lapsed": ' + json.dumps(lapsed, indent=2).replace("\n", "\n  ") + "\n}\n"


def _write(parts: Iterable[str], batch: int = 2_000) -> None:
    """Write ``parts`` a batch at a time (one write per part would cost a flush each)."""
    chunk: list[str] = []
    for p in parts:
        chunk.append(p)
        if len(chunk) >= batch:
            click.echo("".join(chunk), nl=False)
            chunk.clear()
    click.echo("".join(chunk), nl=False)


def _decode(body: bytes) -> Any:
    from ledger.domain.events import decode  # here, not at the top: `ledger --help` must start fast

    try:
        return decode(body)
    except Exception:
        return None


def _summary(ev: Any, type_: str) -> str:
    if ev is None:
        return f"(body does not decode as {type_}: see `ledger audit`)"
    from ledger.rules.timeline import summary

    return summary(ev)


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
