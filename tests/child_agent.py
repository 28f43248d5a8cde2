"""A fast scripted agent for the load and fault tests: real toolkit games, the ledger attached.

    python -m tests.child_agent DB SEED STEPS OUT [--close]

plays STEPS toolkit calls on one card (a wkex and a cnt3 play: mostly ACTION2, now and then a level completion,
a level reset, a lost cnt3 game and a RESET after the end), then writes OUT: {"card": id, "toolkit": the toolkit's
scorecard JSON (of ``close_scorecard`` with --close, else ``get_scorecard``), "guids": {guid: [action id of every
toolkit call, 0 for RESET, the full reset inside ``make`` first]}}. Any exception (a capture error) ends the child
with a traceback on stderr and a non-zero exit, so the parent sees it.

:func:`kill_worker` is the target the kill loop forks: it reports every acknowledged toolkit call in a file;
:func:`import_worker` runs an import for it to kill.
"""

from __future__ import annotations

import json
import os
import random
import sys
from typing import Any

from ledger import Ledger
from tests.toolkit import arcade, step

GAMES = ("wkex", "cnt3")
ENDED = ("WIN", "GAME_OVER")


def next_action(rng: random.Random, game: str, state: str) -> int:
    """The agent's policy: cheap, and it reaches every kind of event the translator emits."""
    r = rng.random()
    if state in ENDED:
        # Mostly start again; sometimes waste an action after the end (an ActionIgnored).
        return 0 if r < 0.8 else 2
    if r < 0.04:
        return 1  # completes a wkex level; cnt3 needs 2-3 presses
    if r < 0.05:
        return 0  # a level reset
    if game == "cnt3" and r < 0.055:
        return 3  # cnt3: GAME_OVER
    return 2


class Agent:
    """One toolkit wrapper played by the policy, with the log of what the agent did on it."""

    def __init__(self, env: Any, game: str, rng: random.Random) -> None:
        self.env = env
        self.game = game
        self.rng = rng
        self.state = "NOT_FINISHED"
        self.actions = [0]  # the full reset inside ``make``

    def act(self) -> Any:
        """One toolkit call; returns the toolkit's frame."""
        a = next_action(self.rng, self.game, self.state)
        frame = step(self.env, a)
        self.actions.append(a)
        if len(frame.frame):
            self.state = frame.state.value
        return frame


def play(db: str, seed: int, steps: int, out: str, close: bool) -> None:
    """The child's whole run (see the module docstring)."""
    rng = random.Random(seed)
    arc = arcade()
    led = Ledger.open(db)
    led.attach(arc)
    card = arc.open_scorecard(tags=[f"child-{seed}"])
    agents = [Agent(arc.make(g, scorecard_id=card, seed=rng.randint(0, 3)), g, rng) for g in GAMES]
    for _ in range(steps):
        rng.choice(agents).act()
    doc = arc.close_scorecard(card) if close else arc.get_scorecard(card)
    result = {"card": card, "toolkit": doc.model_dump_json(), "guids": {a.env._guid: a.actions for a in agents}}
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, out)
    led.close()


def kill_worker(db: str, seed: int, report: str) -> None:
    """Play until killed, appending one JSON line to the file ``report`` after every toolkit call returns.

    A line is {"card", "calls": toolkit calls on that card so far (``make`` included), "scorecard": the toolkit's
    JSON then} or, after a close, {"card", "closed": the JSON ``close_scorecard`` returned}. Cards are opened,
    played on two games and closed (or abandoned) in turn, so a kill lands in any of those moments.
    """
    rng = random.Random(seed)
    out = open(report, "a", buffering=1)  # noqa: SIM115 - written until the process is killed
    arc = arcade()
    led = Ledger.open(db)
    led.attach(arc)
    while True:
        card = arc.open_scorecard()
        calls = 0
        agents = []
        for g in rng.sample(GAMES, rng.randint(1, 2)):
            agents.append(Agent(arc.make(g, scorecard_id=card, seed=rng.randint(0, 3)), g, rng))
            calls += 1
            out.write(json.dumps({"card": card, "calls": calls, "scorecard": _json(arc, card)}) + "\n")
        for _ in range(rng.randint(5, 120)):
            rng.choice(agents).act()
            calls += 1
            out.write(json.dumps({"card": card, "calls": calls, "scorecard": _json(arc, card)}) + "\n")
        if rng.random() < 0.7:
            closed = arc.close_scorecard(card).model_dump_json()
            out.write(json.dumps({"card": card, "closed": closed}) + "\n")


def import_worker(db: str, recordings: str) -> None:
    """``import_recordings`` of a recordings folder into ``db`` (the kill loop kills it part-way)."""
    from ledger.imports.importing import import_recordings

    with Ledger.open(db) as led:
        import_recordings(led, [recordings])


def _json(arc: Any, card: str) -> str:
    return arc.get_scorecard(card).model_dump_json()


def main() -> None:
    db, seed, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    play(db, seed, steps, out, close="--close" in sys.argv[5:])


if __name__ == "__main__":
    main()
