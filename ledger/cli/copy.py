"""`ledger copy` commands (registered on :data:`ledger.cli.cli`)."""

from __future__ import annotations

from contextlib import closing

import click

from ledger.cli.common import emit, json_option
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
@json_option(
    "Print what was copied as one JSON object: from, to, events, new_streams, extended_streams, "
    "current_streams, seconds (the whole command) and copy_seconds (the copy after the plan)."
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
    import dataclasses
    import time

    from ledger.app.copying import copy_ledger, open_destination, open_source, plan_copy

    started = time.perf_counter()  # the rate is of the whole command (CopyReport.total_seconds)
    with (
        closing(open_source(source or ctx.obj["db"])) as src,
        closing(open_destination(destination, durability=ctx.obj["durability"])) as dst,
    ):
        plan = plan_copy(src, dst)
        with progress_bar(plan.events, "copying events", show=not as_json and plan.events > 0) as bar:
            rep = copy_ledger(src, dst, plan=plan, progress=bar)
    emit(dataclasses.replace(rep, total_seconds=time.perf_counter() - started), as_json)
