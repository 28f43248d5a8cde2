"""The card commands: init, cards, export, replay, verify, demo."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import click

from ledger.cli.common import (
    SORT_KEYS,
    allow_broken_option,
    card_options,
    emit,
    include_retracted_option,
    json_option,
    open_ledger,
    out_option,
    scoring_options,
    shown_db,
    tags_option,
    write_output,
)
from ledger.cli.params import SINCE, calculator_option, expect_head_option
from ledger.cli.progress import ledger_command, verify_progress


@click.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Repairs any missing append-only trigger, and prints where the ledger is.

    Examples:

    \b
      ledger init                   # ./ledger.sqlite
      ledger init --db team.sqlite
    """
    with open_ledger(ctx, write=True) as ledger:
        for name in ledger.store.repair_triggers():
            click.echo(f"repaired: append-only trigger {name} was missing and is created again")
        click.echo(f"ledger ready at {ledger.store.describe()} (schema {ledger.store.revision()})")


@click.command()
@json_option("One JSON array of card summaries (with tags and `lapsed`).")
@tags_option("Only cards with tag TAG (repeat it: cards with any of them).")
@click.option(
    "--game", "games", multiple=True, metavar="GAME", help="Only cards that played this game (id or 4-letter base id)."
)
@click.option("--open/--closed", "state", default=None, help="Only open cards, or only closed ones (as shown).")
@click.option(
    "--since",
    type=SINCE,
    default=None,
    metavar="WHEN",
    help="Only cards opened at or after WHEN: an ISO date or time (UTC unless it says), or an age like 30m, 12h, 7d.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N", help="At most N cards (after sorting).")
@click.option(
    "--sort",
    type=click.Choice(SORT_KEYS),
    default="opened",
    show_default=True,
    help="Order: opened/closed/id oldest or first; score/actions/events largest first.",
)
@click.option("--reverse", is_flag=True, help="Reverse the order (with --limit: newest N, say).")
@include_retracted_option("Also list retracted cards (marked; left out by default).")
@click.option(
    "--columns",
    "columns",
    type=click.Choice(["tokens", "cost"]),
    multiple=True,
    help="Add a column: tokens, cost (the run usage imported with each card; else the tokens a REST harness said in "
    "the reasoning of the card's actions, no cost; one read a card). With --json: those keys.",
)
@click.option(
    "--after",
    default=None,
    metavar="CARD",
    help="The next page: the cards that come after CARD (the last card id of the page before, or a unique prefix "
    "of it; an unknown or ambiguous one exits 2) in this order.",
)
@calculator_option(
    "Score every listed card with the calculator of this arc-agi release (0.9.1 to 0.9.9), not each card's own "
    "(the toolkit that played it); with --sort score they are ranked by that score."
)
@click.pass_context
def cards(
    ctx: click.Context,
    as_json: bool,
    tags: tuple[str, ...],
    games: tuple[str, ...],
    state: bool | None,
    since: datetime | None,
    limit: int | None,
    sort: str,
    reverse: bool,
    include_retracted: bool,
    columns: tuple[str, ...],
    after: str | None,
    calculator: str | None,
) -> None:
    """A card opened in competition mode (scored over every game of the server) is marked "(competition)" after its
    id (`competition` in --json): its score does not rank with a normal card's.

    A card left open that has been idle for STALE_MINUTES, or open for MAX_OPEN_FOR_MINUTES, is shown closed as
    the toolkit would have closed it (idle / max_open, at that moment, marked *); `ledger close` records it.
    Every list is read from the cards summary, one page at a time: `--limit 20`, then `--after LAST_ID`. Each
    score is under the card's own calculator (the arc-agi release that played it) unless --calculator is given.

    Examples:

    \b
      ledger cards
      ledger cards --tag demo --sort score --limit 20
      ledger cards --since 7d --json
    """
    from ledger.app.listing import CardFilter, card_list

    f = CardFilter(
        tags=tags,
        games=games,
        state=None if state is None else ("open" if state else "closed"),
        since=since,
        limit=limit,
        sort=sort,  # type: ignore[arg-type]
        reverse=(sort in ("score", "actions", "events")) != reverse,  # those sort largest first
        include_retracted=include_retracted,
        after=after,
    )
    with open_ledger(ctx) as ledger:
        listed = card_list(ledger, f, calculator=calculator, mixed=not as_json, columns=columns)
    emit(listed, as_json)


@click.command()
@card_options
@out_option("Write to FILE (atomically) instead of stdout.", "output")
@click.option("--indent", type=click.IntRange(min=0, max=16), default=None, help="Pretty-print with N spaces.")
@scoring_options
@calculator_option(
    "Score with the calculator of this arc-agi release (0.9.1 to 0.9.9): the JSON that release's toolkit gives "
    "for the same plays. Default: the card's own (the toolkit that played it)."
)
@allow_broken_option
@click.pass_context
def export(ctx: click.Context, card_id: str, output: str | None, indent: int | None, **options: Any) -> None:
    """The JSON is what the toolkit's get_scorecard(card).model_dump_json() returns for the same plays, under the
    arc-agi release that played it.

    With --baselines, the JSON the toolkit would give for the same plays under that set's EnvironmentInfos; with
    --calculator, under that release's arithmetic and document shape. Notes (another calculator, games matched by
    base id with --match base, a retraction) go to stderr: the JSON stays the toolkit's.

    Examples:

    \b
      ledger export CARD --indent 2 -o card.json
      ledger export CARD --until 10
      ledger export CARD --calculator 0.9.7
    """
    from ledger.app.card_read import read_card
    from ledger.domain import document
    from ledger.errors import BaselinesNotKnown

    with open_ledger(ctx) as ledger:
        read = read_card(ledger, card_id, **options)
    if read.unknown:  # an open server card's scores would be zeros the server will not give
        raise BaselinesNotKnown(read.card.card_id, read.unknown)
    write_output(document.to_json(read.doc, indent=indent), output)
    for n in read.notes:
        click.echo(n, err=True)


