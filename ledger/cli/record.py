"""`ledger record -- COMMAND`: capture an unchanged harness (every arc_agi.Arcade it creates)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import click

from ledger.cli.common import LedgerCommandError, open_ledger, tags_option


@click.command(
    "record",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@tags_option(
    "Tag each card captured with TAG (repeatable): `cards`, `compare`, `bundle` and the viewer find the card "
    "by it; the card's exported JSON keeps only its own tags."
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def record(ctx: click.Context, tags: tuple[str, ...], command: tuple[str, ...]) -> None:
    """COMMAND never imports the ledger: for it and the Python processes it starts, a `sitecustomize` on a
    PYTHONPATH set for them only attaches the ledger to each Arcade as it is created (threaded harnesses
    included). Nothing is installed. When COMMAND is a Python interpreter (or a script whose #! line names one)
    that cannot load the ledger, nothing is run (exit 2, naming both interpreters); any other Python that
    COMMAND starts and that cannot load the ledger gets an error from `Arcade(...)` instead of playing
    unrecorded.

    COMMAND runs in a process group of its own: SIGINT (Ctrl-C), SIGTERM and SIGHUP sent to `ledger record`
    are passed on to that group, and `ledger record` waits for it. At the end each card captured is listed on
    stderr with its score and what became of it (closed, left open, or lapsed: closed by the toolkit's
    idle/max-open limits).

    \b
    Exit status:
      COMMAND's own status when it failed (128+N when killed by signal N);
      1 when COMMAND succeeded but no card was captured, an Arcade was not recorded, or a step failed to
        be recorded (said, with the command's last error line);
      2 when COMMAND cannot be run, or its Python cannot load the ledger;
      0 otherwise.

    Examples:

    \b
      ledger record --tag nightly -- python main.py --seed 1 --steps 20
      ledger cards --tag nightly  # the cards it captured
    """
    from ledger.app.listing import captured_report
    from ledger.capture.record_hook import child_env, run
    from ledger.capture.record_hook.preflight import check_interpreter

    with open_ledger(ctx, write=True) as ledger:
        db = ledger.store.url  # absolute: the command may change directory
    try:
        check_interpreter(command, child_env(db, tags, ""))  # no notes file: the probe opens no card
        result = run(db, tags, command)
    except (FileNotFoundError, PermissionError) as e:
        raise LedgerCommandError(f"cannot run {command[0]}: {e.strerror or e}", 2) from e
    for name in dict.fromkeys(result.signals):
        say(f"ledger record: passed {name} on to the command; it ended with status {result.returncode}")
    with open_ledger(ctx) as ledger:
        for line in captured_report(ledger, result.card_ids, datetime.now(UTC)):
            say(line)
    for card_id, holder in result.aside:
        say(
            f"ledger record: card {card_id} was already being captured into this ledger by {holder} (it opened the "
            "card first): this run's capture stood aside, so the card is recorded once"
        )
    for lost in result.uncaptured:
        say(f"ledger record: {lost.describe()}")
    if result.failures:
        say(
            f"ledger record: the ledger did NOT record everything the command did: {len(result.failures)} "
            f"capture failure(s), the first in {result.failures[0]}"
        )
    if not result.card_ids:
        say("ledger record: no card captured (no arc_agi.Arcade opened a card)")
        if result.http is not None:
            say(
                f"ledger record: the command plays over HTTP itself ({result.http}), without the toolkit: a REST "
                "client is captured by the server it plays against; point it at `ledger serve` (docs/capture.md)"
            )
    incomplete = not result.card_ids or bool(result.uncaptured) or bool(result.failures)
    if incomplete and result.last_error:
        say(f"ledger record: the command's last error line: {result.last_error}")
    if result.returncode == 0 and incomplete:
        sys.exit(1)  # COMMAND succeeded but the ledger did not get all of it
    sys.exit(result.returncode)


def say(line: str) -> None:
    click.echo(line, err=True)
