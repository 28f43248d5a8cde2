"""The ``ledger`` command: thin Click commands over :mod:`ledger.api`.

Exit codes: 0 success, 1 a failed check or an unknown card/ledger problem, 2 bad usage or bad input.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import msgspec

from . import document
from .api import Ledger, UnknownBaselines, UnknownCard, default_db
from .capture import CaptureError
from .rescore import MATCHES
from .store import StoreError


class LedgerCommandError(click.ClickException):
    """An error with a one-line message and an exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@contextmanager
def open_ledger(ctx: click.Context) -> Iterator[Ledger]:
    """Open the ledger named by ``--db``/``LEDGER_DB``, turning every known failure into a clean message."""
    db = ctx.obj["db"]
    try:
        ledger = Ledger.open(db, durability=ctx.obj["durability"])
    except StoreError as e:
        raise LedgerCommandError(str(e)) from e
    try:
        yield ledger
    except UnknownCard as e:
        raise LedgerCommandError(str(e)) from e
    except (UnknownBaselines, StoreError, CaptureError) as e:
        raise LedgerCommandError(str(e)) from e
    finally:
        ledger.close()


def write_output(text: str, out: str | None) -> None:
    """Print ``text`` or write it to ``out`` atomically (a reader never sees half a file)."""
    if out is None or out == "-":
        click.echo(text)
        return
    target = Path(out)
    if not target.parent.is_dir():
        raise LedgerCommandError(f"cannot write {out}: folder {target.parent} does not exist", 2)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON."""
    click.echo(json.dumps(msgspec.to_builtins(obj), indent=2))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    type=click.Choice(["normal", "full"]),
    default="normal",
    show_default=True,
    help="SQLite: 'normal' (WAL, synchronous=NORMAL) survives a killed process; 'full' (synchronous=FULL) also "
    "survives power loss. PostgreSQL: 'normal' keeps the server's synchronous_commit, 'full' forces it on.",
)
@click.pass_context
def cli(ctx: click.Context, db: str | None, durability: str) -> None:
    """arc-scorecard-ledger: ARC-AGI-3 scorecards as an append-only event log.

    Every action, reset, level completion and close of a play is an event; every scorecard is rebuilt from
    the events with the toolkit's own arithmetic, so it can be replayed, exported, verified and re-scored.
    """
    ctx.ensure_object(dict)
    ctx.obj["db"] = db or default_db()
    ctx.obj["durability"] = durability


@cli.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the ledger (or upgrade its schema) and print where it is."""
    with open_ledger(ctx) as ledger:
        click.echo(f"ledger ready at {ledger.store.describe()} (schema {ledger.store.revision()})")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON array of card summaries.")
@click.pass_context
def cards(ctx: click.Context, as_json: bool) -> None:
    """List every card: id, opened, closed, games, actions, score."""
    with open_ledger(ctx) as ledger:
        rows = ledger.cards()
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no cards in this ledger")
        return
    click.echo(f"{'card':<38} {'opened':<26} {'closed':<26} {'games':>5} {'actions':>8} {'score':>7}")
    for r in rows:
        closed = f"{r.closed[:19]} {r.close_reason}" if r.closed else "open"
        click.echo(
            f"{r.card_id:<38} {(r.opened or '?')[:19]:<26} {closed:<26} {r.games:>5} {r.actions:>8} {r.score:>7.2f}"
        )


def _card_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--until", type=click.IntRange(min=0), default=None, metavar="SEQ", help="The card as it stood after event SEQ."
    )(f)
    return click.argument("card_id")(f)


def match_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """--match and --all-environments: how a card's games meet a baseline set (export, replay, rescore)."""
    f = click.option(
        "--all-environments",
        is_flag=True,
        help="Competition view: score against every game of the baseline set, an unplayed game appearing with a "
        "0-action run that scores 0.",
    )(f)
    return click.option(
        "--match",
        type=click.Choice(MATCHES),
        default="exact",
        show_default=True,
        help="exact: the toolkit's rule (same game_id). base: same 4-letter base id when the version id changed.",
    )(f)


def _scoring_options(f: Callable[..., Any]) -> Callable[..., Any]:
    # --baselines/--match/--all-environments of export and replay (ledger/rescore.py does the work).
    f = match_options(f)
    return click.option(
        "--baselines",
        default=None,
        metavar="LABEL|ID",
        help="Score under this set (label or id, see `ledger baselines list`), not the one the card was played under.",
    )(f)


def _match_notes(matches: Any) -> list[str]:
    from .rescore import match_note

    return [n for n in (match_note(m) for m in matches) if n is not None]


