"""The ``ledger`` command: a Click group with one module per command family, named explicitly below.

Exit codes: 0 success, 1 a failed check or an unknown card/ledger problem, 2 bad usage or bad input.
"""

from __future__ import annotations

import sys

import click

from ledger.cli.common import DURABILITIES, LedgerGroup, guard_output, output_failed
from ledger.version import __version__

#: Every command: its name -> (``module:attribute``, the first paragraph of its help). A command's module is imported
#: only when that command runs (or its own --help is asked), so `ledger export` does not pay for the audit's checks,
#: the viewer or the importer; `ledger --help` lists every command from the help kept here, which
#: tests/test_docs.py checks against each command's own.
COMMANDS: dict[str, tuple[str, str]] = {
    "audit": (
        "ledger.cli.audit:audit",
        "Check that a card's score follows from its events, and explain it.",
    ),
    "baselines": (
        "ledger.cli.baselines:baselines_group",
        "Baseline sets: immutable, content-addressed snapshots of every game's human baselines and tags.",
    ),
    "bundle": (
        "ledger.cli.view:bundle",
        "Write cards as a static site that opens from file:// with no server and no network.",
    ),
    "cards": (
        "ledger.cli.cards:cards",
        "List cards in the order they were opened: id, opened, closed (and why), games, actions, score, tags.",
    ),
    "check": (
        "ledger.cli.evidence:check",
        "Check an evidence file from `ledger prove`, opening no ledger: the checkpoint's signature, the "
        "inclusion proof of every event, the card's hash chain, that no later event of the card was left out,"
        " and that the scorecard is the one the calculator makes from the events; with --environments, the "
        "plays re-simulated; with --witness, that the checkpoint carries the cosignatures of at least "
        "--quorum of those witnesses.",
    ),
    "checkpoint": (
        "ledger.cli.evidence:checkpoint_cmd",
        "Sign the log's current tree head: a C2SP tlog checkpoint (origin, size, root hash, the stream-heads root).",
    ),
    "close": (
        "ledger.cli.events:close",
        "Close an open card: append a card_closed event (with the scorecard's document hash, as capture does).",
    ),
    "compare": (
        "ledger.cli.view:compare",
        "Compare cards side by side (at most 12), or agents by tag.",
    ),
    "consistency": (
        "ledger.cli.evidence:consistency",
        "Write a consistency file: checkpoints OLD and NEW of this ledger and the RFC 9162 proof that NEW's "
        "tree extends OLD's.",
    ),
    "copy": (
        "ledger.cli.copy:copy_cmd",
        "Copy every event, with its hash, from one ledger into another (SQLite -> PostgreSQL, and back).",
    ),
    "demo": (
        "ledger.cli.cards:demo",
        "Play two bundled games through the real toolkit (OFFLINE) with the ledger attached, then replay the card.",
    ),
    "events": (
        "ledger.cli.events:events",
        "List a card's events in order: its own version (what `--until` and `ledger audit` take), the ledger-"
        "wide seq, the type, the time and what the event did.",
    ),
    "export": (
        "ledger.cli.cards:export",
        "Print a card's scorecard JSON, identical to the toolkit's get_scorecard().model_dump_json() (of the "
        "arc-agi release that played it).",
    ),
    "import": (
        "ledger.cli.importing:import_cmd",
        "Import JSONL recordings and get their scorecards back: the toolkit's own (save_recording=True) and "
        "the ARC-AGI-3-Agents harness's (<game_id>.<agent>.<uuid>.recording.jsonl).",
    ),
    "init": (
        "ledger.cli.cards:init",
        "Create the ledger (or upgrade its schema), repair any missing append-only trigger, and print where it is.",
    ),
    "keygen": (
        "ledger.cli.evidence:keygen",
        "Make an Ed25519 key NAME for signing checkpoints (or, with --witness, for cosigning other logs' ones).",
    ),
    "prove": (
        "ledger.cli.evidence:prove",
        "Write an evidence file for CARD: everything a reviewer needs to check its score with the public key alone.",
    ),
    "rebuild-summary": (
        "ledger.cli.summary:rebuild_summary_cmd",
        "Rebuild the cards summary (what `cards`, `compare --tag` and the viewer list) from the log.",
    ),
    "record": (
        "ledger.cli.record:record",
        "Run COMMAND with every arc_agi.Arcade it creates recorded in the ledger.",
    ),
    "replay": (
        "ledger.cli.cards:replay",
        "Rebuild a card from its events and print the per-level post-mortem of every play.",
    ),
    "rescore": (
        "ledger.cli.baselines:rescore_cmd",
        "Score cards as played and under another baseline set and/or another release's calculator; print what"
        " changed, largest change first. Give --baselines, --calculator or both.",
    ),
    "retract": (
        "ledger.cli.retract:retract",
        "Withdraw a closed card: append a retraction (with REASON) to its events, which all stay.",
    ),
    "serve": (
        "ledger.cli.serve:serve",
        "Serve the ARC-AGI-3 REST API (the toolkit's Arcade.listen_and_serve) with every card captured.",
    ),
    "verify": (
        "ledger.cli.cards:verify",
        "Check every link of every stream's hash chain, the append-only triggers and the schema revision.",
    ),
    "view": (
        "ledger.cli.view:view",
        "Serve a local web viewer over the ledger, read-only: cards, card, compare, progress and replay pages.",
    ),
    "witness": (
        "ledger.cli.evidence:witness_cmd",
        "Cosign another log's CHECKPOINT as a witness (C2SP tlog-witness, tlog-cosignature v1), against a split view.",
    ),
}


@click.group(cls=LedgerGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
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
