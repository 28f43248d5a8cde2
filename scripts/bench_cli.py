"""CLI startup: each read command's wall time against the interpreter floor, side by side in one run.

The floor is the bare interpreter, ``python -c pass``; ``python -c "import click, msgspec, sqlite3"`` (what any Click
tool on msgspec and SQLite pays) is shown beside it. Each command runs as a fresh process on a small ledger (the
demo's one card), rounds interleaved so that load on the machine weighs on every command alike; the best of the
rounds is reported, as a ratio to the floor's best.

    .venv/bin/python scripts/bench_cli.py                 # this tree
    .venv/bin/python scripts/bench_cli.py --src /tmp/old  # another checkout of the package (e.g. before a change)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 9
GOAL = 2.5


def _env(src: Path, pycache: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)
    env.pop("LEDGER_DB", None)
    # An installed package runs from its bytecode: let the warm-up run write it (outside the source tree), so
    # that no run pays for compiling the package's modules (PYTHONDONTWRITEBYTECODE would make every run do so).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def _ledger(*args: str) -> list[str]:
    # What the console script does, without depending on where it is installed.
    return [sys.executable, "-c", "import sys; from ledger.cli import main; sys.argv[0] = 'ledger'; main()", *args]


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(
        cmd, env=env, cwd=env["PYTHONPATH"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    dt = time.perf_counter() - t0
    if r.returncode not in (0,):
        raise RuntimeError(f"{' '.join(cmd[3:])} failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    return dt


def measure(src: Path = ROOT, rounds: int = ROUNDS) -> list[tuple[str, float, float]]:
    """(command, best wall seconds, ratio to the floor) for the floor and each read command."""
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(src, str(Path(tmp) / "pycache"))
        db = str(Path(tmp) / "ledger.sqlite")
        demo = subprocess.run(_ledger("--db", db, "demo"), env=env, cwd=src, capture_output=True, text=True, check=True)
        out = demo.stdout
        found = re.search(r"export (\S+) --indent 2", out)
        assert found is not None, out
        card = found.group(1)
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            'python -c "import click, msgspec, sqlite3"': [sys.executable, "-c", "import click, msgspec, sqlite3"],
            "ledger --help": _ledger("--help"),
            "ledger --version": _ledger("--version"),
            "ledger cards": _ledger("--db", db, "cards"),
            "ledger export CARD": _ledger("--db", db, "export", card),
            "ledger replay CARD": _ledger("--db", db, "replay", card),
            "ledger verify": _ledger("--db", db, "verify"),
        }
        best: dict[str, float] = {}
        for name, cmd in list(commands.items()):
            try:
                _wall(cmd, env)  # warm the page cache and the .pyc files
            except RuntimeError as e:
                print(f"  ({name}: {e}; left out)", file=sys.stderr)
                del commands[name]
        for _ in range(rounds):
            for name, cmd in commands.items():
                dt = _wall(cmd, env)
                best[name] = min(best.get(name, dt), dt)
    floor = next(iter(best.values()))
    return [(name, t, t / floor) for name, t in best.items()]


def lines(results: list[tuple[str, float, float]]) -> list[str]:
    """The table: command, best wall ms, ratio to the floor, and whether it meets the goal."""
    out = [f"{'command':<46} {'best ms':>8} {'vs floor':>9}", f"{'-' * 46} {'-' * 8} {'-' * 9}"]
    for i, (name, t, ratio) in enumerate(results):
        mark = "" if i < 2 else ("  ok" if ratio <= GOAL else f"  > {GOAL}x goal")
        out.append(f"{name:<46} {t * 1000:>8.1f} {ratio:>8.2f}x{mark}")
    return out


def run(quick: bool) -> list[str]:
    """scripts/bench.py's entry: best of 9 (3 with --quick) for each read command vs the interpreter floor."""
    rounds = 3 if quick else ROUNDS
    return [f"CLI startup, best of {rounds} wall times (small ledger: one demo card)", *lines(measure(ROOT, rounds))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=ROOT, help="the checkout whose `ledger` package is measured")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args()
    for line in lines(measure(args.src.resolve(), args.rounds)):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
