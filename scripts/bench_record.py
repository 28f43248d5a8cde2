"""`ledger record` figures: the swarm test harness playing 25 games in threads on one card, bare and recorded
side by side in one run (so the ratio, not the seconds, is the figure), with the recorded command's open file
descriptors sampled from /proc all along, under `ulimit -n 256`, and the exported card checked against the card
the harness printed.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ledger import Ledger
from tests.test_record_soak import soak

GAMES = 25


def run(quick: bool) -> list[str]:
    steps = 40 if quick else 400
    out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-record-") as tmp:
        bare = soak(Path(tmp) / "unused.sqlite", GAMES, steps, nofile=256, record=False)
        db = Path(tmp) / "record.sqlite"
        recorded = soak(db, GAMES, steps, nofile=256)
        if bare.returncode or recorded.returncode:
            return [
                f"FAILED: bare exit {bare.returncode}, recorded exit {recorded.returncode}: {recorded.stderr[-500:]}"
            ]
        printed = recorded.printed_card()
        with Ledger.open(db) as led:
            card = led.load_card(json.loads(printed)["card_id"])
            actions, events = card.total_actions, card.events
            same = led.export(card.card_id) == printed
        out.append(
            f"record of {GAMES} game threads x {steps} steps ({actions} actions, {events} events): "
            f"{recorded.seconds:.1f} s recorded vs {bare.seconds:.1f} s bare = {recorded.seconds / bare.seconds:.2f}x "
            "(start-up of the recorder and its interpreter check included)"
        )
        out.append(
            f"  open descriptors of the recorded command (ulimit -n 256): first {recorded.fds[0]}, "
            f"peak {max(recorded.fds)}, last {recorded.fds[-1]} over {len(recorded.fds)} samples; "
            f"bare harness peak {max(bare.fds)}"
        )
        out.append(f"  exported card equals the harness's printed card: {same}")
    return out
