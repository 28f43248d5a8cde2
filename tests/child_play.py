"""A child process for kill tests: plays with the ledger attached and reports each acknowledged step.

    python -m tests.child_play DB SEED STEPS

After every toolkit step returns it prints one JSON line {"step": i, "card": card_id, "scorecard": <the
toolkit's get_scorecard JSON>} and flushes, so the parent knows exactly what the agent had seen when it was killed.
"""

from __future__ import annotations

import json
import sys

from ledger import Ledger
from tests.toolkit import arcade, step


def main() -> None:
    db, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    arc = arcade()
    led = Ledger.open(db)
    led.attach(arc)
    card = arc.open_scorecard()
    env = arc.make("wkex", scorecard_id=card, seed=seed)
    for i in range(steps):
        # One ActionTaken per step (never a WIN, whose later actions would count nothing), two level completions.
        step(env, 1 if i in (50, 150) else 2)
        print(
            json.dumps({"step": i + 1, "card": card, "scorecard": arc.get_scorecard(card).model_dump_json()}),
            flush=True,
        )


if __name__ == "__main__":
    main()
