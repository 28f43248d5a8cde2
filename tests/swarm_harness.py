"""A harness written like the ARC-AGI-3-Agents Swarm, which never imports the ledger (run under `ledger record`).

One Arcade, one scorecard, one thread per game (each ``make``s its game on the shared card and plays a seeded
agent: RESET bursts, clicks, steps after the end), then the card is closed and its JSON printed on stdout, as
the Swarm prints the scorecard it got back. Options: ``--seed N``, ``--games a,b``, ``--steps N``,
``--exit N`` (exit status), ``--hang`` (print the card id, then keep playing slowly until interrupted),
``--child`` (also run a second harness as a Python child process, which prints its own card), ``--online URL``
(an ONLINE Arcade against the REST server at URL).
"""

from __future__ import annotations

import argparse
import logging
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from arc_agi import Arcade, OperationMode
from arcengine import GameAction

ENV_DIR = Path(__file__).resolve().parent / "environment_files"


def agent(arc: Arcade, card_id: str, game: str, seed: int, steps: int, hang: threading.Event | None) -> None:
    """Play one game on the shared card, as one Swarm agent thread does."""
    rng = random.Random(seed)
    env = arc.make(game, scorecard_id=card_id, seed=seed % 3)  # (a remote game ignores the seed)
    assert env is not None
    n = 0
    while n < steps or (hang is not None and not hang.is_set()):
        n += 1
        if hang is not None and n > steps:
            time.sleep(0.01)
        r = rng.random()
        if r < 0.06:  # a RESET burst: two in a row
            env.step(GameAction.RESET)
            env.step(GameAction.RESET)
            continue
        avail = env.observation_space.available_actions if env.observation_space else [1]
        a = rng.choice([*avail, 1])
        if a == 6:
            env.step(GameAction.ACTION6, data={"x": rng.randint(0, 63), "y": rng.randint(0, 63)})
        else:
            env.step(GameAction.from_id(a))  # after GAME_OVER/WIN this is a step after the end


def main() -> int:
    """Run the swarm and print the closed card's JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--games", default="cnt3,clk2,wkex")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--exit", type=int, default=0)
    ap.add_argument("--hang", action="store_true")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--online", default=None, metavar="URL")
    args = ap.parse_args()
    quiet = logging.getLogger("swarm")
    quiet.setLevel(logging.ERROR)
    logging.getLogger("arc_agi.scorecard").setLevel(logging.ERROR)
    if args.online:  # the toolkit's REST server standing in for the ARC server
        arc = Arcade(
            operation_mode=OperationMode.ONLINE,
            arc_base_url=args.online,
            arc_api_key="swarm-key",
            environments_dir=str(ENV_DIR),
            logger=quiet,
        )
    else:
        arc = Arcade(operation_mode=OperationMode.OFFLINE, environments_dir=str(ENV_DIR), logger=quiet)
    card_id = arc.open_scorecard(tags=["swarm", f"seed-{args.seed}"])
    hang = threading.Event() if args.hang else None
    if args.hang:
        print(card_id, flush=True)
    threads = [
        threading.Thread(target=agent, args=(arc, card_id, g, args.seed * 100 + i, args.steps, hang), name=g)
        for i, g in enumerate(args.games.split(","))
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.05)
    except KeyboardInterrupt:
        if hang is not None:
            hang.set()
        raise
    if args.child:
        subprocess.run([sys.executable, __file__, "--seed", str(args.seed + 1), "--games", "cnt3"], check=True)
    scorecard = arc.close_scorecard(card_id)
    assert scorecard is not None
    print(scorecard.model_dump_json(), flush=True)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
