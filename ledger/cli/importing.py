"""`ledger import` (added to the group in :mod:`ledger.cli`); :mod:`ledger.imports.importing` does the work."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ledger.cli.common import count, echo_json, environments_option, json_option, open_ledger, size
from ledger.cli.params import calculator_option
from ledger.cli.progress import progress_bar

if TYPE_CHECKING:  # the services are imported when the command runs: `ledger --help` must start fast
    from ledger.formats.import_problems import Problem
    from ledger.imports.import_cards import CardResult, ImportSummary


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path), metavar="PATH...")
@environments_option(
    "An environment_files tree (every metadata.json under it, as the toolkit scans): new cards are stored "
    "with its baselines, and already imported cards that have none get them. Without it they have none, and export "
    "shows 'No Matching EnvironmentInfo' for every game unless given --baselines. For harness recordings, the "
    "games' code under it is re-run to recover each line's action, resets included.",
    path_type=Path,
)
@click.option(
    "--strict",
    is_flag=True,
    help="A bad line, a file name that disagrees with its lines, or an impossible value (levels_completed below 0 "
    "or above win_levels, an unknown state, timestamps going backwards in a file) fails the card (nothing of it "
    "imported, exit 2). A truncated last line is skipped either way.",
)
@click.option(
    "--card-id",
    default=None,
    metavar="ID",
    help="The card the given recordings are, when their folder is not named by its card id (the toolkit's "
    "<recordings_dir>/<card_id>/ layout) and none of their plays is in the ledger. Names one card: give the files "
    "of one run only.",
)
@click.option(
    "--allow-repeats",
    is_flag=True,
    help="Import lines that repeat an earlier line (same guid, action, answer and timestamp) or whose timestamp "
    "goes back, as they are. Without it such a line refuses its card (exit 2), naming the line: no recorder writes "
    "them, they come from files pasted together or edited.",
)
@calculator_option(
    "The arc-agi release that played the recordings (0.9.1 to 0.9.9): new cards are scored with its calculator. "
    "Without it they are scored with the newest, and export and replay say so."
)
@json_option("Print the summary as one JSON object (and nothing else).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no line per card; problems and summary only.")
@click.pass_context
def import_cmd(
    ctx: click.Context,
    paths: tuple[Path, ...],
    environments: Path | None,
    strict: bool,
    card_id: str | None,
    allow_repeats: bool,
    calculator: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Two kinds of JSONL recording: the toolkit's own (save_recording=True) and the ARC-AGI-3-Agents harness's
    (<game_id>.<agent>.<uuid>.recording.jsonl).

    PATH is a recordings folder (<recordings_dir>/<card_id>/<game_id>-<guid>.jsonl), one card folder, or single
    .jsonl files. A toolkit card's id is its folder name when that is a card id (a uuid, as the toolkit names
    them); otherwise the card holding the lines' plays in the ledger, or --card-id; with none of these the files
    are refused (exit 2), never joined to a card a name made up. A harness recording is one card named by the uuid
    in its file name (the agent name is its tag). Each card is imported in one transaction, opened at its first
    timestamp and closed (end_of_import) at its last. Importing again adds only what the files gained since:
    nothing if they did not change ("already imported").

    Harness recordings hold each answer but not the action: with --environments the game is re-run and each line's
    action recovered (lines no action reproduces are reported and skipped); without it the scores are exact but
    resets are unknown, which the summary and the card's audit say. A benchmarking run folder beside the file
    (run_meta.json, step_NNN.json) gives the chosen actions.

    Lines that are not JSON or have wrong types are reported (file:line), skipped and recorded with the card (the
    audit warns); a truncated last line (a run killed mid-write, or still writing) is read again next time. A file
    that is no recording (in no format the ledger reads, its first line not a recording line, or one line in four
    or more not one), a toolkit file holding several plays, and a play already on another card are errors (exit
    2): nothing of that card is imported.

    Recordings of plays the ledger holds already (captured live, or imported from other files; found by their
    guids) are compared with the card holding them and never written again: "same card" or "differs" with each
    difference listed. Lines after that card's close are left out and reported. Lines that repeat an earlier line
    or go back in time refuse the card unless --allow-repeats. A benchmarking run folder's model and run id become
    the card's tags and its usage and cost are kept with it (shown by `ledger replay` and the viewer).

    Exit codes: 0 imported, already imported or the same card, 1 a card the ledger refused (a file rewritten
    anywhere in what was imported) or recordings that differ from the card holding their plays, 2 bad usage, a
    refused file (above), repeated lines, or bad input under --strict.

    Examples:

    \b
      ledger import recordings                                # the toolkit's recordings
      ledger import harness --environments environment_files  # a harness run, re-played
      ledger import recordings --json --quiet
    """
    from ledger.formats.finding import find_recordings
    from ledger.imports.importing import import_recordings, summary_json, total_bytes

    found = find_recordings(paths)
    show = not quiet and not as_json and sys.stderr.isatty()
    done = _Committed(len(found.cards))
    ctx.obj["on_interrupt"] = done.line
    with (
        open_ledger(ctx, write=True) as ledger,
        progress_bar(total_bytes(found.cards) if show else 0, "importing", in_mb=True, show=show) as bar,
        done.deferring_ctrl_c(),
    ):
        summary = import_recordings(
            ledger,
            found=found,
            environments=environments,
            strict=strict,
            progress=done.progress(bar),
            on_card=done,
            card_id=card_id,
            allow_repeats=allow_repeats,
            calculator=calculator,
        )
    if as_json:
        echo_json(summary_json(summary, environments is not None))
    else:
        _print(summary, quiet=quiet, strict=strict, with_environments=environments is not None, repeats=allow_repeats)
    if summary.exit_code:
        sys.exit(summary.exit_code)


