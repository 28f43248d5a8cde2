"""PostgreSQL next to SQLite, same run, same sizes: what live capture adds to a toolkit step, export (full replay)
events/s, and ``ledger copy`` events/s in both directions.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import benchlib as bl

from ledger import Ledger
from ledger.app.copying import copy_ledger, open_destination, open_source


def bare_pg_commit(url: str, n: int) -> float:
    """Seconds of one bare INSERT + COMMIT (:func:`benchlib.pg_bare_commits`) in a loop of ``n``."""
    with bl.pg_connect(url) as con:
        commit = bl.pg_bare_commits(con, "bench_t")
        t = time.perf_counter()
        for _ in range(n):
            commit()
        dt = (time.perf_counter() - t) / n
        con.execute("DROP TABLE bench_t")
    return dt


def export_rate(where: str, card_id: str, n_events: int) -> tuple[float, float, str]:
    """(cold events/s with no projection cache, warm seconds, the JSON)."""
    with Ledger.open(where) as led:
        led.store.drop_snapshots()
        cold, out = bl.best(lambda: led.export(card_id), 1)
        warm, again = bl.best(lambda: led.export(card_id), 1)
    assert again == out
    return n_events / cold, warm, out


def copy_rate(src: str, dst: str) -> tuple[int, float]:
    s, d = open_source(src), open_destination(dst)
    try:
        rep = copy_ledger(s, d)
    finally:
        s.close()
        d.close()
    return rep.events, rep.events / rep.seconds


def _backend_cpu(url: str) -> float | None:
    """CPU seconds used so far by the other sessions on ``url``'s database, if the server is on this machine."""
    with bl.pg_connect(url) as con:
        pids = [
            r[0]
            for r in con.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ]
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def copy_figures(src: str, how: str, pg: str) -> list[str]:
    """``ledger copy`` of the SQLite ledger ``src`` into the PostgreSQL database ``pg``, and what its time is made
    of: the same rows COPYed raw (the server's part alone), and the client's work per event measured apart."""
    import sqlite3

    from ledger.app.copying import BATCH
    from ledger.domain import chain
    from ledger.store.postgres import COPY_BINARY_SQL, encode_rows
    from ledger.store.summary import SummaryKeeper, body_reader, copied_changes

    lines = []
    s, d = open_source(src), open_destination(pg)
    try:
        c0 = time.process_time()
        rep = copy_ledger(s, d)
        client = time.process_time() - c0
        server = _backend_cpu(pg)  # before the copy's session ends
    finally:
        s.close()
        d.close()
    n, rate = rep.events, rep.events / rep.seconds
    lines.append(
        f"ledger copy SQLite -> PostgreSQL of {n:,} events ({how}): {rate:,.0f} events/s ({rep.seconds:.2f} s; "
        f"CPU: this process {client:.2f} s, the server's session "
        f"{f'{server:.2f} s' if server is not None else 'not measured'}); then the cards summary caught up in bulk "
        f"in {rep.summary_seconds:.2f} s ({rep.summary_seconds / n * 1e6:.1f} us an event)"
    )
    s = open_source(src)
    read, rows = bl.best(lambda: list(s.scan(batch=BATCH)), 1)
    s.close()
    batches = [rows[i : i + BATCH] for i in range(0, len(rows), BATCH)]
    hashed, unhashed = bl.best(lambda: [chain.first_unhashed(b) for b in batches], 1)
    assert unhashed == [None] * len(batches)
    encoded, chunks = bl.best(lambda: [encode_rows(b) for b in batches], 1)
    con = sqlite3.connect(src)
    keeper = SummaryKeeper()
    reader = body_reader(lambda sql, params: con.execute(sql, params).fetchall())
    t = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        changes = copied_changes(keeper, [(e.stream, e.version, e.type, e.body) for e in rows[i : i + BATCH]], reader)
        for c in changes:
            keeper.committed(c)
    folded = time.perf_counter() - t
    con.close()
    with bl.pg_database() as pg:
        open_destination(pg).close()  # the ledger's schema: its indexes and constraints
        with bl.pg_connect(pg) as c:
            t = time.perf_counter()
            for data in chunks:
                with c.cursor() as cur, cur.copy(COPY_BINARY_SQL) as cp:
                    cp.write(data or b"")
                c.commit()
            raw = time.perf_counter() - t
    us = {name: x / len(rows) * 1e6 for name, x in (("read", read), ("hash", hashed), ("encode", encoded))}
    us["summary catch-up (after the copy)"] = folded / len(rows) * 1e6
    lines.append(
        f"  the server alone: raw binary COPY of the same {len(rows):,} rows in the same batches of {BATCH:,}, "
        f"encoded beforehand, no check, no summary: {len(rows) / raw:,.0f} events/s -> ledger copy "
        f"{rate / (len(rows) / raw):.2f}x of it (GOAL >= 0.8x; the summary's catch-up after it not counted)"
    )
    lines.append(
        "  the client's work per event, one thread, measured apart: "
        + ", ".join(f"{k} {v:.1f} us" for k, v in us.items())
        + f" = {sum(us.values()):.1f} us (at most {1e6 / sum(us.values()):,.0f} events/s on one core)"
    )
    return lines