@cli.command()
@_card_options
@click.option("-o", "--output", default=None, metavar="FILE", help="Write to FILE (atomically) instead of stdout.")
@click.option("--indent", type=click.IntRange(min=0, max=16), default=None, help="Pretty-print with N spaces.")
@_scoring_options
@click.pass_context
def export(
    ctx: click.Context,
    card_id: str,
    until: int | None,
    output: str | None,
    indent: int | None,
    baselines: str | None,
    match: str,
    all_environments: bool,
) -> None:
    """Print a card's scorecard JSON, identical to the toolkit's get_scorecard().model_dump_json().

    With --baselines, the JSON the toolkit would give for the same plays under that set's EnvironmentInfos;
    with --match base, games matched by base id are listed on stderr.
    """
    notes: list[str] = []
    with open_ledger(ctx) as ledger:
        if baselines is None and match == "exact" and not all_environments:
            text = ledger.export(card_id, until=until, indent=indent)
        else:
            from .rescore import document_for

            scored = document_for(
                ledger, card_id, until=until, baselines=baselines, match=match, all_environments=all_environments
            )
            text = document.to_json(scored.doc, indent=indent)
            notes = _match_notes(scored.matches) if match == "base" else []
    write_output(text, output)
    for n in notes:
        click.echo(n, err=True)


@cli.command()
@_card_options
@click.option("--json", "as_json", is_flag=True, help="The card's plays and document as JSON.")
@_scoring_options
@click.pass_context
def replay(
    ctx: click.Context,
    card_id: str,
    until: int | None,
    as_json: bool,
    baselines: str | None,
    match: str,
    all_environments: bool,
) -> None:
    """Rebuild a card from its events and print the per-level post-mortem of every play.

    With --baselines, the plays are scored under that set (the first line says which).
    """
    from .report import replay_text
    from .rescore import document_for

    rescored = baselines is not None or match != "exact" or all_environments
    with open_ledger(ctx) as ledger:
        if rescored:
            scored = document_for(
                ledger, card_id, until=until, baselines=baselines, match=match, all_environments=all_environments
            )
            card, doc = scored.card, scored.doc
        else:
            card = ledger.load_card(card_id, until=until)
            doc = ledger.document(card_id, card=card)
    if as_json:
        plays = {
            gid: [
                {
                    "guid": p.guid,
                    "state": p.state,
                    "actions": p.actions,
                    "resets": p.resets,
                    "levels_completed": p.levels_completed,
                    "level_marks": [list(m) for m in p.marks],
                }
                for p in ps
            ]
            for gid, ps in card.games.items()
        }
        out: dict[str, Any] = {
            "card_id": card.card_id,
            "events": card.events,
            "closed": card.close_reason,
            "plays": plays,
            "scorecard": json.loads(document.to_json(doc)),
        }
        if rescored:
            out["baselines"] = {
                "set_id": scored.set_id,
                "played_set_id": card.baselines_id,
                "match": match,
                "all_environments": all_environments,
                "matches": scored.matches,
            }
        echo_json(out)
        return
    if rescored:
        played = (card.baselines_id or "none")[:12]
        view = ", competition view" if all_environments else ""
        click.echo(
            f"scored under baselines {(scored.set_id or 'none')[:12]} (played under {played}), match {match}{view}"
        )
        for n in _match_notes(scored.matches):
            click.echo(f"  {n}")
    click.echo(replay_text(card, doc))


@cli.command()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON object: ok, events, streams, head, revision, head_revision, migrations_at_head, triggers, "
    "chains_ok, errors, stream_checks.",
)
@click.pass_context
def verify(ctx: click.Context, as_json: bool) -> None:
    """Check every link of every stream's hash chain, the append-only triggers and the schema revision.

    Prints the ledger's head hash: keep it somewhere else; a later verify that prints another head means the
    log changed. Exit 1 if anything is wrong.
    """
    from .verify import verify_ledger

    with open_ledger(ctx) as ledger:
        rep = verify_ledger(ledger.store)
    if as_json:
        echo_json(rep.to_json())
    else:
        for err in rep.errors:
            click.echo(f"FAIL {err}")
        click.echo(rep.summary())
        click.echo(f"head {rep.head}")
    if not rep.ok:
        sys.exit(1)


@cli.command()
@click.option("--seed", default=0, show_default=True, help="Seed for the demo agent's choices.")
@click.pass_context
def demo(ctx: click.Context, seed: int) -> None:
    """Play two bundled games through the real toolkit (OFFLINE) with the ledger attached, then replay the card."""
    from .demo import run_demo
    from .report import replay_text

    with open_ledger(ctx) as ledger:
        card_id = run_demo(ledger, seed=seed)
        card = ledger.load_card(card_id)
        doc = ledger.document(card_id, card=card)
        click.echo(replay_text(card, doc))
        click.echo("")
        click.echo(f"ledger: {ledger.store.describe()}")
        db = ctx.obj["db"]
        shown = ledger.store.describe() if "://" in db else db  # never echo a password given in a URL
        click.echo(f"try:    ledger --db {shown} export {card_id} --indent 2")


# Each area's commands live in their own module and register themselves on ``cli`` when imported.
from . import cli_audit, cli_baselines, cli_copy, cli_import  # noqa: E402, F401


def main() -> None:
    """Console entry point."""
    cli(prog_name="ledger")
