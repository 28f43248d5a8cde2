"""What the bench areas share.

On a shared machine one timing means little: a figure is the best of several runs, and what is compared is measured
in alternating rounds so that load weighs on all alike."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

LEDGER = str(Path(sys.executable).with_name("ledger"))
GAME = "wkex-0000000f"
BASELINES = [22, 123, 73]
GUID = "0f0e0d0c-0000-4000-8000-000000000001"


def best[T](fn: Callable[[], T], repeat: int = 3) -> tuple[float, T]:
    """The fastest of ``repeat`` runs of ``fn``, in seconds, and its last result."""
    fastest = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        fastest = min(fastest, time.perf_counter() - t)
    return fastest, out


def rounds[K](n: int, measures: dict[K, Callable[[], Any]]) -> dict[K, Any]:
    """Each measure (a number, or a tuple of numbers) taken in ``n`` alternating rounds: the least of each."""
    least: dict[K, Any] = {}
    for _ in range(n):
        for key, measure in measures.items():
            got = measure()
            was = least.get(key, got)
            least[key] = tuple(map(min, was, got)) if isinstance(got, tuple) else min(was, got)
    return least


@dataclass
class Proc:
    wall: float
    #: User + system seconds of the command's process, its start-up included.
    cpu: float
    #: Peak resident MB of the command's process alone (``peak=True`` only).
    mb: float
    out: bytes


#: Runs a command and writes its CPU seconds and peak resident kB on stderr's last line. A child keeps the
#: resident size of the process it was started from as its own peak (fork, or the vfork ``subprocess`` uses), so a
#: command started by a bench holding a large ledger or recording would report the bench's size: this small
#: launcher starts it instead.
_LAUNCH = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:])\n"
    "_, status, u = os.wait4(p.pid, 0)\n"
    "sys.stderr.write(f'\\nRUSAGE {u.ru_utime + u.ru_stime} {u.ru_maxrss}\\n')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def proc(cmd: list[str], *, peak: bool = False, ok: tuple[int, ...] = (0,), env: Any = None, cwd: Any = None) -> Proc:
    """Run ``cmd``; its wall and CPU time (and peak memory with ``peak``); RuntimeError unless its exit is in ``ok``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, *cmd] if peak else cmd, stdout=out, stderr=err, env=env, cwd=cwd
        )
        _, status, use = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read().decode(errors="replace")
    cpu, mb = use.ru_utime + use.ru_stime, 0.0
    if peak:
        stderr, _, last = stderr.rstrip().rpartition("\n")
        took, kb = last.split()[1:]
        cpu, mb = float(took), int(kb) / 1024
    if p.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {stderr.strip()[-500:]}")
    return Proc(wall, cpu, mb, stdout)


def ledger(*args: str, peak: bool = False, ok: tuple[int, ...] = (0,)) -> Proc:
    return proc([LEDGER, *args], peak=peak, ok=ok)


