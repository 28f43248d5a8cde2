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


class Throttled:
    """A click progress bar fed counts as often as you like, redrawn at most every :data:`REDRAW_SECONDS`."""

    def __init__(self, bar: Any, interval: float = REDRAW_SECONDS) -> None:
        self.bar = bar
        self.interval = interval
        self.pending = 0
        self.last = 0.0

    def __call__(self, n: int) -> None:
        self.pending += n
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if self.pending:
            self.bar.update(self.pending)
            self.pending = 0
        self.last = time.monotonic() if now is None else now


@contextmanager
def progress_bar(total: int, label: str, *, in_mb: bool = False) -> Iterator[Throttled]:
    """A throttled click progress bar on stderr; ``in_mb``: it also shows how many MB of ``total`` bytes are done."""
    bar: Any = click.progressbar(length=max(total, 1), label=label, file=sys.stderr, show_eta=True)
    if in_mb:
        bar.item_show_func = lambda _: f"{bar.pos / 1e6:.1f} of {total / 1e6:.1f} MB"
    with bar:
        throttled = Throttled(bar)
        try:
            yield throttled
        finally:
            throttled.flush()


@contextmanager
def verify_progress(ledger: Any, *, show: bool) -> Iterator[Callable[[int], None] | None]:
    """A per-event progress callback for ``verify`` when stderr is a terminal and the ledger is large, else None."""
    if not show or not sys.stderr.isatty():
        yield None
        return
    total = ledger.store.count()
    if total < VERIFY_PROGRESS_FROM:
        yield None
        return
    with progress_bar(total, "verifying") as bar:
        yield bar


def ledger_command() -> str:
    """How the user can run this program again: ``ledger`` when that is what the shell finds, else its path."""
    # Imported here: a command that never names itself starts without them.
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
