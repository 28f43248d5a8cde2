"""What every ``ledger`` command shares: opening the ledger, errors and their exit codes, output, common options."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import msgspec

from ledger.errors import LedgerError
from ledger.ledger import Ledger
from ledger.services.rescore import MATCHES


class LedgerCommandError(click.ClickException):
    """An error with a one-line message and an exit code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class LedgerGroup(click.Group):
    """The one place a :class:`~ledger.errors.LedgerError` becomes a one-line message and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LedgerError as e:
            raise LedgerCommandError(str(e), e.exit_code) from e


@contextmanager
def open_ledger(ctx: click.Context) -> Iterator[Ledger]:
    """Open the ledger named by ``--db``/``LEDGER_DB``; it is closed when the block ends."""
    ledger = Ledger.open(ctx.obj["db"], durability=ctx.obj["durability"])
    try:
        yield ledger
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


def card_options(f: Callable[..., Any]) -> Callable[..., Any]:
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


def scoring_options(f: Callable[..., Any]) -> Callable[..., Any]:
    # --baselines/--match/--all-environments of export and replay (ledger/rescore.py does the work).
    f = match_options(f)
    return click.option(
        "--baselines",
        default=None,
        metavar="LABEL|ID",
        help="Score under this set (label or id, see `ledger baselines list`), not the one the card was played under.",
    )(f)


def match_notes(matches: Any) -> list[str]:
    from ledger.services.rescore import match_note

    return [n for n in (match_note(m) for m in matches) if n is not None]
