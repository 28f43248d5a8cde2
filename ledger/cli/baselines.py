"""`ledger baselines import|list|show|diff` and `ledger rescore` (registered on :data:`ledger.cli.cli`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
import msgspec

from ledger.cli.common import (
    LedgerCommandError,
    allow_broken_option,
    complete_card_ids,
    count,
    echo_json,
    emit,
    json_option,
    match_option,
    match_options,
    open_ledger,
)
from ledger.cli.params import calculator_option


def _short(set_id: str) -> str:
    return set_id[:12]


@click.group("baselines")
def baselines_group() -> None:
    """A set is named by its id (sha256 of its content; any unique prefix of 4+ characters works) or by a label.
    Every card records the set it was played under; `ledger rescore` and `ledger export --baselines` score it
    under another one.

    Examples:

    \b
      ledger baselines import environment_files --label shipped
      ledger baselines list
      ledger baselines show shipped
    """


@baselines_group.command("import")
@click.argument("source", metavar="DIR|FILE")
@click.option("--label", default=None, metavar="LABEL", help="Name the set LABEL (a label points at one set).")
@click.option("--move", is_flag=True, help="Let --label move from the set it points at now to this one.")
@click.option(
    "--skip-invalid",
    is_flag=True,
    help="DIR: leave out unreadable metadata.json files (as the toolkit does) instead of refusing the import.",
)
@json_option("The result as JSON.")
@click.pass_context
def import_cmd(
    ctx: click.Context, source: str, label: str | None, move: bool, skip_invalid: bool, as_json: bool
) -> None:
    """Store the baseline set found in DIR or FILE and print its id.

    DIR: an environment_files tree; every metadata.json under it is one game. FILE: JSON, either a list of
    entries (metadata.json-like, or the toolkit's /api/games list) or the output of `baselines show --json`.
    Importing the same content again (in any order) gives the same id and writes nothing new.
    Bad input exits 2 and writes nothing; so does a --label that already points at another set (see --move).

    Examples:

    \b
      ledger baselines import environment_files --label shipped
      ledger baselines import v2.json --label v2
    """
    from ledger.app import baseline_sets as bs

    src = bs.read_source(source, skip_invalid=skip_invalid)
    if label is not None:
        bs.check_label(label)
    for w in src.warnings:
        click.echo(f"Warning: {w}", err=True)
    with open_ledger(ctx, write=True) as ledger:
        res = bs.import_set(ledger, src.entries, label=label, move=move, warnings=src.warnings)
    if as_json:
        echo_json(res)
        return
    state = "new set" if res.new else "already stored"
    click.echo(f"{res.set_id}  {count(res.games, 'game')}  ({state})")
    if res.label is not None:
        if res.label_changed and res.label_previous:
            click.echo(f"label {res.label}: moved from {_short(res.label_previous)} to {_short(res.set_id)}")
        elif res.label_changed:
            click.echo(f"label {res.label} -> {_short(res.set_id)}")
        else:
            click.echo(f"label {res.label} already points at {_short(res.set_id)}")


@baselines_group.command("list")
@json_option("One JSON array of sets.")
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the stored sets, oldest first.

    Each with its id, when it was recorded, its games, its levels with a baseline and its labels.

    Examples:

    \b
      ledger baselines list
      ledger baselines list --json
    """
    from ledger.app import baseline_sets as bs

    with open_ledger(ctx) as ledger:
        sets = bs.list_sets(ledger)
    emit(sets, as_json)


@baselines_group.command("show")
@click.argument("ref", metavar="LABEL|ID")
@json_option("The set as JSON (importable with `baselines import`).")
@click.pass_context
def show_cmd(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Print one set's games: id, baselines per level, tags.

    Examples:

    \b
      ledger baselines import v2.json --label v2
      ledger baselines show v2
      ledger baselines show v2 --json
    """
    from ledger.app import baseline_sets as bs

    with open_ledger(ctx) as ledger:
        info = bs.set_info(ledger, bs.resolve(ledger, ref))
    emit(info, as_json)


@baselines_group.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@match_option("base: pair a game of A with B's version of the same 4-letter base id when its exact id is gone.")
@click.option("--all", "show_all", is_flag=True, help="Also list the games that did not change.")
@json_option("Every game's difference as JSON.")
@click.pass_context
def diff_cmd(ctx: click.Context, a: str, b: str, match: str, show_all: bool, as_json: bool) -> None:
    """Show what changed from set A to set B.

    A and B are labels or ids. Per game: the levels added or removed and each level's baseline.

    Examples:

    \b
      ledger baselines import environment_files --label shipped
      ledger baselines import v2.json --label v2
      ledger baselines diff shipped v2
    """
    from ledger.app import baseline_sets as bs

    with open_ledger(ctx) as ledger:
        out = bs.diff(ledger, a, b, match=match, show_all=show_all)  # type: ignore[arg-type]
    emit(out, as_json)


@click.command("rescore")
@click.argument("card_ids", nargs=-1, metavar="CARD...", shell_complete=complete_card_ids)
@click.option(
    "--baselines",
    "ref",
    default=None,
    metavar="LABEL|ID",
    help="The set to score the cards under (default: each card's own).",
)
@calculator_option(
    "The arc-agi release (0.9.1 to 0.9.9) whose calculator scores the cards (default: each card's own, the "
    "toolkit that played it)."
)
@click.option("--all", "every", is_flag=True, help="Every card in the ledger.")
@match_options
@json_option("Every card's changes as JSON.")
@allow_broken_option
@click.pass_context
def rescore_cmd(
    ctx: click.Context,
    card_ids: Sequence[str],
    ref: str | None,
    calculator: str | None,
    every: bool,
    match: str,
    all_environments: bool,
    as_json: bool,
    allow_broken: bool,
) -> None:
    """Prints each card as played and as re-scored, what changed, largest change first. Give --baselines, --calculator
    or both.

    Per card, game, play and level: baseline old -> new, actions, level score old -> new, game score old -> new.
    A rescore is a read: nothing is written to the ledger.

    Examples:

    \b
      ledger rescore CARD --calculator 0.9.1
      ledger baselines import v2.json --label v2
      ledger rescore --all --baselines v2
    """
    from ledger.app.rescore import Rescored, rescore_cards, rescore_targets
    from ledger.domain import calculators
    from ledger.rules.rescoring import by_largest_change

    if every and card_ids:
        raise LedgerCommandError("give CARD_IDs or --all, not both", 2)
    if not every and not card_ids:
        raise LedgerCommandError("give at least one CARD_ID, or --all (see `ledger cards`)", 2)
    if ref is None and calculator is None:
        raise LedgerCommandError("give --baselines SET, --calculator VERSION or both: what to re-score under", 2)
    calc = calculators.get(calculator) if calculator is not None else None
    with open_ledger(ctx) as ledger:
        ids, set_id, entries = rescore_targets(ledger, card_ids, every, ref)
        results_iter = rescore_cards(
            ledger,
            ids,
            entries,
            match=match,  # type: ignore[arg-type]
            all_environments=all_environments,
            calculator=calc,
            allow_broken=allow_broken,
            on_broken=lambda c, why: click.echo(
                f"Note: card {c} is BROKEN ({why}): re-scored as far as the log holds it", err=True
            ),
        )
        if sys.stderr.isatty() and len(ids) > 20:
            with click.progressbar(results_iter, length=len(ids), label="rescoring", file=sys.stderr) as bar:
                results = by_largest_change(bar)
        else:
            results = by_largest_change(results_iter)
    out = Rescored(results, set_id, ref, calculator, match, all_environments)  # type: ignore[arg-type]
    if not as_json:
        emit(out, as_json)
        return
    # msgspec encodes the Structs directly: for `--all` over many cards this is several times faster than
    # echo_json's json.dumps, with the same keys, order and float digits.
    click.echo(msgspec.json.format(msgspec.json.encode(out.to_json()), indent=2).decode("utf-8"))
