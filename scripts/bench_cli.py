"""CLI startup: each read command's wall time against the interpreter floor, side by side in one run.

The floor is the bare interpreter, ``python -c pass``; ``python -c "import click, msgspec, sqlite3"`` (what any Click
tool on msgspec and SQLite pays) is shown beside it. Each command runs as a fresh process on a small ledger (the
demo's one card), rounds interleaved so that load on the machine weighs on every command alike; the best of the
rounds is reported, as a ratio to the floor's best.

With ``--pg``, the read commands on PostgreSQL against the same commands on SQLite instead: the demo's ledger is
copied (``ledger copy``) into a fresh database of the server (``$LEDGER_BENCH_PG_URL``, else
``$LEDGER_TEST_PG_URL``, else the machine's default; dropped afterwards), and each command's best PostgreSQL time
is given as a ratio to its best SQLite time. Several ``--src`` are measured in the same interleaved rounds (before
and after a change, on the same ledgers).

    .venv/bin/python scripts/bench_cli.py                 # this tree
    .venv/bin/python scripts/bench_cli.py --src /tmp/old  # another checkout of the package (e.g. before a change)
    .venv/bin/python scripts/bench_cli.py --pg --src /work/main --src .   # PostgreSQL / SQLite, before and after
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import tempfile
from pathlib import Path

from benchlib import bytecode_env, pg_database, pg_unusable, proc, rounds

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 9
GOAL = 2.5
#: A read command on PostgreSQL against the same command on SQLite.
PG_GOAL = 2.0


def _ledger(*args: str) -> list[str]:
    # What the console script does, without depending on where it is installed.
    return [sys.executable, "-c", "import sys; from ledger.cli import main; sys.argv[0] = 'ledger'; main()", *args]


def _best[K](commands: dict[K, tuple[list[str], dict[str, str]]], n_rounds: int) -> dict[K, tuple[float, float]]:
    """The least (wall, CPU) seconds of each command in ``n_rounds`` interleaved rounds, after a warm-up run (page
    cache, .pyc files) that leaves out, with a note, a command that fails."""
    measures = {}
    for key, (cmd, env) in commands.items():
        try:
            _times(cmd, env)
        except RuntimeError as e:
            print(f"  ({key}: {e}; left out)", file=sys.stderr)
            continue
        measures[key] = functools.partial(_times, cmd, env)
    return rounds(n_rounds, measures)


def _times(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    p = proc(cmd, env=env, cwd=env["PYTHONPATH"])
    return p.wall, p.cpu


def measure(src: Path = ROOT, n_rounds: int = ROUNDS) -> list[tuple[str, float, float]]:
    """(command, best wall seconds, ratio to the floor) for the floor and each read command."""
    with tempfile.TemporaryDirectory() as tmp:
        envs, db, card = _demo(Path(tmp), [src])
        env = envs[src]
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
        best = _best({name: (cmd, env) for name, cmd in commands.items()}, n_rounds)
    floor = best["python -c pass"][0]
    return [(name, wall, wall / floor) for name, (wall, _) in best.items()]


def lines(results: list[tuple[str, float, float]]) -> list[str]:
    """The table: command, best wall ms, ratio to the floor, and whether it meets the goal."""
    out = [f"{'command':<46} {'best ms':>8} {'vs floor':>9}", f"{'-' * 46} {'-' * 8} {'-' * 9}"]
    for i, (name, t, ratio) in enumerate(results):
        mark = "" if i < 2 else ("  ok" if ratio <= GOAL else f"  > {GOAL}x goal")
        out.append(f"{name:<46} {t * 1000:>8.1f} {ratio:>8.2f}x{mark}")
    return out


def _demo(tmp: Path, srcs: list[Path]) -> tuple[dict[Path, dict[str, str]], str, str]:
    """Each checkout's environment (its bytecode written by _best's warm-up run) and a demo ledger in ``tmp`` made
    by the first: (the environments, the ledger's path, its card's id)."""
    envs = {src: bytecode_env(tmp / f"pycache{i}") | {"PYTHONPATH": str(src)} for i, src in enumerate(srcs)}
    db = str(tmp / "ledger.sqlite")
    out = proc(_ledger("--db", db, "demo"), env=envs[srcs[0]], cwd=srcs[0]).out.decode()
    found = re.search(r"export (\S+) --indent 2", out)
    assert found is not None, out
    return envs, db, found.group(1)


#: The read commands compared on both backends (CARD: the demo's card).
PG_COMMANDS = ("cards", "export CARD", "replay CARD")


#: What the driver's import alone costs, measured in the same rounds: the floor under the PostgreSQL times.
DRIVER_IMPORT = {"python -c pass": "pass", 'python -c "import psycopg"': "import psycopg"}

#: Best (wall, CPU) seconds of one command: each minimum on its own.
Best = tuple[float, float]


def measure_pg(
    srcs: list[Path], pg: str, n_rounds: int = ROUNDS
) -> tuple[list[tuple[Path, str, Best, Best]], list[Best]]:
    """(checkout, command, best on SQLite, best on PostgreSQL) for each read command, on the demo's ledger and its
    copy in the PostgreSQL database ``pg``, every checkout and backend in the same rounds; and the best of each of
    :data:`DRIVER_IMPORT`'s commands. CPU is the command's process only (not the server's)."""
    with tempfile.TemporaryDirectory() as tmp:
        envs, db, card = _demo(Path(tmp), srcs)
        proc(_ledger("--db", db, "copy", "--to", pg), env=envs[srcs[0]], cwd=srcs[0])
        commands = {
            (src, name, where): (_ledger("--db", where, *name.replace("CARD", card).split()), envs[src])
            for src in srcs
            for name in PG_COMMANDS
            for where in (db, pg)
        }
        for name, code in DRIVER_IMPORT.items():
            commands[(srcs[0], name, "")] = ([sys.executable, "-c", code], envs[srcs[0]])
        best = _best(commands, n_rounds)
    floor = [best[(srcs[0], name, "")] for name in DRIVER_IMPORT]
    return [(src, name, best[(src, name, db)], best[(src, name, pg)]) for src in srcs for name in PG_COMMANDS], floor


def pg_lines(results: list[tuple[Path, str, Best, Best]]) -> list[str]:
    """The table: checkout, command, best wall and CPU ms on each backend, their ratios, whether they meet the goal."""
    width = max(len(str(src)) for src, *_ in results)
    out = [
        f"{'checkout':<{width}} {'command':<18} {'wall ms SQLite / PG':>20} {'ratio':>6} {'CPU ms SQLite / PG':>19} "
        f"{'ratio':>6}",
        f"{'-' * width} {'-' * 18} {'-' * 20} {'-' * 6} {'-' * 19} {'-' * 6}",
    ]
    for src, name, sq, pg in results:
        wall, cpu = pg[0] / sq[0], pg[1] / sq[1]
        mark = "  ok" if max(wall, cpu) <= PG_GOAL else f"  > {PG_GOAL}x goal"
        out.append(
            f"{src!s:<{width}} {'ledger ' + name:<18} {sq[0] * 1000:>9.0f} / {pg[0] * 1000:>6.0f} {wall:>5.2f}x "
            f"{sq[1] * 1000:>9.0f} / {pg[1] * 1000:>5.0f} {cpu:>5.2f}x{mark}"
        )
    return out


def _pg_section(srcs: list[Path], rounds: int) -> list[str]:
    why = pg_unusable()
    if why is not None:
        return [f"PostgreSQL read commands: skipped ({why})"]
    with pg_database() as pg:
        results, (bare, driver) = measure_pg(srcs, pg, rounds)
    head = f"PostgreSQL read commands against SQLite, best of {rounds} (the demo's card, copied; goal {PG_GOAL}x)"
    cards = next(sq for src, name, sq, _ in results if src == srcs[-1] and name == "cards")
    note = (
        f'`python -c "import psycopg"` alone: {(driver[0] - bare[0]) * 1000:.0f} ms wall, '
        f"{(driver[1] - bare[1]) * 1000:.0f} ms CPU above the bare interpreter: "
        f"{(driver[0] - bare[0]) / cards[0]:.2f}x / {(driver[1] - bare[1]) / cards[1]:.2f}x SQLite's `ledger cards`"
    )
    return [head, *pg_lines(results), note]


def run(quick: bool) -> list[str]:
    """scripts/bench.py's entry: best of 9 (3 with --quick) for each read command vs the interpreter floor, then
    the read commands on PostgreSQL vs SQLite."""
    rounds = 3 if quick else ROUNDS
    floor = [f"CLI startup, best of {rounds} wall times (small ledger: one demo card)", *lines(measure(ROOT, rounds))]
    return [*floor, "", *_pg_section([ROOT], rounds)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--src",
        type=Path,
        action="append",
        help="the checkout whose `ledger` package is measured (default: this tree; repeat with --pg to compare)",
    )
    ap.add_argument("--pg", action="store_true", help="the read commands on PostgreSQL against SQLite")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    args = ap.parse_args()
    srcs = [s.resolve() for s in args.src or [ROOT]]
    for line in _pg_section(srcs, args.rounds) if args.pg else lines(measure(srcs[0], args.rounds)):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