def run(quick: bool) -> list[str]:
    why = bl.pg_unusable()
    if why is not None:
        return [f"skipped: PostgreSQL at {why}"]
    steps = 300 if quick else 3000
    card_steps = 20_000 if quick else 200_000
    lines: list[str] = []
    with bl.pg_database() as pg, tempfile.TemporaryDirectory() as d:
        sq = str(Path(d) / "bench.sqlite")
        got = bl.rounds(
            2,
            {
                "bare": lambda: bl.toolkit_steps(None, steps),
                "sqlite": lambda: bl.toolkit_steps(sq, steps),
                "pg": lambda: bl.toolkit_steps(pg, steps),
                "commit": lambda: bare_pg_commit(pg, steps),
            },
        )
        bare, on_sq, on_pg, commit = got["bare"], got["sqlite"], got["pg"], got["commit"]
        lines.append(f"capture, {steps} toolkit steps each: bare {bare * 1e6:.0f} us/step")
        lines.append(
            f"  SQLite     attached {on_sq * 1e6:.0f} us/step: capture adds {(on_sq - bare) * 1e6:.0f} us/step"
        )
        lines.append(
            f"  PostgreSQL attached {on_pg * 1e6:.0f} us/step: capture adds {(on_pg - bare) * 1e6:.0f} us/step; "
            f"one bare INSERT+COMMIT of a same-size row {commit * 1e6:.0f} us -> {(on_pg - bare) / commit:.2f}x"
        )
        built = str(Path(d) / "card.sqlite")
        card_id = "bench-7"
        with Ledger.open(built) as led:
            n_events = bl.build_card(led, bl.synthetic_plays(card_steps), card_id)
        lines += copy_figures(built, f"one card of {n_events:,} events from {card_steps:,} translated steps", pg)
        n_copy, to_sq = copy_rate(pg, str(Path(d) / "back.sqlite"))
        lines.append(f"ledger copy of {n_copy:,} events PostgreSQL -> SQLite: {to_sq:,.0f} events/s")
        sq_rate, sq_warm, sq_json = export_rate(built, card_id, n_events)
        pg_rate, pg_warm, pg_json = export_rate(pg, card_id, n_events)
        lines.append(f"export of a {n_events:,}-event card, cold (full replay, no cache) and warm (projection cache):")
        for name, rate, warm in (("SQLite    ", sq_rate, sq_warm), ("PostgreSQL", pg_rate, pg_warm)):
            lines.append(f"  {name} {rate:,.0f} events/s ({n_events / rate:.2f} s), warm {warm * 1000:.1f} ms")
        lines.append(f"exports identical on both backends: {sq_json == pg_json}")
    return lines
