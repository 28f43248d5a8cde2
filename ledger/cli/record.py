"""`ledger record -- COMMAND`: capture an unchanged harness (every arc_agi.Arcade it creates)."""

from __future__ import annotations

import sys

import click

from ledger.cli.common import LedgerCommandError, open_ledger


@click.command(
    "record",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--tag",
    "tags",
    multiple=True,
    metavar="T",
    help="Note T with each card captured (repeatable); the card's own tags, and so its JSON, are unchanged.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def record(ctx: click.Context, tags: tuple[str, ...], command: tuple[str, ...]) -> None:
    """Run COMMAND with every arc_agi.Arcade it creates recorded in the ledger.

    COMMAND never imports the ledger: for it and the Python processes it starts, a `sitecustomize` on a
    PYTHONPATH set for them only attaches the ledger to each Arcade as it is created (threaded harnesses
    included). Nothing is installed. Ctrl-C reaches COMMAND as usual; COMMAND's exit status is passed through.
    At the end each card captured is listed with its score, on stderr.

    \b
    ledger record --tag nightly -- python main.py --agent=random --game=ls20
    """
    from ledger.toolkit.record_hook import run

    with open_ledger(ctx, write=True) as ledger:
        db = ledger.store.url  # absolute: the command may change directory
    try:
        result = run(db, tags, command)
    except (FileNotFoundError, PermissionError) as e:
        raise LedgerCommandError(f"cannot run {command[0]}: {e.strerror or e}", 2) from e
    with open_ledger(ctx) as ledger:
        if not result.card_ids:
            click.echo("ledger record: no card captured (no arc_agi.Arcade opened a card)", err=True)
        for cid in result.card_ids:
            card = ledger.load_card(cid)
            doc = ledger.document(cid, card=card)
            state = f"closed ({card.close_reason})" if card.closed else "open"
            click.echo(
                f"card {cid}   score {doc.score:.2f}   games {len(card.games)}   actions {card.total_actions}   "
                f"{state}",
                err=True,
            )
        if result.card_ids:
            click.echo(f"ledger: {ledger.store.describe()}", err=True)
    sys.exit(result.returncode)
