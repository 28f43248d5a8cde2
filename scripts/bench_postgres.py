"""PostgreSQL next to SQLite, same run, same sizes: what live capture adds to a toolkit step, export (full replay)
events/s, and ``ledger copy`` events/s in both directions.

The PostgreSQL server is ``$LEDGER_BENCH_PG_URL``, else ``$LEDGER_TEST_PG_URL``, else the machine's default
(postgresql+psycopg://postgres@127.0.0.1:5432/test); the bench creates its own database there and drops it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import arc_agi.scorecard  # noqa: F401  (imported first: its import sets its logger to INFO)
from bench_core import step_cost

from ledger import Ledger
from ledger.app.copying import copy_ledger, open_destination, open_source
from ledger.domain.baselines import BaselineEntry
from ledger.domain.events import CardOpened, card_stream, encode, type_of
from ledger.domain.projection import apply, new_card
from ledger.domain.translator import Observation, translate

logging.getLogger("arc_agi.scorecard").setLevel(logging.WARNING)

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
GAME = "wkex-0000000f"
GUID = "0f0e0d0c-0000-4000-8000-000000000001"


def admin_url() -> str:
    """The server to bench on (its database is only used to create and drop the bench's own)."""
    return os.environ.get("LEDGER_BENCH_PG_URL") or os.environ.get("LEDGER_TEST_PG_URL") or DEFAULT_PG


@contextmanager
def bench_database() -> Iterator[str]:
    """A fresh PostgreSQL database for the bench, dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    name = f"ledger_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url(), isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url()).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def bare_pg_commit(url: str, n: int) -> float:
    """One INSERT + COMMIT of a row as large as a captured action event on a plain table (psycopg, no ORM)."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    con = psycopg.connect(host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database)
    con.execute("CREATE TABLE IF NOT EXISTS bench_t (seq BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL)")
    con.commit()
    row = os.urandom(430)
    t = time.perf_counter()
    for _ in range(n):
        con.execute("INSERT INTO bench_t (body) VALUES (%s)", (row,))
        con.commit()
    dt = (time.perf_counter() - t) / n
    con.execute("DROP TABLE bench_t")
    con.commit()
    con.close()
    return dt


def build_card(led: Ledger, n_steps: int, seed: int = 7) -> tuple[str, int]:
    """A long captured-like card (translator -> events) written in large transactions; (card_id, events)."""
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    card_id = f"bench-{seed}"
    sid = led.record_baselines([BaselineEntry(game_id=GAME, baseline_actions=[22, 123, 73])], ts=t0)
    state = new_card(card_id)
    opened = CardOpened(ts=t0, card_id=card_id, baselines_id=sid)
    apply(state, opened)
    batch = [(type_of(opened), t0.isoformat(), encode(opened))]
    version, levels, since = 0, 0, 0
    for i in range(n_steps):
        r = rng.random()
        if i == 0 or (r < 0.002 and since == 0):
            a, full, levels = 0, True, 0
        elif r < 0.002:
            a, full, since = 0, False, 0
        elif r < 0.004 and levels < 2:
            a, full, since, levels = 1, False, 0, levels + 1
        else:
            a, full, since = 2, False, since + 1
        ts = t0 + timedelta(milliseconds=i)
        obs = Observation(
            ts=ts, game_id=GAME, guid=GUID, action=a, state="NOT_FINISHED", levels_completed=levels,
            full_reset=full, frame_empty=False,
        )  # fmt: skip
        batch.extend((type_of(e), ts.isoformat(), encode(e)) for e in translate(state, obs))
        if len(batch) >= 20_000:
            led.store.append_encoded(card_stream(card_id), batch, expected_version=version)
            version += len(batch)
            batch = []
    if batch:
        led.store.append_encoded(card_stream(card_id), batch, expected_version=version)
        version += len(batch)
    return card_id, version


def export_rate(where: str, card_id: str, n_events: int) -> tuple[float, float, str]:
    """(cold events/s with no projection cache, warm seconds, the JSON)."""
    with Ledger.open(where) as led:
        led.store.drop_snapshots()
        t = time.perf_counter()
        out = led.export(card_id)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        again = led.export(card_id)
        warm = time.perf_counter() - t
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
    """CPU seconds used so far by the other sessions on ``url``'s database (the copy's writer), if the server is
    on this machine (read from /proc), else None."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    with psycopg.connect(host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database) as con:
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


def copy_figures(src: str, how: str, dst: str | None = None) -> list[str]:
    """``ledger copy`` of the SQLite ledger ``src`` into ``dst`` (an empty PostgreSQL database; default a fresh one,
    dropped after), and what its time is made of:
    the same rows COPYed raw (encoded beforehand, no check, no summary: the server's part alone), and the client's
    work per event measured apart in one thread (read, hash check, encoding, summary fold)."""
    import sqlite3

    from ledger.app.copying import BATCH
    from ledger.domain import chain
    from ledger.store.postgres import COPY_BINARY_SQL, encode_rows
    from ledger.store.summary import SummaryKeeper, body_reader, copied_changes

    lines = []
    with contextlib.ExitStack() as stack:
        pg = dst if dst is not None else stack.enter_context(bench_database())
        s, d = open_source(src), open_destination(pg)
        try:
            c0 = time.process_time()
            rep = copy_ledger(s, d)
            client = time.process_time() - c0
            server = _backend_cpu(pg)
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
    t = time.perf_counter()
    rows = list(s.scan(batch=BATCH))
    read = time.perf_counter() - t
    s.close()
    t = time.perf_counter()
    assert all(chain.first_unhashed(rows[i : i + BATCH]) is None for i in range(0, len(rows), BATCH))
    hashed = time.perf_counter() - t
    t = time.perf_counter()
    chunks = [encode_rows(rows[i : i + BATCH]) for i in range(0, len(rows), BATCH)]
    encoded = time.perf_counter() - t
    con = sqlite3.connect(src)
    keeper = SummaryKeeper()
    keeper.enabled = True
    reader = body_reader(lambda sql, params: con.execute(sql, params).fetchall())
    t = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        changes = copied_changes(keeper, [(e.stream, e.version, e.type, e.body) for e in rows[i : i + BATCH]], reader)
        for c in changes:
            keeper.committed(c)
    folded = time.perf_counter() - t
    con.close()
    with bench_database() as pg:
        open_destination(pg).close()  # the ledger's schema: its indexes and constraints
        import psycopg
        from sqlalchemy.engine import make_url

        u = make_url(pg)
        with psycopg.connect(host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database) as c:
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


def unreachable() -> str | None:
    """Why the PostgreSQL server cannot be used, or None."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.pool import NullPool

    engine = create_engine(admin_url(), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as e:
        return str(e.orig or e).strip().splitlines()[0]
    finally:
        engine.dispose()
    return None


def run(quick: bool) -> list[str]:
    """Capture and export figures on PostgreSQL next to SQLite."""
    why = unreachable()
    if why is not None:
        return [f"skipped: PostgreSQL at {admin_url()} is not usable ({why}); set LEDGER_BENCH_PG_URL"]
    steps = 300 if quick else 3000
    card_steps = 20_000 if quick else 200_000
    lines: list[str] = []
    with bench_database() as pg, tempfile.TemporaryDirectory() as d:
        sq = str(Path(d) / "bench.sqlite")
        bare = min(step_cost(None, steps) for _ in range(2))
        on_sq = min(step_cost(sq, steps) for _ in range(2))
        on_pg = min(step_cost(pg, steps) for _ in range(2))
        commit = min(bare_pg_commit(pg, steps) for _ in range(2))
        lines.append(f"capture, {steps} toolkit steps each: bare {bare * 1e6:.0f} us/step")
        lines.append(
            f"  SQLite     attached {on_sq * 1e6:.0f} us/step: capture adds {(on_sq - bare) * 1e6:.0f} us/step"
        )
        lines.append(
            f"  PostgreSQL attached {on_pg * 1e6:.0f} us/step: capture adds {(on_pg - bare) * 1e6:.0f} us/step; "
            f"one bare INSERT+COMMIT of a same-size row {commit * 1e6:.0f} us -> {(on_pg - bare) / commit:.2f}x"
        )
        built = str(Path(d) / "card.sqlite")
        with Ledger.open(built) as led:
            card_id, n_events = build_card(led, card_steps)
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
