"""Tamper-check figures: what checking the type and shape of every column the hash chain reads costs `ledger
verify`, measured side by side in one run on the same ledger (with the check, and with it short-circuited)."""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.domain import chain
from ledger.domain.events import ActionTaken, CardOpened, PlayStarted, card_stream

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


def _fill(path: Path, n: int) -> None:
    with Ledger.open(path) as led:
        evs: list[Any] = [
            CardOpened(ts=T0, card_id="bench"),
            PlayStarted(ts=T0, game_id="cnt3-0000000a", guid="g", seed=0),
        ]
        evs += [
            ActionTaken(
                ts=T0 + timedelta(milliseconds=i),
                game_id="cnt3-0000000a",
                guid="g",
                action=1 + i % 4,
                levels_completed=0,
                state="NOT_FINISHED",
            )
            for i in range(n)
        ]
        led.store.append(card_stream("bench"), evs, expected_version=0)


def _best(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(quick: bool) -> list[str]:
    """``ledger verify`` of one card with and without the column checks (``quick``: 5,000 events)."""
    n = 5_000 if quick else 200_000
    repeat = 1 if quick else 5
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "verify.sqlite"
        _fill(path, n)

        def verify() -> None:
            with Ledger.open(path, readonly=True) as led:
                assert verify_ledger(led.store).ok

        original = chain.column_problem

        def unchecked_verify() -> None:
            chain.column_problem = lambda row: None  # type: ignore[assignment]
            try:
                verify()
            finally:
                chain.column_problem = original

        verify()  # warm the file cache before either is timed
        # Interleaved, best of each: a busy machine slows both alike.
        checked, unchecked = float("inf"), float("inf")
        for _ in range(repeat):
            unchecked = min(unchecked, _best(unchecked_verify, 1))
            checked = min(checked, _best(verify, 1))
    return [
        f"ledger verify of {n + 2:,} events: {checked:.2f} s with every column's type and shape checked, "
        f"{unchecked:.2f} s without (x{checked / unchecked:.2f})"
    ]
