"""`ledger copy` commands (registered on :data:`ledger.cli.cli`)."""

from __future__ import annotations

import sys
from contextlib import closing

import click

from ledger.cli.common import echo_json
from ledger.cli.progress import progress_bar


@click.command("copy")
@click.option(
    "--from",
    "source",
    default=None,
    metavar="PATH|URL",
    help="The ledger to copy from (default: --db / $LEDGER_DB). It is only read: not created, not migrated.",
)
@click.option(
    "--to",
    "destination",
    required=True,
    metavar="PATH|URL",
    help="The ledger to copy into: a SQLite path or postgresql+psycopg://user@host/db (created if needed).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print what was copied as one JSON object: from, to, events, new_streams, extended_streams, "
    "current_streams, seconds (the whole command) and copy_seconds (the copy after the plan).",
)
@click.pass_context
def copy_cmd(ctx: click.Context, source: str | None, destination: str, as_json: bool) -> None:
    """Every event, with its hash, from one ledger into another (SQLite to PostgreSQL, and back).

    Only events the destination does not hold yet are copied, so running it again (say nightly, from every
    machine into the team's PostgreSQL ledger) is safe. Each stream continues exactly where the destination's
    copy of it ends and the chain verifies there (`ledger --db DST verify`). If the destination holds a different
    history for any stream, nothing is copied and the command fails (exit 1).

    Examples:

    \b
      ledger copy --to team.sqlite                              # this ledger into team.sqlite
      ledger copy --from ledger.sqlite --to team.sqlite --json  # again: nothing new to copy
    """
    import time

    from ledger.app.copying import copy_ledger, open_destination, open_source, plan_copy

    # The rate is of the whole command: opening both ledgers (the destination's schema), reading every stream's
    # head on both sides and comparing them, then the copy.
    started = time.perf_counter()
    src_where = source or ctx.obj["db"]
    with (
        closing(open_source(src_where)) as src,
        closing(open_destination(destination, durability=ctx.obj["durability"])) as dst,
    ):
        plan = plan_copy(src, dst)
        show = not as_json and sys.stderr.isatty() and plan.events > 0
        if show:
            with progress_bar(plan.events, "copying events") as bar:
                rep = copy_ledger(src, dst, plan=plan, progress=bar)
        else:
            rep = copy_ledger(src, dst, plan=plan)
    total = time.perf_counter() - started
    if as_json:
        echo_json(
            {
                "from": rep.source,
                "to": rep.destination,
                "events": rep.events,
                "new_streams": rep.new_streams,
                "extended_streams": rep.extended_streams,
                "current_streams": rep.current_streams,
                "seconds": round(total, 3),
                "copy_seconds": round(rep.seconds, 3),
                "summary_seconds": round(rep.summary_seconds, 3),
            }
        )
        return
    if rep.events == 0:
        click.echo(
            f"nothing to copy: {rep.destination} already holds every event of {rep.source} (checked in {total:.2f} s)"
        )
        return
    rate = rep.events / total if total > 0 else float("inf")
    click.echo(
        f"copied {rep.events} events ({rep.new_streams} new streams, {rep.extended_streams} extended, "
        f"{rep.current_streams} already up to date) from {rep.source} to {rep.destination} "
        f"in {total:.2f} s, the whole command ({rate:,.0f} events/s; the copy itself {rep.seconds:.2f} s, then the "
        f"cards summary caught up in {rep.summary_seconds:.2f} s)"
    )
