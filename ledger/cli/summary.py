"""``ledger rebuild-summary``: prove the cards summary equals a rebuild from the log, or rebuild it."""

from __future__ import annotations

import click

from ledger.cli.common import echo_json, json_option, open_ledger
from ledger.errors import StoreError


@click.command("rebuild-summary")
@click.option("--check", is_flag=True, help="Only compare the summary with a rebuild from the log (writes nothing).")
@json_option('One JSON object: {"ok", "cards" (the cards the log holds), "differences"}.')
@click.pass_context
def rebuild_summary_cmd(ctx: click.Context, check: bool, as_json: bool) -> None:
    """The summary is kept by every append in its own transaction; this replays every event, and with --check only
    says whether the stored summary equals the replay (exit 1 and the first differences if not).

    Examples:

    \b
      ledger rebuild-summary --check  # compare only
      ledger rebuild-summary
    """
    from ledger.store.summary import check as check_summary

    with open_ledger(ctx, write=not check) as ledger:
        n, diff = check_summary(ledger.store) if check else (ledger.store.rebuild_summary(), [])
    if as_json:
        echo_json({"ok": not diff, "cards": n, "differences": diff})
    elif not check:
        click.echo(f"summary rebuilt from the log: {n} cards")
    elif not diff:
        click.echo(f"summary ok: equal to a rebuild from the log ({n} cards)")
    if diff:
        raise StoreError("the cards summary differs from the log: " + "; ".join(diff))
