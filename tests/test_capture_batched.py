"""``durability="batched"``: capture commits in groups from a background thread, within its stated loss window,
and the card ends exactly as under the default durability."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

from ledger import Ledger
from ledger.capture.batching import BATCH_MS
from ledger.domain.events import card_stream, decode
from tests.toolkit import arcade, random_action, step


def _play(path: Path, durability: str, steps: int, close: bool) -> tuple[Ledger, str, object]:
    rng = random.Random(4)
    arc = arcade()
    led = Ledger.open(path, durability=durability)  # type: ignore[arg-type]
    led.attach(arc)
    card = arc.open_scorecard()
    envs = [arc.make(g, scorecard_id=card, seed=1) for g in ("cnt3", "clk2")]
    for _ in range(steps):
        env = rng.choice(envs)
        step(env, *random_action(rng, env))
    if close:
        arc.close_scorecard(card)
    return led, card, arc


def test_a_batched_card_equals_the_same_play_under_the_default(tmp_path: Path) -> None:
    led, card, _ = _play(tmp_path / "b.sqlite", "batched", 300, close=True)
    led.close()
    ref, card2, _ = _play(tmp_path / "n.sqlite", "normal", 300, close=True)
    ref.close()
    with Ledger.open(tmp_path / "b.sqlite", readonly=True) as b, Ledger.open(tmp_path / "n.sqlite", readonly=True) as n:
        got = [type(decode(r.body)).__name__ for r in b.store.read_stream(card_stream(card))]
        want = [type(decode(r.body)).__name__ for r in n.store.read_stream(card_stream(card2))]
        assert got == want and len(got) > 300
        uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # card ids and guids
        assert uuid.sub("X", b.export(card)) == uuid.sub("X", n.export(card2))


def test_queued_steps_are_committed_within_the_window_and_at_close(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    led, card, _ = _play(path, "batched", 40, close=False)
    try:
        time.sleep(BATCH_MS / 1000 * 6)
        # Another connection (another process would see the same) holds every step once the window has passed.
        with Ledger.open(path, readonly=True) as other:
            held = len(other.store.read_stream(card_stream(card)))
        assert held == led.load_card(card, use_cache=False).events > 40
    finally:
        led.close()
