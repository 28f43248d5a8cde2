"""Soak of `ledger record`: a harness playing 25 games in threads on one card, under `ulimit -n 256` too.

The recorded command's open file descriptors are sampled from /proc while it plays: they stay under a bound set
by the threads, not the steps; and the exported card equals the card the harness itself printed.
``scripts/bench_record.py`` runs the same at full size.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ledger import Ledger
from tests.rest_agent import LEDGER

pytestmark = pytest.mark.heavy

HARNESS = Path(__file__).resolve().parent / "swarm_harness.py"
GAMES = ("cnt3", "clk2", "wkex")


@dataclass(frozen=True)
class Soak:
    """One recorded run: the recorder's status and output, and the command's descriptor counts over time."""

    returncode: int
    stdout: str
    stderr: str
    fds: list[int]
    seconds: float

    def printed_card(self) -> str:
        """The card JSON the harness printed last."""
        return self.stdout.strip().splitlines()[-1]


def _fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:  # ended between two looks
        return None


def _harness_children(pid: int) -> list[int]:
    """The harness processes among ``pid``'s children (not the recorder's interpreter check)."""
    out: list[int] = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            kids = [int(p) for p in Path(task).read_text().split()]
            out += [k for k in kids if HARNESS.name.encode() in Path(f"/proc/{k}/cmdline").read_bytes()]
        except OSError:
            continue
    return out


def soak(db: str | Path, games: int, steps: int, *, nofile: int | None = None, record: bool = True) -> Soak:
    """Run the swarm harness on ``games`` threads of ``steps`` steps each, under `ledger record` unless told not."""
    names = ",".join(GAMES[i % len(GAMES)] for i in range(games))
    harness = [sys.executable, str(HARNESS), "--seed", "9", "--games", names, "--steps", str(steps)]
    cmd = [*LEDGER, "--db", str(db), "record", "--", *harness] if record else harness

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        # Files, not pipes: nothing here reads while the command runs, and a full pipe would stop it.
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, preexec_fn=limit)
        fds: list[int] = []
        while proc.poll() is None:
            for pid in _harness_children(proc.pid) if record else [proc.pid]:
                n = _fd_count(pid)
                if n is not None:
                    fds.append(n)
            time.sleep(0.05)
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        return Soak(proc.returncode, out.read(), err.read(), fds, seconds)


def _check_card(db: str | Path, run: Soak, games: int) -> None:
    assert run.returncode == 0, run.stderr[-3000:]
    printed = run.printed_card()
    card_id = json.loads(printed)["card_id"]
    with Ledger.open(db) as led:
        assert led.export(card_id) == printed
        card = led.load_card(card_id)
        assert card.closed and sum(len(p) for p in card.games.values()) >= games


def test_record_of_25_games_in_threads_keeps_descriptors_flat_under_ulimit_256(backend_url: str) -> None:
    db = backend_url
    run = soak(db, 25, 40, nofile=256)
    _check_card(db, run, 25)
    assert run.fds, "the command was never seen running"
    # Bounded by the threads (a few per live thread), not by the 25 x 40 steps: a descriptor per step or per
    # request would pass this bound many times over.
    assert max(run.fds) <= 16 + 2 * 25, run.fds