@click.command()
@card_options
@json_option("The card's plays and document as JSON.")
@scoring_options
@calculator_option(
    "Score with the calculator of this arc-agi release (0.9.1 to 0.9.9), not the card's own (the first lines say "
    "which)."
)
@allow_broken_option
@click.pass_context
def replay(ctx: click.Context, card_id: str, as_json: bool, **options: Any) -> None:
    """Per game and play: level, baseline, actions and score, the weighted mean and the cap; then a post-mortem of
    every play.

    With --baselines, the plays are scored under that set (the first line says which); with --calculator, with
    that arc-agi release's arithmetic.

    Examples:

    \b
      ledger replay CARD
      ledger replay CARD --until 10                 # as it stood after its event 10
      ledger replay CARD --calculator 0.9.7 --json
    """
    from ledger.app.card_read import replay as read_replay

    with open_ledger(ctx) as ledger:
        out = read_replay(ledger, card_id, **options)  # read as export's
    emit(out, as_json)


@click.command()
@expect_head_option(
    "Fail (exit 1) unless the ledger's head is still HASH (the `ledger head` line an earlier verify printed)."
)
@json_option(
    "One JSON object: ok, events, streams, head, revision, head_revision, migrations_at_head, triggers, "
    "chains_ok, derived, errors, stream_checks (and checkpoint, with --checkpoint)."
)
@click.option(
    "--quick",
    is_flag=True,
    help="Compare one cached card state in ten with a replay, not every one (the summary line says so); every "
    "chain and the other derived tables are still checked in full.",
)
@click.option(
    "--checkpoint",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Also check that the log extends this signed checkpoint (`ledger checkpoint`): its signature, then an "
    "RFC 9162 consistency proof from the tree it signed to the tree the events make today. Needs --key.",
)
@click.option(
    "--key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The public key (KEY.pub from `ledger keygen`) the checkpoint must be signed with.",
)
@click.pass_context
def verify(
    ctx: click.Context,
    expect_head: str | None,
    as_json: bool,
    quick: bool,
    checkpoint: str | None,
    key: str | None,
) -> None:
    """Checks every link of every stream's hash chain, the append-only triggers and the schema revision, then
    every table derived from the log against a rebuild: the cards summary and tag figures, the cached card states,
    the Merkle tree and the copy marks (each row that differs is named).

    Prints the ledger's head: one hash over every stream's last event (not a card's head, which `ledger audit`
    prints). Keep it somewhere else and pass it back with --expect-head: a ledger whose head moved has gained,
    lost or changed events since. Exit 1 if anything is wrong. On a terminal, a large ledger shows progress.

    Examples:

    \b
      ledger verify                     # prints the ledger head: keep it
      ledger verify --expect-head HEAD  # nothing changed since?
      ledger verify --json
    """
    from ledger.app.verify import verify_ledger, verify_outcome

    if (checkpoint is None) != (key is None):
        raise click.UsageError("--checkpoint and --key go together")
    with open_ledger(ctx) as ledger:
        with verify_progress(ledger, show=not as_json) as progress:
            rep = verify_ledger(ledger.store, progress=progress, quick=quick)
        cp = None
        if checkpoint and key:  # only then are the signatures' modules (cryptography) loaded
            from ledger.app.checkpoints import verify_checkpoint_files

            cp = verify_checkpoint_files(ledger.store, checkpoint, key)
        out = verify_outcome(rep, expect_head, cp)
    emit(out, as_json)


@click.command()
@click.option("--seed", default=0, show_default=True, help="Seed for the demo agent's choices.")
@click.pass_context
def demo(ctx: click.Context, seed: int) -> None:
    """Plays through the real toolkit (OFFLINE) with the ledger attached, then prints the card's replay.

    Examples:

    \b
      ledger demo                            # into ./ledger.sqlite
      ledger demo --db demo.sqlite --seed 7
    """
    from ledger.capture.demo import run_demo, viewer_commands
    from ledger.rules.text import replay_text

    with open_ledger(ctx, write=True) as ledger:
        card_id = run_demo(ledger.repository, seed=seed)
        card = ledger.load_card(card_id)
        doc = ledger.document(card_id, card=card)
        click.echo(replay_text(card, doc))
        click.echo("")
        click.echo(f"ledger: {ledger.store.describe()}")
        shown = shown_db(ledger, ctx.obj["db"])
        exe = ledger_command()
        click.echo(f"try:    {exe} --db {shown} export {card_id} --indent 2")
        if exe != "ledger":
            click.echo(f"        (`ledger` alone works after `source {os.path.dirname(exe) or '.'}/activate`)")
        view, bundle = viewer_commands(exe, shown, card_id)
        click.echo(f"look:   {view}")
        click.echo(f"share:  {bundle}")
