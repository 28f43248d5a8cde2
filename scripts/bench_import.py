"""Import throughput on recordings with frames, next to a raw read and a plain ``json.loads`` of the same files.

The recordings are made by the real toolkit (OFFLINE, ``save_recording=True``, ``include_frame_data=True``) playing
the test games; the agent resets after GAME_OVER/WIN so nearly every line carries its 64x64 frame. The files of one
run are copied under more card folders to reach the target size (250 MB). Every figure is read from the page cache
(each pass is preceded by a warm-up read), so they compare CPU work, not the disk.

The goal's figure is end to end: ``ledger import`` run as a command (a new process: interpreter start, imports,
creating the fresh ledger's schema, the import, the close) next to a Python line-by-line read of the same files,
the two measured alternately (nine rounds), best of each.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchlib import LEDGER, best, bytecode_env, proc, rounds

from ledger import Ledger
from ledger.formats.finding import find_recordings
from ledger.formats.recordings import BLOCK, read_recording
from ledger.imports.importing import import_recordings
from tests.toolkit import ENV_DIR, arcade, random_action, step

UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _record(recordings: Path, steps: int, seed: int = 7) -> str:
    """Play one card of ``steps`` actions over two games, recorded with frames; returns its card id."""
    rng = random.Random(seed)
    arc = arcade(recordings_dir=str(recordings))
    card = arc.open_scorecard()
    envs = [
        arc.make(g, scorecard_id=card, seed=1, save_recording=True, include_frame_data=True) for g in ("cnt3", "clk2")
    ]
    for _ in range(steps):
        env = rng.choice(envs)
        if env.observation_space is not None and env.observation_space.state.name in ("GAME_OVER", "WIN"):
            step(env, 0)
            continue
        a, x, y = random_action(rng, env)
        step(env, a, x, y)
    return card


def _copy_card(folder: Path) -> None:
    """The card's folder copied as another card beside it: the importer knows a card by its plays' guids, so every
    uuid in the copy's names and lines is replaced by a new one."""
    new: dict[bytes, bytes] = {}

    def renamed(m: re.Match[bytes]) -> bytes:
        return new.setdefault(m.group(0), str(uuid.uuid4()).encode())

    for f in folder.rglob("*"):
        if f.is_file():
            to = folder.parent / UUID.sub(renamed, str(f.relative_to(folder.parent)).encode()).decode()
            to.parent.mkdir(parents=True, exist_ok=True)
            to.write_bytes(UUID.sub(renamed, f.read_bytes()))


def _read(files: list[Path], how: str) -> int:
    """Bytes read from ``files``: in 256 KiB blocks (``raw``), line by line (``lines``), or line by line with a
    ``json.loads`` of each (``json``)."""
    n = 0
    for f in files:
        with open(f, "rb") as fh:
            if how == "raw":
                while chunk := fh.read(BLOCK):
                    n += len(chunk)
                continue
            for line in fh:
                if how == "json":
                    json.loads(line)
                n += len(line)
    return n


#: ``ledger import`` with the new ledger's schema made by the Alembic migrations, not from its plain SQL.
_VIA_ALEMBIC = (
    "from ledger.store.sqlite import SQLiteStore; SQLiteStore._create_fresh = lambda self: False; "
    "from ledger.cli import main; main()"
)


def _cli_import(rec: Path, db: Path, alembic: bool = False) -> float:
    """Wall time of ``ledger import`` into a fresh ledger at ``db``, as a user runs it (a new process)."""
    cmd = [sys.executable, "-c", _VIA_ALEMBIC] if alembic else [LEDGER]
    cli = [*cmd, "--db", str(db), "import", str(rec), "--environments", str(ENV_DIR), "--quiet"]
    # The first round writes the bytecode (compiling the package is 0.1-0.3 s of the figure).
    return proc(cli, env=bytecode_env(rec.parent / "pycache")).wall


