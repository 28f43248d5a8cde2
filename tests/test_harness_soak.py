"""Honest recordings never FAIL their audit: generated harness runs (random agents that die, win, click, reset,
act after the end; runs stopped part-way as Ctrl-C leaves them), each imported with and without the game code and
audited with and without it. ``scripts/bench_harness.py`` runs the same soak on 100 runs.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger
from ledger.app.audit import audit_card
from ledger.imports.importing import import_recordings
from tests.harness_recorder import environments, run_swarm

pytestmark = pytest.mark.heavy

GAMES = ["vis5-0000001a", "cnt3-0000000a", "clk2-0000000b", "shrt-0000000e", "lsx2-0000002b"]


def _stop_early(path: Path, rng: random.Random) -> None:
    """Cut the recording after a random line, sometimes mid-line: what a run interrupted by Ctrl-C leaves."""
    lines = path.read_bytes().splitlines(keepends=True)
    keep = rng.randint(1, len(lines))
    tail = lines[keep][: rng.randint(0, len(lines[keep]) - 1)] if keep < len(lines) and rng.random() < 0.5 else b""
    path.write_bytes(b"".join(lines[:keep]) + tail)


def soak(folder: Path, envs: Path, runs: int, seed: int) -> dict[str, Any]:
    """Generate ``runs`` recordings, import and audit them; the counts of what was seen and every FAIL found."""
    rng = random.Random(seed)
    rec = folder / "rec"
    seen: dict[str, Any] = {"runs": 0, "stopped": 0, "cards": 0, "audits": 0, "undecided": 0, "fails": []}
    for i in range(runs):
        game = GAMES[4] if i % 5 == 4 else rng.choice(GAMES[:4])
        before = set(rec.glob("*.jsonl")) if rec.exists() else set()
        run_swarm(rec, [game], rng.randrange(1 << 30), env_dir=envs, max_actions=rng.randint(10, 120))
        (new,) = set(rec.glob("*.jsonl")) - before
        if rng.random() < 0.3:
            _stop_early(new, rng)
            seen["stopped"] += 1
        seen["runs"] += 1
    for with_code in (False, True):
        db = folder / f"l-{with_code}.sqlite"
        with Ledger.open(db) as led:
            summary = import_recordings(led, [rec], environments=envs if with_code else None)
            assert summary.exit_code in (0, 1), [str(p) for p in summary.problems]
            for card in led.card_ids():
                seen["cards"] += 1
                for env in (None, envs):
                    report = audit_card(led, card, environments=env)
                    seen["audits"] += 1
                    for c in report.checks:
                        if c.status == "FAIL":
                            seen["fails"].append((card, with_code, env is not None, c.name, c.message))
                        if c.name == "resimulation" and env is not None:
                            seen["undecided"] += c.details.get("undecided_actions", 0)
    return seen


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return environments(tmp_path_factory.mktemp("envs"))


def test_honest_runs_never_fail_their_audit(tmp_path: Path, envs: Path) -> None:
    seen = soak(tmp_path, envs, runs=6, seed=20)
    assert seen["fails"] == [], seen["fails"]
    assert seen["cards"] >= 10 and seen["audits"] == 2 * seen["cards"] and seen["undecided"] > 0, seen
    shutil.rmtree(tmp_path / "rec")


def _frame_lines(lines: list[bytes]) -> list[int]:
    return [i for i, raw in enumerate(lines) if b'"frame"' in raw and b'"frame": []' not in raw]


@pytest.mark.parametrize("tamper", ["pasted", "removed", "reordered"])
def test_a_tampered_copy_is_refused_or_fails_its_audit(tmp_path: Path, envs: Path, tamper: str) -> None:
    """Lines pasted again, removed or swapped in a recording of a game whose frames show every action: imported
    from the frames alone, the audit against the game code FAILs (or the import refuses the file)."""
    rng = random.Random(tamper)
    run_swarm(tmp_path / "rec", ["vis5-0000001a"], 31, env_dir=envs, max_actions=40)
    (path,) = (tmp_path / "rec").glob("*.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    frames = _frame_lines(lines)
    k = frames[rng.randrange(5, len(frames) - 5)]
    if tamper == "pasted":
        lines[k + 1 : k + 1] = lines[k - 2 : k + 1]
    elif tamper == "removed":
        del lines[k]
    else:
        j = frames[frames.index(k) + 1]
        lines[k], lines[j] = lines[j], lines[k]
    path.write_bytes(b"".join(lines))
    with Ledger.open(tmp_path / "l.sqlite") as led:
        summary = import_recordings(led, [path])
        if summary.exit_code == 2 or not led.card_ids():
            return  # refused at import: nothing of it committed
        (card,) = led.card_ids()
        resim = next(c for c in audit_card(led, card, environments=envs).checks if c.name == "resimulation")
    assert resim.status == "FAIL", resim.message
