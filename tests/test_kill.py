"""SIGKILL mid-run loses nothing the agent had seen: every acknowledged step is in the log and replays exactly."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.domain.events import ActionTaken, card_stream, decode

ROOT = Path(__file__).resolve().parent.parent


def kill_after(db: Path, seed: int, kill_at: int) -> list[dict]:
    """Run the child, SIGKILL it once it acknowledged ``kill_at`` steps, return the acknowledged lines."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.child_play", str(db), str(seed), "100000"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    acked = []
    assert proc.stdout is not None
    for line in proc.stdout:
        acked.append(json.loads(line))
        if len(acked) >= kill_at:
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # The child ran on while this loop read: what it printed before it died was acknowledged too.
    acked += [json.loads(line) for line in proc.stdout if line.endswith("\n")]
    return acked


def check_after_kill(db: Path, acked: list[dict]) -> None:
    last = acked[-1]
    card = last["card"]
    with Ledger.open(db) as led:
        assert verify_ledger(led.store).ok
        rows = led.store.read_stream(card_stream(card))
        actions = [r for r in rows if isinstance(decode(r.body), ActionTaken)]
        # Every step the agent got a frame for is committed; the step in flight at the kill may be too.
        assert last["step"] <= len(actions) <= last["step"] + 1
        # The card as of the last acknowledged step is exactly what the toolkit reported then.
        cut = actions[last["step"]].seq - 1 if len(actions) > last["step"] else None
        assert led.export(card, until=cut) == last["scorecard"]


# One seed is enough to catch a regression quickly; the others widen the net where there is time for it.
@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.heavy) for s in range(1, 5))])
def test_sigkill_mid_run(tmp_path: Path, seed: int) -> None:
    db = tmp_path / "kill.sqlite"
    acked = kill_after(db, seed, random.Random(seed).randint(20, 400))
    check_after_kill(db, acked)
