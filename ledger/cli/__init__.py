"""The ``ledger`` command: a Click group with one module per command family (exit codes: ledger/errors.py)."""

from __future__ import annotations

import sys

import click

from ledger.cli.common import DURABILITIES, Entry, LedgerGroup, guard_output, output_failed
from ledger.version import __version__

#: The jobs `ledger --help` groups the commands by, in the order it lists them.
JOBS: dict[str, str] = {
    "capture": "Capture",
    "look": "Look at cards",
    "rescore": "Re-score",
    "audit": "Audit and evidence",
    "team": "Team",
    "admin": "Admin",
}

#: Every command, in the order `ledger --help` lists it within its job.
COMMANDS: dict[str, Entry] = {
    "record": Entry("record:record", "capture", "Run a harness unchanged, capturing every card it plays", "write"),
    "serve": Entry("serve:serve", "capture", "Serve the toolkit's REST API with every card captured", "write"),
    "import": Entry("importing:import_cmd", "capture", "Turn JSONL recordings into cards", "write"),
    "demo": Entry("cards:demo", "capture", "Play two bundled games into the ledger, replay the card", "write"),
    "close": Entry("events:close", "capture", "Close a card an agent left open", "write"),
    "cards": Entry("cards:cards", "look", "List cards: opened, closed, games, actions, score, tags", "read"),
    "replay": Entry("cards:replay", "look", "Rebuild a card from its events, with the arithmetic", "read"),
    "export": Entry("cards:export", "look", "Print a card's JSON, byte for byte the toolkit's", "read"),
    "events": Entry("events:events", "look", "List a card's events in order", "read"),
    "compare": Entry("view:compare", "look", "Compare cards side by side, or groups of cards by tag", "read"),
    "view": Entry("view:view", "look", "Serve a read-only web viewer over the ledger", "read"),
    "rescore": Entry(
        "baselines:rescore_cmd", "rescore", "Score cards under another baseline set or calculator", "read"
    ),
    "baselines": Entry("baselines:baselines_group", "rescore", "Store, list, show and compare baseline sets", "read"),
    "audit": Entry("audit:audit", "audit", "Check that a card's score follows from its events", "read"),
    "verify": Entry("cards:verify", "audit", "Check every hash chain of the ledger; print its head", "read"),
    "keygen": Entry("evidence:keygen", "audit", "Make a key to sign checkpoints (or to witness them)", ""),
    "checkpoint": Entry("evidence:checkpoint_cmd", "audit", "Sign the log's current tree head (a checkpoint)", "write"),
    "prove": Entry("evidence:prove", "audit", "Write an evidence file that proves a card's score", "write"),
    "check": Entry("evidence:check", "audit", "Check an evidence file offline, with a public key", ""),
    "consistency": Entry("evidence:consistency", "audit", "Prove a newer checkpoint extends an older one", "write"),
    "witness": Entry("evidence:witness_cmd", "audit", "Cosign another log's checkpoint as a witness", ""),
    "copy": Entry("copy:copy_cmd", "team", "Copy a ledger's events between SQLite and PostgreSQL", "write"),
    "bundle": Entry("view:bundle", "team", "Write cards as a static site to share (no server)", "read"),
    "retract": Entry("retract:retract", "team", "Withdraw a closed card from lists; keep its record", "write"),
    "init": Entry("cards:init", "admin", "Create the ledger or upgrade its schema", "write"),
    "rebuild-summary": Entry("summary:rebuild_summary_cmd", "admin", "Rebuild the cards summary from the log", "write"),
}

#: Subcommands that open the ledger otherwise than their group does (the rest of a group's do as it does).
SUBCOMMANDS_OPEN: dict[str, str] = {"baselines import": "write"}

START = """\
ledger: ARC-AGI-3 scorecards as an append-only event log.

Start here (the ledger is ./ledger.sqlite unless --db or $LEDGER_DB says otherwise):
  ledger demo             play two bundled games into the ledger and replay the card
  ledger cards            list the cards
  ledger replay CARD      rebuild a card's score from its events, with the arithmetic
  ledger --help           every command, grouped by job; `ledger COMMAND --help` has examples"""


@click.group(
    cls=LedgerGroup,
    lazy=COMMANDS,
    jobs=JOBS,
    subcommands_open=SUBCOMMANDS_OPEN,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Start with `ledger demo`; `ledger COMMAND --help` says what each does, with examples.",
)
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
    if ctx.invoked_subcommand is None:
        click.echo(START)
        return
    ctx.ensure_object(dict)
    from ledger.ledger import default_db

    ctx.obj["db"] = db or default_db()
    ctx.obj["durability"] = durability


def main() -> None:
    """Console entry point. A full standard output is one line and exit 2; one closed by its reader (a pipe) is
    exit 141, quietly; wherever the write fails: in a command, in Click's own messages, at the last flush."""
    guard_output()
    try:
        try:
            cli.main(prog_name="ledger")
        finally:
            sys.stdout.flush()
    except OSError as e:
        sys.exit(output_failed(e))