def run(quick: bool) -> list[str]:
    steps, target, repeat = (600, 20e6, 2) if quick else (3000, 250e6, 3)
    # End to end, a run varies by a tenth of a second on a shared machine (and the first one writes the bytecode).
    e2e_rounds = 2 if quick else 9
    out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        rec = Path(tmp) / "recordings"
        gen, card = best(lambda: _record(rec, steps), 1)
        one = sum(f.stat().st_size for f in rec.rglob("*.jsonl"))
        copies = max(1, -int(-target // one))
        for _ in range(copies - 1):
            _copy_card(rec / card)
        files = sorted(rec.rglob("*.jsonl"))
        size = sum(f.stat().st_size for f in files)
        lines = sum(1 for f in files for _ in open(f, "rb"))  # noqa: SIM115
        _read(files, "raw")  # warm the page cache
        out.append(
            f"recordings: {copies} cards x {steps} actions with frames, {len(files)} files, {lines} lines, "
            f"{size / 1e6:.1f} MB ({size / lines / 1e3:.1f} KB/line; played in {gen:.1f} s)"
        )
        t_raw, _ = best(lambda: _read(files, "raw"), repeat)
        t_lines, _ = best(lambda: _read(files, "lines"), repeat)
        t_json, _ = best(lambda: _read(files, "json"), 1)
        t_scan, _ = best(lambda: sum(len(read_recording(f).observations) for f in files), repeat)
        found = find_recordings([rec])
        t_import, t_append, events = float("inf"), 0.0, 0
        for i in range(repeat):
            with Ledger.open(Path(tmp) / f"ledger{i}.sqlite") as led:
                spent = [0.0]
                append = led.store.append

                def timed(*args: object, _append: object = append, _spent: list[float] = spent, **kw: object) -> object:
                    t = time.perf_counter()
                    try:
                        return _append(*args, **kw)  # type: ignore[operator]
                    finally:
                        _spent[0] += time.perf_counter() - t

                led.store.append = timed  # type: ignore[method-assign]
                t0 = time.perf_counter()
                s = import_recordings(led, found=found, environments=ENV_DIR)
                took = time.perf_counter() - t0
                assert s.totals()["imported"] == copies, s.totals()
                if took < t_import:
                    t_import, t_append, events = took, spent[0], s.totals()["events"]
        mb = size / 1e6

        def row(label: str, seconds: float, extra: str = "") -> str:
            return f"{label:<42}{mb / seconds:8.0f} MB/s  {seconds / lines * 1e6:6.2f} us/line{extra}"

        out.append(row("raw read (256 KiB blocks)", t_raw))
        out.append(row("raw read, line by line (for line in f)", t_lines))
        out.append(row("json.loads per line", t_json))
        out.append(row("importer decode only (read_recording)", t_scan))
        out.append(row("ledger import (into SQLite)", t_import, f"  ({events} events, {events / t_import:,.0f}/s)"))
        out.append(
            f"  of which Store.append: {t_append / t_import:.0%} ({t_append / events * 1e6:.1f} us/event: "
            "encode, hash chain, one INSERT per event)"
        )
        out.append(
            f"in process: import / raw read: {t_raw / t_import:.1%}; import / line-by-line read: "
            f"{t_lines / t_import:.0%}; import / json.loads: {t_json / t_import:.1f}x"
        )
        names = itertools.count()
        e2e = rounds(
            e2e_rounds,
            {
                "lines": lambda: best(lambda: _read(files, "lines"), 1)[0],
                "cli": lambda: _cli_import(rec, Path(tmp) / f"e2e{next(names)}.sqlite"),
                "alembic": lambda: _cli_import(rec, Path(tmp) / f"e2e{next(names)}.sqlite", alembic=True),
            },
        )
        t_cli, t_alembic, t_lines2 = e2e["cli"], e2e["alembic"], e2e["lines"]
        more = f"  ({t_cli - t_import:.2f} s more than in process)"
        out.append(row("`ledger import`, end to end (fresh ledger)", t_cli, more))
        out.append(
            f"GOAL end-to-end `ledger import` / Python line-by-line read of the same {mb:.0f} MB: "
            f"{t_lines2 / t_cli:.2f} (goal >= 0.40; line read {t_lines2:.2f} s, import {t_cli:.2f} s)"
        )
        out.append(
            f"  (with Alembic creating the new ledger's schema: {t_alembic:.2f} s -> {t_lines2 / t_alembic:.2f})"
        )
    return out
