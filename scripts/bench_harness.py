"""``ledger import --environments`` of a harness recording: lines per second, next to the game's own steps.

The recording is the harness's format (``tests/harness_recorder.py``: frame lines without the action) of a seeded
agent on ``lsx2`` (tests/harness_games), a game shaped like the public ``ls20``: 64x64 mazes of ~150 sprites, seven
levels, an energy bar every move spends (so plays end in GAME_OVER and restart). The agent leans towards the goal
so levels get completed. Each import re-simulates the play from the game code to recover every action; the figure
is lines per second, and its cost per line against one plain game step measured in the same run.

The soak generates harness runs (tests/test_harness_soak.py: random agents that die, win, click, reset; some cut
part-way as Ctrl-C leaves them), imports each with and without the game code, audits each card with and without
it, and counts the FAILs (an honest recording must have none).
"""

from __future__ import annotations

import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger import Ledger  # noqa: E402
from ledger.imports.importing import import_recordings  # noqa: E402
from tests.harness_recorder import Recorder, convert, environments  # noqa: E402
from tests.test_harness_soak import soak  # noqa: E402
from tests.toolkit import arcade  # noqa: E402

GAME = "lsx2-0000002b"


def record(folder: Path, envs: Path, actions: int, seed: int = 5) -> tuple[Path, float]:
    """A harness recording of ``actions`` actions (one frame line each); its path and the seconds per plain step."""
    from arcengine import GameAction

    rng = random.Random(seed)
    arc = arcade(envs)
    card = arc.open_scorecard()
    env = arc.make(GAME, scorecard_id=card)
    rec = Recorder(folder, f"{GAME}.seededrandom.{actions}", rng)
    spent = 0.0
    for _ in range(actions):
        last = env.observation_space
        if last.state.name in ("GAME_OVER", "WIN") or rng.random() < 0.02:
            action = GameAction.RESET
        else:
            action = GameAction.from_id(rng.choice([2, 2, 4, 4, 2, 4, 1, 3]))
        t = time.perf_counter()
        raw = env.step(action)
        spent += time.perf_counter() - t
        rec.record(json.loads(convert(raw).model_dump_json()))
    arc.close_scorecard(card)
    return rec.path, spent / actions


def import_once(path: Path, envs: Path, db: Path) -> tuple[float, Any, int]:
    """Seconds to import ``path`` with the game code, the summary, and how much the process's peak resident
    memory grew (bytes; 0 when an earlier peak was higher)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    with Ledger.open(db) as led:
        s = import_recordings(led, [path], environments=envs)
    took = time.perf_counter() - t
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    return took, s, grew


def run(quick: bool) -> list[str]:
    """The figures, one line each."""
    actions = 60 if quick else 400
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        envs = environments(root / "envs")
        path, step_s = record(root / "rec", envs, actions)
        lines = len(path.read_bytes().splitlines())
        took, s, peak = import_once(path, envs, root / "l.sqlite")
        assert s.exit_code == 0, [str(p) for p in s.problems]
        inferred = s.inference()["inferred_actions"]
        per_line = took / lines
        soak_runs = 5 if quick else 100
        t = time.perf_counter()
        seen = soak(root / "soak", envs, soak_runs, seed=1)
        soak_s = time.perf_counter() - t
        return [
            f"harness import --environments, {lines}-line {GAME} recording ({inferred} actions recovered): "
            f"{took:.2f} s, {lines / took:.0f} lines/s",
            f"  per line {per_line * 1000:.2f} ms = {per_line / step_s:.1f}x a plain game step "
            f"({step_s * 1000:.2f} ms, measured in the same run); peak resident memory grew {peak / 1e6:.0f} MB",
            f"soak: {seen['runs']} generated harness runs ({seen['stopped']} stopped part-way), {seen['cards']} cards "
            f"imported with and without the game code, {seen['audits']} audits with and without it: "
            f"{len(seen['fails'])} FAIL ({soak_s:.0f} s)",
            *(f"  FAIL {f}" for f in seen["fails"][:5]),
        ]


if __name__ == "__main__":
    for line in run("--quick" in sys.argv):
        print(line)
