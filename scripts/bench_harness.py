"""The harness soak: generated harness runs (tests/test_harness_soak.py: random agents on the tests' harness games
that die, win, click, reset; some cut part-way as Ctrl-C leaves them), each imported with and without the game
code, each card audited with and without it, and the FAILs counted (an honest recording must have none)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchlib import best

from tests.harness_recorder import environments
from tests.test_harness_soak import soak


def run(quick: bool) -> list[str]:
    runs = 5 if quick else 100
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        took, seen = best(lambda: soak(root / "soak", environments(root / "envs"), runs, seed=1), 1)
    return [
        f"soak: {seen['runs']} generated harness runs ({seen['stopped']} stopped part-way), {seen['cards']} cards "
        f"imported with and without the game code, {seen['audits']} audits with and without it: "
        f"{len(seen['fails'])} FAIL ({took:.0f} s)",
        *(f"  FAIL {f}" for f in seen["fails"][:5]),
    ]
