"""`ledger audit` commands (registered on :data:`ledger.cli.cli`)."""

from __future__ import annotations

import click

from ledger.cli.common import card_argument, emit, environments_option, json_option, open_ledger
from ledger.cli.params import expect_head_option


@click.command("audit")
@card_argument
@environments_option(
    "An environment_files folder (scanned for metadata.json like the toolkit does): re-run every recorded "
    "action against the real game code and compare state and levels_completed action by action."
)
@expect_head_option(
    "Fail unless the card's log still ends at this card head (one an earlier audit printed, kept elsewhere). "
    "Given the ledger's head (what `ledger verify` prints), the audit says so and checks that instead."
)
@click.option(
    "--decide",
    is_flag=True,
    help="With --environments, for a card whose recording left actions undecided (imported without the game code): "
    "try every candidate action of each, to tell which ones the game decides and which fit either way. Slower: "
    "each such action costs a game step per candidate. Without it the audit follows the first path of the game that "
    "reproduces the record, which proves the record just the same.",
)
@json_option("The checks and the post-mortem as one JSON object.")
@click.pass_context
def audit(
    ctx: click.Context, card_id: str, environments: str | None, expect_head: str | None, decide: bool, as_json: bool
) -> None:
    """One line per check, in order, then the post-mortem:

    \b
    integrity     unbroken hash chain, versions 1..n, nothing missing or reordered; prints the head hash
    consistency   the rebuilt scorecard equals the document recorded at close, and any cached projection
    resimulation  (with --environments) every play replayed against the game code, same seed; a game the
                  folder lacks is SKIP; UNKNOWN where the record leaves open what the replay needs
                  (a seed not recorded that no seed 0..31 reproduces, actions a recording did not decide
                  and no folder to decide them)
    lifecycle     idle gaps >= STALE_MINUTES and open time >= MAX_OPEN_FOR_MINUTES (the toolkit's auto-close):
                  a warning, not a failure

    Exit 0 when no check fails (WARN, UNKNOWN and SKIP do not fail), 1 when one fails or the card is unknown, 2 on
    bad usage, including an --environments folder that holds none of the card's games.

    Examples:

    \b
      ledger audit CARD
      ledger audit CARD --environments environment_files  # every action re-played
      ledger audit CARD --json
    """
    from ledger.app.audit import audit_outcome

    if decide and environments is None:
        raise click.UsageError("--decide tries actions against the game code: give --environments DIR as well")
    with open_ledger(ctx) as ledger:
        out = audit_outcome(ledger, card_id, environments=environments, expect_head=expect_head, decide=decide)
    emit(out, as_json)