def bytecode_env(pycache: str | Path) -> dict[str, str]:
    """The environment of a measured command that runs from bytecode, as an installed package does: its first run
    writes the bytecode under ``pycache`` (outside the source tree), so no later run pays for compiling the
    package's modules (PYTHONDONTWRITEBYTECODE would make every run do so). ``--db`` is given, never LEDGER_DB."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "LEDGER_DB")}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def synthetic_plays(n_steps: int, seed: int = 7) -> list[tuple[int, int, str, bool]]:
    """(action, levels_completed after, state after, full_reset) for a long agent session on a 3-level game:
    mostly ACTION2 (no effect), ACTION1 completing levels now and then, level resets, full resets."""
    rng = random.Random(seed)
    out = [(0, 0, "NOT_FINISHED", True)]
    levels = 0
    since_level = 0
    for _ in range(n_steps - 1):
        r = rng.random()
        if r < 0.002:
            if since_level == 0:
                levels = 0
                out.append((0, 0, "NOT_FINISHED", True))
            else:
                out.append((0, levels, "NOT_FINISHED", False))
            since_level = 0
        elif r < 0.004 and levels < 2:
            levels += 1
            since_level = 0
            out.append((1, levels, "NOT_FINISHED", False))
        else:
            since_level += 1
            out.append((2, levels, "NOT_FINISHED", False))
    return out


def build_card(led: Any, plays: list[tuple[int, int, str, bool]], card_id: str) -> int:
    """Write the plays as capture would, in large transactions; the events written."""
    from ledger.domain.baselines import BaselineEntry
    from ledger.domain.events import CardOpened, card_stream, encode, type_of
    from ledger.domain.projection import apply, new_card
    from ledger.domain.translator import Observation, translate

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    sid = led.record_baselines([BaselineEntry(game_id=GAME, baseline_actions=BASELINES)], ts=t0)
    state = new_card(card_id)
    stream = card_stream(card_id)
    opened = CardOpened(ts=t0, card_id=card_id, baselines_id=sid)
    apply(state, opened)
    batch = [(type_of(opened), t0.isoformat(), encode(opened))]
    version = 0
    for i, (a, lv, st, fr) in enumerate(plays):
        ts = t0 + timedelta(milliseconds=i)
        obs = Observation(
            ts=ts, game_id=GAME, guid=GUID, action=a, state=st, levels_completed=lv, full_reset=fr, frame_empty=False
        )
        batch += [(type_of(e), ts.isoformat(), encode(e)) for e in translate(state, obs)]
        if len(batch) >= 20_000:
            led.store.append_encoded(stream, batch, expected_version=version)
            version += len(batch)
            batch = []
    if batch:
        led.store.append_encoded(stream, batch, expected_version=version)
        version += len(batch)
    return version


def toolkit_steps(
    where: str | None,
    n_steps: int,
    durability: str = "normal",
    before_timing: Callable[[], Any] | None = None,
    after_step: Callable[[int], Any] | None = None,
) -> float:
    """Seconds per toolkit step (ACTION2 on wkex) with a ledger at ``where`` attached, or bare (None);
    ``after_step(i)`` runs after each step, inside the timing."""
    from arcengine import GameAction

    from ledger import Ledger
    from tests.toolkit import arcade

    arc = arcade()
    led = None
    if where is not None:
        led = Ledger.open(where, durability=durability)  # type: ignore[arg-type]
        led.attach(arc)
    env = arc.make("wkex", scorecard_id=arc.open_scorecard())
    for _ in range(50):
        env.step(GameAction.ACTION2)
    if before_timing is not None:
        before_timing()
    t = time.perf_counter()
    for i in range(n_steps):
        env.step(GameAction.ACTION2)
        if after_step is not None:
            after_step(i)
    dt = (time.perf_counter() - t) / n_steps
    if led is not None:
        led.close()
    return dt


DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def admin_url() -> str:
    """The PostgreSQL server to bench on (its database is only used to create and drop the bench's own)."""
    return os.environ.get("LEDGER_BENCH_PG_URL") or os.environ.get("LEDGER_TEST_PG_URL") or DEFAULT_PG


def pg_unusable() -> str | None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.pool import NullPool

    engine = create_engine(admin_url(), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DBAPIError as e:
        return f"{admin_url()} is not usable: {str(e.orig or e).strip().splitlines()[0]}; set LEDGER_BENCH_PG_URL"
    finally:
        engine.dispose()
    return None


@contextmanager
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped afterwards; its URL."""
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


def pg_bare_commits(con: Any, table: str) -> Callable[[], None]:
    """``commit()``: one INSERT + COMMIT into ``table`` (made if missing) of a row as large as a captured action
    event, on the psycopg connection ``con``."""
    con.execute(f"CREATE TABLE IF NOT EXISTS {table} (seq BIGSERIAL PRIMARY KEY, body BYTEA NOT NULL)")
    con.commit()
    row = os.urandom(430)

    def commit() -> None:
        con.execute(f"INSERT INTO {table} (body) VALUES (%s)", (row,))
        con.commit()

    return commit


def pg_connect(url: str) -> Any:
    """A plain psycopg connection to the database of a SQLAlchemy URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return psycopg.connect(host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database)
