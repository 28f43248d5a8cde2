"""The card commands: init, cards, export, replay, verify, demo."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ledger.cli.common import card_options, echo_json, match_notes, open_ledger, scoring_options, write_output
from ledger.core import document


@click.command()
@click.pass_context
def init(ctx: click.Context) -> None:
    """Create the ledger (or upgrade its schema) and print where it is."""
    with open_ledger(ctx) as ledger:
        click.echo(f"ledger ready at {ledger.store.describe()} (schema {ledger.store.revision()})")


@click.command()
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


@click.command()
@card_options
@click.option("-o", "--output", default=None, metavar="FILE", help="Write to FILE (atomically) instead of stdout.")
@click.option("--indent", type=click.IntRange(min=0, max=16), default=None, help="Pretty-print with N spaces.")
@scoring_options
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
            from ledger.services.rescore import document_for

            scored = document_for(
                ledger, card_id, until=until, baselines=baselines, match=match, all_environments=all_environments
            )
            text = document.to_json(scored.doc, indent=indent)
            notes = match_notes(scored.matches) if match == "base" else []
    write_output(text, output)
    for n in notes:
        click.echo(n, err=True)


@click.command()
@card_options
@click.option("--json", "as_json", is_flag=True, help="The card's plays and document as JSON.")
@scoring_options
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
    from ledger.core.text import replay_text
    from ledger.services.rescore import document_for

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
        for n in match_notes(scored.matches):
            click.echo(f"  {n}")
    click.echo(replay_text(card, doc))


@click.command()
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
    from ledger.services.verify import verify_ledger

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


@click.command()
@click.option("--seed", default=0, show_default=True, help="Seed for the demo agent's choices.")
@click.pass_context
def demo(ctx: click.Context, seed: int) -> None:
    """Play two bundled games through the real toolkit (OFFLINE) with the ledger attached, then replay the card."""
    from ledger.core.text import replay_text
    from ledger.toolkit.demo import run_demo

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
