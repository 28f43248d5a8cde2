"""How the read commands' cost grows with the ledger, SQLite and PostgreSQL: synthetic cards written one append per
card through the ledger's append path, sizes ``$LEDGER_BENCH_SCALE_SIZES`` (default 1000,10000,100000).

Then many writers on one PostgreSQL ledger (``$LEDGER_BENCH_SCALE_WRITERS=0`` leaves them out): capturing processes
against as many bare INSERT+COMMIT loops of a row as large as a captured event.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_postgres import copy_figures
from benchlib import LEDGER, best, ledger, pg_bare_commits, pg_connect, pg_database, pg_unusable

from ledger import Ledger
from ledger.app import synthetic
from tests.toolkit import arcade


def _best(*args: str, runs: int = 3) -> tuple[float, float, int]:
    """The least wall and CPU seconds of ``runs`` ``ledger ARGS`` processes, and the size of its output."""
    done = [ledger(*args) for _ in range(runs)]
    return min(p.wall for p in done), min(p.cpu for p in done), len(done[-1].out)


#: The viewer's pages measured: the first cards page, the leaderboard (every card), the progress chart (its
#: default tags, 200 cards each).
VIEWER_PAGES = ("/", "/leaderboard", "/progress")


def _viewer(db: str, path: str = "/") -> tuple[float, float, int]:
    """One GET of ``path`` on a fresh app (cold), then again (warm), and the page's size."""
    from ledger.web.server import create_app

    with Ledger.open_readonly(db) as led:
        client = create_app(led).test_client()
        cold, got = best(lambda: client.get(path), 1)
        if got.status_code != 200:
            raise RuntimeError(f"GET {path}: {got.status_code}")
        warm, _ = best(lambda: client.get(path), 1)
    return cold, warm, len(got.data)


def viewer_cells(db: str, paths: tuple[str, ...] = VIEWER_PAGES) -> str:
    """The viewer columns of a row: each page, cold / warm (size), best of three fresh apps."""
    cells = []
    for path in paths:
        runs = [_viewer(db, path) for _ in range(3)]
        cold, warm, size = min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]
        cells.append(f"{cold:.2f} / {warm:.2f} ({size / 1024:.0f} KB)")
    return " | ".join(cells)


def _size_per_event(db: str) -> float:
    with Ledger.open_readonly(db) as led:
        n = led.store.count()
        if led.store.dialect == "sqlite":
            size = sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))
        else:
            from sqlalchemy import text

            with led.store.engine.connect() as conn:  # type: ignore[attr-defined]
                size = conn.execute(text("SELECT pg_database_size(current_database())")).scalar()
    return size / n


def _note(line: str) -> str:
    # The table is printed when every size is done; a long run shows each line as it comes on stderr.
    print(line, file=sys.stderr, flush=True)
    return line


