"""The viewer commands ``view``, ``bundle`` and ``compare``; all open the ledger read-only."""

from __future__ import annotations

import sys

import click

from ledger.cli.common import (
    LedgerCommandError,
    check_bindable,
    echo_json,
    emit,
    environments_option,
    include_retracted_option,
    is_loopback,
    json_option,
    listen_error,
    listen_options,
    open_ledger,
    shown_db,
    tags_option,
)
from ledger.cli.params import calculator_option

_ENVIRONMENTS_HELP = (
    "Folder of game files (searched for metadata.json, as the toolkit's environments_dir): replays re-simulate the "
    "recorded actions against this game code to draw every frame. Without it, replay pages say why there are no frames."
)


@click.command("view")
@listen_options(
    "Address to listen on. Anything but a loopback address lets other machines read the ledger.",
    8000,
    "Port to listen on (0: any free).",
)
@environments_option(_ENVIRONMENTS_HELP)
@click.pass_context
def view(ctx: click.Context, host: str, port: int, environments: str | None) -> None:
    """Pages: cards, a card, compare, progress, and a replay of each play drawn from the game code.

    Open cards update in the page while agents play. The first line printed is the address to open. Ctrl-C stops
    the server (exit 130).

    Examples:

    \b
      ledger view                                               # http://127.0.0.1:8000/
      ledger view --environments environment_files --port 8080
    """
    import contextlib
    import logging
    import signal

    from ledger.web.server import create_app, run

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request is noise here
    with open_ledger(ctx) as ledger:
        source = shown_db(ledger, ctx.obj["db"])
        app = create_app(ledger, environments=environments, source=source)

        def ready(url: str) -> None:
            click.echo(f"ledger view: {source} (read-only) at {url}  (Ctrl-C stops)")
            if not is_loopback(host):
                warn = f"Warning: listening on {host}: anyone who can reach this machine can read the ledger"
                click.echo(warn, err=True)
            sys.stdout.flush()

        # Started from a script (`ledger view &` in a non-interactive shell) SIGINT arrives ignored: Ctrl-C and
        # `kill -INT` must stop the server all the same. Not in the main thread (an embedding program): its own.
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            # Werkzeug prints its own lines and exits 1 on a busy port or an unknown host: say it as `serve` does.
            check_bindable(host, port)
            run(app, host, port, ready)
        except OSError as e:
            raise listen_error(host, port, e) from e
        except KeyboardInterrupt:
            pass
    # The server only stops on Ctrl-C (or SIGINT): the exit code says so, as for any interrupted command.
    click.echo("ledger view: stopped", err=True)
    sys.exit(130)


@click.command("bundle")
@click.argument("card_ids", nargs=-1, metavar="[CARD]...")
@click.option("--all", "all_cards", is_flag=True, help="Every card of the ledger.")
@tags_option("Every card with tag TAG (repeat it: cards with any of them).")
@environments_option(_ENVIRONMENTS_HELP)
@click.option(
    "--with-reasoning",
    is_flag=True,
    help="Keep the agent's recorded reasoning on the replay pages (left out by default: it may be private).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="DIR",
    help="Folder to write (index.html and one page per card); it must be new, empty, or an earlier bundle.",
)
@json_option("Print what was written as JSON: path, cards, pages, bytes.")
@include_retracted_option("Also bundle retracted cards (marked; left out by default).")
@click.pass_context
def bundle(
    ctx: click.Context,
    card_ids: tuple[str, ...],
    all_cards: bool,
    tags: tuple[str, ...],
    environments: str | None,
    with_reasoning: bool,
    output: str,
    as_json: bool,
    include_retracted: bool,
) -> None:
    """The site opens from file:// with no server and no network.

    Choose the cards by id (CARD...), with --all, or with --tag. API-key fingerprints are never written; the agent's
    reasoning only with --with-reasoning. Open DIR/index.html.

    Examples:

    \b
      ledger bundle --all -o site                                             # then open site/index.html
      ledger bundle --tag demo --environments environment_files -o demo-site
      ledger bundle CARD --with-reasoning -o dispute
    """
    from ledger.app.retract import choose_cards
    from ledger.web.bundle import write_bundle

    if all_cards and (card_ids or tags):
        raise LedgerCommandError("give cards by id, or --all, or --tag: not --all with the others", 2)
    if not (all_cards or card_ids or tags):
        raise LedgerCommandError("which cards? give CARD ids, --all or --tag TAG (see `ledger bundle --help`)", 2)
    with open_ledger(ctx) as ledger:
        cards = choose_cards(ledger, card_ids, tags, every=all_cards, include_retracted=include_retracted)
        chosen = [c.card_id for c in cards]
        if not chosen:
            what = "has a tag " + ", ".join(repr(t) for t in tags) if tags else "is in this ledger"
            raise LedgerCommandError(f"no card {what}: nothing to bundle", 1)
        progress = None
        if sys.stderr.isatty() and not as_json:

            def progress(done: int, total: int) -> None:
                click.echo(f"\rbundling cards: {done}/{total}", nl=done == total, err=True)

        result = write_bundle(
            ledger,
            chosen,
            output,
            environments=environments,
            with_reasoning=with_reasoning,
            source=shown_db(ledger, ctx.obj["db"]),
            progress=progress,
        )
    if as_json:
        echo_json(result)
        return
    frames = f", {result.replays_without_frames} replay page(s) without frames" if result.replays_without_frames else ""
    click.echo(f"wrote {result.pages} pages for {result.cards} card(s) ({result.bytes / 1024:.0f} KB) to {result.path}")
    click.echo(f"open:  file://{result.path}/index.html{frames}")


