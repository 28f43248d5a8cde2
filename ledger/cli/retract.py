"""``ledger retract``: withdraw a card from lists, comparisons, leaderboards and bundles, keeping its record."""

from __future__ import annotations

import click

from ledger.cli.common import card_argument, echo_json, json_option, open_ledger


@click.command()
@card_argument
@click.option(
    "--reason",
    required=True,
    metavar="TEXT",
    help="Why the card is withdrawn (kept with the card; export, replay and audit say it).",
)
@json_option("One JSON object: card_id, retracted_at, reason.")
@click.pass_context
def retract(ctx: click.Context, card_id: str, reason: str, as_json: bool) -> None:
    """`cards`, `compare`, leaderboards, the viewer and `bundle` then leave it out (their --include-retracted shows it,
    marked); `export`, `replay` and `audit` still read it and say when and why it was retracted. Exit 2 with
    nothing written for an empty reason, an open card (`ledger close` it first) or a card already retracted;
    exit 1 for an unknown card.

    Examples:

    \b
      ledger retract CARD --reason 'played with a debug build'
      ledger cards --include-retracted                          # still listed here, marked
    """
    from ledger.app.retract import retract_card

    with open_ledger(ctx, write=True) as ledger:
        card = retract_card(ledger, card_id, reason)
    assert card.retracted_at is not None
    if as_json:
        echo_json({"card_id": card.card_id, "retracted_at": card.retracted_at, "reason": card.retract_reason})
        return
    click.echo(f"card {card.card_id} retracted on {card.retracted_at.isoformat()}, reason: {card.retract_reason}")
    click.echo("it is left out of lists now (--include-retracted shows it); its events stay, export still works")