def _root_while_slow(db: str) -> float:
    """The slowest of 5 GETs of ``/`` on ``ledger view`` while a client keeps asking for the compare page of the
    largest tag and another holds a request half-sent."""
    import re
    import socket
    import threading
    import urllib.request

    view = subprocess.Popen([LEDGER, "--db", db, "view", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = view.stdout.readline() if view.stdout else ""
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if m is None:
            raise RuntimeError(f"ledger view did not start: {line!r}")
        url = m.group(0)
        stop = threading.Event()

        def busy() -> None:
            while not stop.is_set():
                urllib.request.urlopen(url + "compare?tag=nightly", timeout=120).read()

        worker = threading.Thread(target=busy, daemon=True)
        worker.start()
        worst = 0.0
        with socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=30) as slow:
            slow.sendall(b"GET /compare?tag=nightly HTTP/1.1\r\nHost: x\r\n")
            for _ in range(5):
                worst = max(worst, best(lambda: urllib.request.urlopen(url, timeout=120).read(), 1)[0])
        stop.set()
        worker.join(timeout=120)
        return worst
    finally:
        view.terminate()
        view.wait()


def _row(backend: str, cards: int, db: str, card_id: str) -> str:
    page = _best("--db", db, "cards", "--limit", "20")[0]
    tag = _best("--db", db, "cards", "--tag", "agent-2", "--limit", "20")[0]
    cmp_args = ["--db", db, "compare", "--group", "nightly"]
    cmp, cmp_cpu, cmp_json = _best(*cmp_args, "--json")
    cmp_size = f"{len(ledger(*cmp_args).out):,} / {cmp_json:,} B"
    compare_page = viewer_cells(db, ("/compare?tag=nightly",))
    viewer = viewer_cells(db)
    busy = _root_while_slow(db)
    export = _best("--db", db, "export", card_id)[0]
    verified = ledger("--db", db, "verify", peak=True)
    per_event = _size_per_event(db)
    return _note(
        f"| {backend} | {cards:,} | {page:.2f} | {tag:.2f} | {cmp:.2f} / CPU {cmp_cpu:.2f} ({cmp_size}) "
        f"| {compare_page} | {viewer}"
        f" | {busy:.2f} | {export:.2f} | {verified.wall:.1f} ({verified.mb:.0f} MB) | {per_event:.0f} |"
    )


def run(quick: bool) -> list[str]:
    default = "300,1500" if quick else "1000,10000,100000"
    sizes = [int(s) for s in os.environ.get("LEDGER_BENCH_SCALE_SIZES", default).split(",") if s.strip()]
    pg_why = pg_unusable()
    lines = [
        "synthetic cards written through the append path (one append per card); times in seconds, best of 3, "
        "each a `ledger` subprocess; compare --group nightly: the figures of the tag of 1/7 of the cards (time of "
        "--json, wall / CPU of the subprocess; output text / JSON in bytes); `/` while busy: the slowest of 5 GETs "
        "of `/` on `ledger view` while a client keeps asking for /compare?tag=nightly and another holds a "
        "half-sent request; verify with its peak memory",
        "| backend | cards | cards --limit 20 | cards --tag T --limit 20 | compare --group (output) "
        "| viewer /compare?tag=nightly | viewer first page cold / warm (bytes) | viewer leaderboard | viewer progress "
        "| viewer `/` while busy | export one card | verify (peak RSS) | bytes/event |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            db = str(Path(d) / f"scale-{n}.sqlite")
            t = time.perf_counter()
            with Ledger.open(db) as led:
                ids = synthetic.write_cards(led, n, seed=n)
                events = led.store.count()
            build = time.perf_counter() - t
            lines.append(
                _note(f"({n:,} cards, {events:,} events written in {build:.1f} s: {events / build:,.0f} events/s)")
            )
            card_id = ids[n // 2]
            lines.append(_row("SQLite", n, db, card_id))
            if pg_why is not None:
                lines.append(f"PostgreSQL skipped: {pg_why}")
                continue
            with pg_database() as pg:
                how = f"{n:,} synthetic cards, one append each through the ledger's append path"
                lines += [_note(f"({line.strip()})") for line in copy_figures(db, how, pg)]
                wall, cpu, _ = _best("copy", "--from", db, "--to", pg, "--json")
                nothing = f"(ledger copy with nothing to copy, the whole command: {wall:.2f} s, CPU {cpu:.2f} s)"
                lines.append(_note(nothing))
                lines.append(_row("PostgreSQL", n, pg, card_id))
    if os.environ.get("LEDGER_BENCH_SCALE_WRITERS", "1") != "0" and pg_why is None:
        with pg_database() as pg:
            lines += concurrent_writers(pg, 4 if quick else 16, 50 if quick else 200)
    return lines


def _timed_steps(step: Any, steps: int, start: Any, out: Any) -> None:
    """``steps`` timed calls of ``step`` once every process is ready; the times and the first and last instants
    (``perf_counter`` is the same clock in every process) go to ``out``."""
    start.wait()
    stamps = [time.perf_counter()]
    for _ in range(steps):
        step()
        stamps.append(time.perf_counter())
    out.put(([b - a for a, b in itertools.pairwise(stamps)], stamps[0], stamps[-1]))


def _capture(url: str, steps: int, out: Any, start: Any) -> None:
    """A capturing process: its own card of ``wkex`` played through the real toolkit, the ledger at ``url``
    attached."""
    from arcengine import GameAction

    arc = arcade()
    with Ledger.open(url) as led:
        led.attach(arc)
        env = arc.make("wkex", scorecard_id=arc.open_scorecard())
        for _ in range(20):
            env.step(GameAction.ACTION2)
        _timed_steps(lambda: env.step(GameAction.ACTION2), steps, start, out)


def _bare(url: str, steps: int, out: Any, start: Any) -> None:
    """A process of bare INSERT+COMMITs."""
    with pg_connect(url) as con:
        _timed_steps(pg_bare_commits(con, "bench_w"), steps, start, out)


def _side_by_side(target: Any, url: str, procs: int, steps: int) -> tuple[float, list[float]]:
    """``procs`` processes of ``target`` started together: the wall seconds of all their steps, and each step's
    time, sorted."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Barrier(procs)
    ps = [ctx.Process(target=target, args=(url, steps, out, start)) for _ in range(procs)]
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


def concurrent_writers(url: str, procs: int = 16, steps: int = 200) -> list[str]:
    """``procs`` capturing processes, then as many bare INSERT+COMMIT loops, on the PostgreSQL database ``url``."""
    Ledger.open(url).close()  # the ledger's schema first: a database holding other tables is refused as no ledger
    with pg_connect(url) as con:
        pg_bare_commits(con, "bench_w")  # its table, before the processes start
    wall, cap = _side_by_side(_capture, url, procs, steps)
    _, bare = _side_by_side(_bare, url, procs, steps)

    def pct(times: list[float], q: float) -> float:
        return times[min(len(times) - 1, int(q * len(times)))] * 1000

    return [
        f"{procs} capturing processes x {steps} toolkit steps on PostgreSQL: {len(cap) / wall:,.0f} steps/s in total "
        f"(first timed step to last); captured step p50 {pct(cap, 0.5):.2f} ms, p99 {pct(cap, 0.99):.2f} ms; "
        f"bare INSERT+COMMIT ({procs} processes) p50 {pct(bare, 0.5):.2f} ms, p99 {pct(bare, 0.99):.2f} ms; "
        f"p50 ratio {statistics.median(cap) / statistics.median(bare):.2f}x, "
        f"p99 ratio {pct(cap, 0.99) / pct(bare, 0.99):.2f}x (GOAL p99 <= 2x)",
    ]
