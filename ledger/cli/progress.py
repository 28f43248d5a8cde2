"""Progress on long work (on a terminal only, on stderr) and how to name this program in hints."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

#: A bar redraws at most this often (a redraw per event or per line would cost more than the work).
REDRAW_SECONDS = 0.2
#: verify shows progress from this many events on (below it, it is over before a bar would help).
VERIFY_PROGRESS_FROM = 200_000


@contextmanager
def progress_bar(
    total: int, label: str, *, in_mb: bool = False, show: bool = True
) -> Iterator[Callable[[int], None] | None]:
    """A click progress bar on stderr, redrawn at most every :data:`REDRAW_SECONDS`, when ``show`` and stderr is a
    terminal (else None); ``in_mb``: also shows MB done."""
    if not (show and sys.stderr.isatty()):
        yield None
        return
    bar: Any = click.progressbar(length=max(total, 1), label=label, file=sys.stderr, show_eta=True)
    if in_mb:
        bar.item_show_func = lambda _: f"{bar.pos / 1e6:.1f} of {total / 1e6:.1f} MB"
    pending, last = 0, 0.0

    def update(n: int) -> None:
        nonlocal pending, last
        pending += n
        now = time.monotonic()
        if now - last >= REDRAW_SECONDS and pending:
            bar.update(pending)
            pending, last = 0, now

    with bar:
        try:
            yield update
        finally:
            if pending:
                bar.update(pending)


@contextmanager
def verify_progress(ledger: Any, *, show: bool) -> Iterator[Callable[[int], None] | None]:
    """A per-event progress callback for ``verify`` when stderr is a terminal and the ledger is large, else None."""
    total = ledger.store.count() if show and sys.stderr.isatty() else 0
    with progress_bar(total, "verifying", show=total >= VERIFY_PROGRESS_FROM) as bar:
        yield bar


def ledger_command() -> str:
    """How the user can run this program again: ``ledger`` when that is what the shell finds, else its path."""
    import shutil
    from pathlib import Path

    argv0 = sys.argv[0] if sys.argv else ""
    me = Path(argv0) if argv0 and Path(argv0).name == "ledger" else Path(sys.executable).parent / "ledger"
    if not me.exists():
        return "ledger"
    found = shutil.which("ledger")
    if found is not None and os.path.realpath(found) == os.path.realpath(me):
        return "ledger"
    try:
        rel = os.path.relpath(me)
    except ValueError:
        rel = str(me)
    return rel if not rel.startswith("..") else str(me.absolute())