class _Committed:
    """Counts the committed cards for Ctrl-C's line; Ctrl-C waits for a safe point (a second one stops at once)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.cards = 0
        self.seen = 0
        self.stop = False

    def __call__(self, result: CardResult) -> None:
        self.seen += 1
        if result.status in ("imported", "updated", "already imported"):
            self.cards += 1
        self._checkpoint()

    def _checkpoint(self) -> None:
        # Once every card has been through, nothing is left to stop: the import finishes and says so (exit 0).
        if self.stop and self.seen < self.total:
            raise KeyboardInterrupt

    def progress(self, bar: Callable[[int], None] | None) -> Callable[[int], None]:

        def step(n: int) -> None:
            self._checkpoint()
            if bar is not None:
                bar(n)

        return step

    @contextmanager
    def deferring_ctrl_c(self) -> Iterator[None]:

        def handler(_signum: int, _frame: Any) -> None:
            if self.stop:
                raise KeyboardInterrupt
            self.stop = True

        try:
            previous = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread (an embedding program): Ctrl-C is its business
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def line(self) -> str:
        left = self.total - self.cards
        return (
            f"import: {self.cards} of {self.total} card(s) committed, {left} not yet (each card is all or nothing); "
            "run it again to finish"
        )


def _severity(p: Problem, strict: bool, repeats: bool = False) -> str:
    from ledger.formats.import_problems import FATAL_KINDS, REFUSED_KINDS, REPEAT_KINDS, STRICT_KINDS

    if p.kind in REPEAT_KINDS:
        return "Warning" if repeats else "Error"
    if p.kind in FATAL_KINDS or p.kind in REFUSED_KINDS or (strict and p.kind in STRICT_KINDS):
        return "Error"
    warn = ("truncated", "duplicate", "environments", "unreproduced", "cross_check", "reader_unused")
    return "Warning" if p.kind in STRICT_KINDS or p.kind in warn else "Note"


def _card_line(c: CardResult) -> str:
    if c.status in ("not imported", "differs"):
        return f"{c.status:<17} {c.card_id}: {c.error}"
    what = count(c.files, "file")
    if c.status in ("imported", "updated"):
        what += f", {count(c.lines, 'line')}, {count(c.plays, 'play')}, {count(c.events, 'event')}"
    if c.format == "harness" and c.status in ("imported", "updated") and c.recorded:
        what += f"; harness: {c.recorded} actions as each line names them (action_input), none inferred"
    elif c.format == "harness" and c.status in ("imported", "updated"):
        how = "re-simulated" if c.resets_known else "from the frames, resets unknown"
        what += f"; harness: {c.inferred} actions inferred ({how}), {c.undecided} undecided"
        if c.unreproduced:
            what += f", {c.unreproduced} unreproduced"
    if c.not_counted:
        what += f"; {count(c.not_counted, 'line')} after a play's end, not counted"
    if c.baselines_attached:
        what += "; baselines attached"
    return f"{c.status:<17} {c.card_id}: {what}"


def _print(s: ImportSummary, *, quiet: bool, strict: bool, with_environments: bool, repeats: bool) -> None:
    for p in s.problems:
        click.echo(f"{_severity(p, strict, repeats)}: {p}", err=True)
    if not quiet:
        for c in s.cards:
            click.echo(_card_line(c))
    t = s.totals()
    click.echo(
        f"{count(t['cards'], 'card')}: {t['imported']} imported, {t['updated']} updated, "
        f"{t['already_imported']} already imported, {t['not_imported']} not imported; "
        f"{count(t['plays'], 'play')}, {count(t['events'], 'event')} from {count(t['lines'], 'line')}"
    )
    if t["same_card"] or t["differs"]:
        click.echo(
            f"already in the ledger (found by their plays' guids, compared, not written): {t['same_card']} equal, "
            f"{t['differs']} differing"
        )
    h = s.inference()
    if h["inferred_actions"] or h["undecided_lines"] or h["unreproduced_lines"]:
        unknown = h["resets_unknown_cards"]
        why = "read from the frames: the notes say why" if with_environments else "no game code: give --environments"
        click.echo(
            f"harness: {count(h['inferred_actions'], 'action')} inferred, "
            f"{count(h['undecided_lines'], 'line')} undecided "
            f"(a level RESET or the action imported; scores do not depend on it), "
            f"{count(h['unreproduced_lines'], 'line')} no action reproduces"
            + (f"; resets unknown on {count(unknown, 'card')} ({why})" if unknown else "")
        )
    if h["baselines_attached"]:
        click.echo(f"baselines attached to {count(h['baselines_attached'], 'card')} imported without them")
    skipped = s.skipped()
    if skipped:
        parts = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items(), key=lambda kv: -kv[1]))
        click.echo(f"skipped {count(sum(skipped.values()), 'line')}: {parts}")
    click.echo(f"read {size(s.bytes_read)} in {s.seconds:.2f} s ({size(s.mb_per_s * 1e6)}/s)")
    if not with_environments and t["imported"]:
        click.echo(
            "Note: no --environments: the new cards have no baseline set, so every game shows 'No Matching "
            "EnvironmentInfo'; score them with `ledger export CARD --baselines LABEL|ID`",
            err=True,
        )