@click.command("compare")
@click.argument("card_ids", nargs=-1, metavar="CARD CARD...")
@click.option(
    "--group",
    "tags",
    multiple=True,
    metavar="TAG",
    help="The figures of the cards with tag TAG, as one group: per game and level, the cards, the best, the median "
    "and the quartiles. Repeat it to compare groups (agents) with each other.",
)
# --tag is read as --group for scripts that spell it so; hidden, as a repeated --tag elsewhere means any of the tags.
@click.option("--tag", "old_tags", multiple=True, hidden=True)
@json_option(
    "One JSON object. Cards side by side: cards (with opened time and score), games (per level: baseline, "
    "each card's actions), leaderboard. With --group: tags (per tag: rank, cards, score figures, cost (of its cards "
    "that carry one: cards, cost, levels_completed, cost_per_level; null: none does), games with their levels' "
    "figures), missing, ledger_cards, and side_by_side (the named cards, or null)."
)
@include_retracted_option("Also compare retracted cards (marked, never ranked; left out by default).")
@calculator_option(
    "Score every card with the calculator of this arc-agi release (0.9.1 to 0.9.9). Default: the newest of the "
    "cards' own (cards played under another release are re-scored with it; the first line says so)."
)
@click.pass_context
def compare(
    ctx: click.Context,
    card_ids: tuple[str, ...],
    tags: tuple[str, ...],
    old_tags: tuple[str, ...],
    as_json: bool,
    include_retracted: bool,
    calculator: str | None,
) -> None:
    """Named cards (two to 12) side by side: per game and level, each card's actions and score (a game's columns show
    its best play, the play its game score comes from); then a leaderboard by tag.

    --group TAG: the figures of the tag's cards, whatever their number: the card scores' best, quartiles and median;
    per game the cards that played it and its score figures; per level its human baseline, how many cards reached
    and completed it, the actions of those that completed it (best, quartiles, median, median over the baseline)
    and the level scores (0 where not completed); the cost of its cards that carry one (usage a file gave them,
    `ledger import`) and that cost per level they completed. Tags are ranked by their median card score. Read from
    the cards summary in one query (the cost: the tag's cards' usage events); `ledger cards --tag T --game G --sort
    score` pages through the cards behind a figure.

    Every card side by side is scored with one calculator: cards played under releases that score differently
    are never ranked against each other as they stand.

    Examples:

    \b
      ledger compare CARD1 CARD2          # two cards side by side
      ledger compare --group demo         # the figures of every card tagged demo
      ledger compare --group demo --json
    """
    from ledger.app.compare import compare as compared
    from ledger.app.tag_stats import SIDE_BY_SIDE

    tags = tags + old_tags
    named = list(dict.fromkeys(card_ids))
    if not tags and len(named) < 2:
        raise LedgerCommandError("compare needs two or more cards (or --group TAG)", 2)
    if len(named) > SIDE_BY_SIDE:
        raise LedgerCommandError(
            f"compare shows at most {SIDE_BY_SIDE} cards side by side ({len(named)} given): "
            "tag them and compare the tag's figures with --group TAG",
            2,
        )
    with open_ledger(ctx) as ledger:
        out = compared(ledger, named, tags, include_retracted=include_retracted, calculator=calculator)
    emit(out, as_json)
