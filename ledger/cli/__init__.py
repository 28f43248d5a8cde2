"""The ``ledger`` command: a Click group with one module per command family, added explicitly below.

Exit codes: 0 success, 1 a failed check or an unknown card/ledger problem, 2 bad usage or bad input.
"""

from __future__ import annotations

import sys

import click

from ledger.cli import audit, baselines, cards, copy, events, evidence, importing, record, retract, serve, summary, view
from ledger.cli.common import DURABILITIES, LedgerGroup, guard_output, output_failed
from ledger.version import __version__


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
# The version is given, not looked up: importlib.metadata would cost a good part of the startup budget.
@click.version_option(__version__, "--version", prog_name="ledger", message="%(prog)s %(version)s")
@click.option(
    "--db",
    envvar="LEDGER_DB",
    default=None,
    metavar="PATH|URL",
    help="The ledger: a SQLite file path or a SQLAlchemy URL (postgresql+psycopg://user@host/db). "
    "Default: $LEDGER_DB, else ./ledger.sqlite.",
)
@click.option(
    "--durability",
    type=click.Choice(DURABILITIES),
    default="normal",
    show_default=True,
    help="SQLite: 'normal' (WAL, synchronous=NORMAL) survives a killed process; 'full' (synchronous=FULL) also "
    "survives power loss. PostgreSQL: 'normal' keeps the server's synchronous_commit, 'full' forces it on. "
    "'batched' (opt-in, for very fast agents): live capture commits in groups every 50 ms from a background "
    "thread, so a killed process loses up to 50 ms of steps (at most 1,000 events); otherwise as 'normal'.",
)
@click.pass_context
def cli(ctx: click.Context, db: str | None, durability: str) -> None:
    """arc-scorecard-ledger: ARC-AGI-3 scorecards as an append-only event log.

    Every action, reset, level completion and close of a play is an event; every scorecard is rebuilt from
    the events with the toolkit's own arithmetic, so it can be replayed, exported, verified and re-scored.
    """
    ctx.ensure_object(dict)
    from ledger.ledger import default_db

    ctx.obj["db"] = db or default_db()
    ctx.obj["durability"] = durability


for _command in (
    cards.init,
    cards.cards,
    cards.export,
    cards.replay,
    cards.verify,
    cards.demo,
    importing.import_cmd,
    baselines.baselines_group,
    baselines.rescore_cmd,
    audit.audit,
    copy.copy_cmd,
    events.events,
    events.close,
    retract.retract,
    view.view,
    view.bundle,
    view.compare,
    serve.serve,
    record.record,
    evidence.keygen,
    evidence.checkpoint_cmd,
    evidence.prove,
    evidence.consistency,
    evidence.witness_cmd,
    evidence.check,
    summary.rebuild_summary_cmd,
):
    cli.add_command(_command)


def main() -> None:
    """Console entry point. A full or closed standard output is one line and exit 2 (a closed pipe: exit 1,
    quietly), wherever the write fails: in a command, in Click's own messages, at the last flush."""
    guard_output()
    try:
        try:
            cli.main(prog_name="ledger")
        finally:
            sys.stdout.flush()
    except OSError as e:
        code = output_failed(e)
        if code is None:
            raise
        sys.exit(code)
