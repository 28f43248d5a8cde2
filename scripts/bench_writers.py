"""Many writers on one ledger: 16 capturing processes against the local PostgreSQL server, and capture against a
bare commit on SQLite at the default durability. Used by ``bench_scale`` (``bench.py --only scale``).

Each capturing process plays its own card of the test game ``wkex`` through the real toolkit with the ledger
attached and times every ``env.step`` (a toolkit step plus its captured, committed events). The bare figure is the
same number of processes each running INSERT+COMMIT of a row as large as a captured event on a plain table.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path
from typing import Any

ENV_DIR = Path(__file__).resolve().parent.parent / "tests" / "environment_files"


def _capture(url: str, steps: int, out: mp.Queue, start: Any) -> None:  # type: ignore[type-arg]
    from arc_agi import Arcade, OperationMode
    from arcengine import GameAction

    from ledger import Ledger

    quiet = logging.getLogger("bench.arcade")
    quiet.setLevel(logging.ERROR)
    logging.getLogger("arc_agi.scorecard").setLevel(logging.WARNING)
    arc = Arcade(operation_mode=OperationMode.OFFLINE, environments_dir=str(ENV_DIR), logger=quiet)
    led = Ledger.open(url)
    led.attach(arc)
    env = arc.make("wkex", scorecard_id=arc.open_scorecard())
    for _ in range(20):
        env.step(GameAction.ACTION2)
    start.wait()  # every process is ready: the timed steps run side by side
    t0 = time.time()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        env.step(GameAction.ACTION2)
        times.append(time.perf_counter() - t)
    out.put((times, t0, time.time()))
    led.close()


def _bare(url: str, steps: int, out: mp.Queue, start: Any) -> None:  # type: ignore[type-arg]
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    con = psycopg.connect(host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database)
    row = os.urandom(430)
    start.wait()
    t0 = time.time()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        con.execute("INSERT INTO bench_w (body) VALUES (%s)", (row,))
        con.commit()
        times.append(time.perf_counter() - t)
    out.put((times, t0, time.time()))
    con.close()


def _run(target: object, url: str, procs: int, steps: int) -> tuple[float, list[float]]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Barrier(procs)
    ps = [ctx.Process(target=target, args=(url, steps, out, start)) for _ in range(procs)]  # type: ignore[arg-type]
    for p in ps:
        p.start()
    times: list[float] = []
    first, last = float("inf"), 0.0
    for _ in ps:
        mine, t0, t1 = out.get(timeout=900)
        times += mine
        first, last = min(first, t0), max(last, t1)
    for p in ps:
        p.join()
    return last - first, sorted(times)


def _pct(times: list[float], q: float) -> float:
    return times[min(len(times) - 1, int(q * len(times)))] * 1000


def concurrent_writers(url: str, procs: int = 16, steps: int = 200) -> list[str]:
    """16 capturing processes, then 16 bare INSERT+COMMIT loops, on the PostgreSQL database ``url``."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    with psycopg.connect(host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database) as con:
        con.execute("CREATE TABLE IF NOT EXISTS bench_w (seq BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL)")
    wall, cap = _run(_capture, url, procs, steps)
    _, bare = _run(_bare, url, procs, steps)
    # The processes start together once all are ready; the steps/s include the toolkit's own work.
    return [
        f"{procs} capturing processes x {steps} toolkit steps on PostgreSQL: {len(cap) / wall:,.0f} steps/s in total "
        f"(first timed step to last); captured step p50 {_pct(cap, 0.5):.2f} ms, p99 {_pct(cap, 0.99):.2f} ms; "
        f"bare INSERT+COMMIT ({procs} processes) p50 {_pct(bare, 0.5):.2f} ms, p99 {_pct(bare, 0.99):.2f} ms; "
        f"p50 ratio {statistics.median(cap) / statistics.median(bare):.2f}x, "
        f"p99 ratio {_pct(cap, 0.99) / _pct(bare, 0.99):.2f}x (GOAL p99 <= 2x)",
    ]


def sqlite_capture_vs_commit(folder: str, steps: int = 2000) -> list[str]:
    """A captured toolkit step (less the bare toolkit step) against a bare INSERT+COMMIT, SQLite (normal)."""
    from bench_core import bare_commit, step_cost

    bare_step = min(step_cost(None, steps) for _ in range(2))
    captured = min(step_cost(str(Path(folder) / f"cap{i}.sqlite"), steps) for i in range(2))
    commit = min(bare_commit(Path(folder) / f"bare{i}.sqlite", "normal", steps) for i in range(2))
    added = captured - bare_step
    return [
        f"SQLite (normal): a captured step adds {added * 1e6:.0f} us to the toolkit's {bare_step * 1e6:.0f} us; "
        f"a bare INSERT+COMMIT of the same size {commit * 1e6:.0f} us -> capture is {added / commit:.2f}x a bare commit"
    ]
