"""Core figures: export of a 1,000,000-event card vs the toolkit's in-memory scorecard on the same plays, and
the per-step cost that live capture adds to a toolkit step next to one bare SQLite commit of a same-size row."""

from __future__ import annotations

import functools
import itertools
import os
import sqlite3
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchlib import BASELINES, GAME, GUID, best, build_card, rounds, synthetic_plays, toolkit_steps

import tests.toolkit  # noqa: F401  (before the toolkit's first use here: it quiets arc_agi.scorecard's INFO lines)
from ledger import Ledger
from ledger.domain.events import CardOpened
from ledger.store.sqlite import INSERT_SQL
from ledger.store.summary import COUNTERS_SQL

STREAM = f"card:{GUID}"
TS = "2026-12-02T13:15:36.465255+00:00"


def toolkit_rate(plays: list[tuple[int, int, str, bool]]) -> tuple[float, str, str]:
    """updates/s of ScorecardManager.update_scorecard on prebuilt frames, and the toolkit's JSON at the end."""
    import numpy as np
    from arc_agi import EnvironmentInfo
    from arc_agi.scorecard import EnvironmentScorecard, ScorecardManager
    from arcengine import ActionInput, FrameDataRaw, GameAction, GameState

    mgr = ScorecardManager()
    card_id = mgr.new_scorecard(None, None, "", None)
    mgr.add_game(card_id, GUID)
    frame = [np.zeros((1, 1), dtype=np.int8)]

    @functools.cache
    def frame_of(a: int, lv: int, st: str, fr: bool) -> Any:
        f = FrameDataRaw(
            game_id=GAME,
            state=GameState(st),
            levels_completed=lv,
            action_input=ActionInput(id=GameAction.from_id(a)),
            guid=GUID,
            full_reset=fr,
        )
        f.frame = frame
        return f

    frames = [frame_of(*p) for p in plays]
    t = time.perf_counter()
    for f in frames:
        mgr.update_scorecard(GUID, f, f.full_reset)
    doc = EnvironmentScorecard.from_scorecard(
        mgr.scorecards[card_id], [EnvironmentInfo(game_id=GAME, baseline_actions=BASELINES)]
    )
    doc.api_key = None
    dt = time.perf_counter() - t
    return len(frames) / dt, doc.model_dump_json(), card_id


def export_figures(n_steps: int, n_rounds: int = 3) -> list[str]:
    """The toolkit's in-memory rate and a cold export of the same plays, in alternating rounds, best of each."""
    plays = synthetic_plays(n_steps)
    rate_tk, tk_json, card_id = toolkit_rate(plays)
    first = [rate_tk]
    same = True
    with tempfile.TemporaryDirectory() as d, Ledger.open(Path(d) / "bench.sqlite") as led:
        built, n_events = best(lambda: build_card(led, plays, card_id), 1)

        def cold() -> float:
            nonlocal same
            led.store.drop_snapshots()
            took, out = best(lambda: led.export(card_id), 1)
            same = same and out == tk_json
            return took

        def toolkit() -> float:
            return -(first.pop() if first else toolkit_rate(plays)[0])

        got = rounds(n_rounds, {"toolkit": toolkit, "cold": cold})
        rate_tk = -got["toolkit"]
        warm, out = best(lambda: led.export(card_id), 1)
        same = same and out == tk_json
    return [
        f"toolkit ScorecardManager.update_scorecard (in memory): {rate_tk:,.0f} updates/s on {len(plays):,} steps",
        f"building the card: {n_events:,} events in {built:.1f} s",
        f"ledger export, cold (full replay, no cache): {n_events / got['cold']:,.0f} events/s ({got['cold']:.2f} s), "
        f"{n_events / got['cold'] / rate_tk:.1f}x the toolkit's rate (GOAL >= 5x)",
        f"ledger export, warm (projection cache): {warm * 1000:.1f} ms, "
        f"{n_events / warm / rate_tk:,.0f}x the toolkit's rate",
        f"export identical to the toolkit's JSON for the same plays: {same}",
    ]


def capture_figures(n_steps: int, n_rounds: int = 3) -> list[str]:
    """Per-step cost of capture next to one bare commit, in each durability mode.

    The ledger checkpoints SQLite's WAL in a background thread; the bare commit checkpoints inline, as SQLite does by
    default, so the second line also gives it with its checkpoints kept out of the loop."""
    lines = []
    for durability in ("normal", "batched", "full"):
        with tempfile.TemporaryDirectory() as d:
            best = rounds(n_rounds, capture_measures(Path(d), durability, n_steps))
        added = best["attached"] - best["bare"]
        goal = {"normal": " (GOAL <= 1.5x)", "batched": " (opt-in: loses up to 50 ms of steps on a crash)"}
        goal_note = goal.get(durability, "")
        lines.append(
            f"[{durability}] toolkit step bare {best['bare'] * 1e6:.0f} us, attached {best['attached'] * 1e6:.0f} us: "
            f"capture adds {added * 1e6:.0f} us/step; one bare SQLite commit of a same-size row "
            f"{best['commit'] * 1e6:.0f} us -> {added / best['commit']:.2f}x{goal_note}"
        )
        lines.append(
            f"[{durability}]   (that bare commit with no checkpoint in its loop: {best['commit_only'] * 1e6:.0f} us -> "
            f"{added / best['commit_only']:.2f}x; one raw INSERT+COMMIT into the ledger's own events table with its "
            f"UNIQUE(stream, version) index: {best['schema'] * 1e6:.0f} us -> {added / best['schema']:.2f}x)"
        )
        plain, raw = best["situ_plain"] - best["bare"], best["situ_ledger"] - best["bare"]
        lines.append(
            f"[{durability}]   in situ, each commit between two toolkit steps as capture's are: a bare commit adds "
            f"{plain * 1e6:.0f} us/step -> capture {added / plain:.2f}x{goal_note}; the ledger's raw INSERT+COMMIT "
            f"(no Python) adds {raw * 1e6:.0f} us -> {raw / plain:.2f}x (the floor of the ledger's table)"
        )
        if durability == "normal":  # under full the ledger checkpoints inline (see ledger/store/wal.py)
            inline = best["inline"] - best["bare"]
            lines.append(
                f"[{durability}]   (checkpoints inside the commits, as before: capture adds {inline * 1e6:.0f} "
                f"us/step -> {inline / best['commit']:.2f}x)"
            )
            lines += floor_lines(best, added)
            lines += breakdown_lines(n_steps, n_rounds)
    return lines


def capture_measures(d: Path, durability: str, n: int) -> dict[str, Any]:
    names = itertools.count()

    def new() -> Path:
        return d / f"{next(names)}.sqlite"

    measures = {
        "bare": lambda: toolkit_steps(None, n),
        "attached": lambda: toolkit_steps(str(new()), n, durability),
        "commit": lambda: commit_loop(new(), durability, n),
        "commit_only": lambda: commit_loop(new(), durability, n, autocheckpoint=0),
        "schema": lambda: commit_loop(new(), durability, n, "ledger"),
        "situ_plain": lambda: in_situ_commit(new(), durability, n),
        "situ_ledger": lambda: in_situ_commit(new(), durability, n, "ledger"),
    }
    if durability == "normal":
        measures["inline"] = lambda: inline_checkpoints(str(new()), n)
        for table in ("ledger", *FLOOR_TABLES):
            for summary in (False, True):
                measures[f"{table}+{summary}"] = functools.partial(
                    lambda t, s: commit_loop(new(), "normal", n, t, s), table, summary
                )
    return measures


def floor_lines(best: dict[str, float], added: float) -> list[str]:
    """The write floor of each events-table design: a raw INSERT+COMMIT without and with a summary row's UPDATE in
    the same transaction, as multiples of the bare commit."""
    commit = best["commit"]
    names = {
        "ledger": "the ledger's table (rowid seq + UNIQUE(stream, version): two b-trees)",
        "without_rowid": "one b-tree, WITHOUT ROWID, PRIMARY KEY(stream, version), seq a plain column",
        "rowid_only": "one b-tree, seq INTEGER PRIMARY KEY, no (stream, version) index",
    }
    out = [
        f"[normal] write floors, raw INSERT+COMMIT of one action event (x the bare commit of {commit * 1e6:.0f} us):"
    ]
    for table, name in names.items():
        alone, with_summary = best[f"{table}+False"], best[f"{table}+True"]
        out.append(
            f"[normal]   {name}: {alone * 1e6:.0f} us ({alone / commit:.2f}x); with the summary UPDATE "
            f"{with_summary * 1e6:.0f} us ({with_summary / commit:.2f}x)"
        )
    # A step's transaction writes the event alone: the summary follows by position, off the step (store/summary.py).
    floor = best["ledger+False"]
    out.append(
        f"[normal]   capture adds {added * 1e6:.0f} us = the ledger's floor, the event alone ({floor * 1e6:.0f} us) "
        f"+ {(added - floor) * 1e6:.0f} us of Python and of the summary's follower thread ({added / floor:.2f}x "
        "its floor)"
    )
    return out


def breakdown_lines(n_steps: int, n_rounds: int) -> list[str]:
    """Where a captured step's time goes at the default durability, timed in place (:class:`StageTimer`)."""
    with tempfile.TemporaryDirectory() as d:
        runs = [StageTimer().run(str(Path(d) / f"stages-{r}.sqlite"), n_steps) for r in range(n_rounds)]
        bare = rounds(n_rounds, {"bare": lambda: toolkit_steps(None, n_steps)})["bare"]
    step, stages = min(runs, key=lambda r: r[0])
    toolkit = stages.pop("toolkit")
    sql = {k: v for k, v in stages.items() if k.startswith("sql ")}
    py = {k: v for k, v in stages.items() if not k.startswith("sql ")}
    rest = step - toolkit - sum(stages.values())

    def show(d: dict[str, float]) -> str:
        return ", ".join(f"{k.removeprefix('sql ')} {v * 1e6:.1f}" for k, v in sorted(d.items(), key=lambda kv: -kv[1]))

    return [
        f"[normal] one captured step timed in place (timers included): {step * 1e6:.0f} us = the toolkit's own "
        f"{toolkit * 1e6:.0f} us (bare step {bare * 1e6:.0f} us) + capture {(step - toolkit) * 1e6:.0f} us:",
        f"[normal]   SQL {sum(sql.values()) * 1e6:.1f} us: {show(sql)}",
        f"[normal]   Python {(sum(py.values()) + rest) * 1e6:.1f} us: {show(py)}, "
        f"hooks and the timers' own calls {rest * 1e6:.1f}",
    ]


class StageTimer:
    """Times each stage of a captured step in place, in the stepping thread only: the real functions wrapped (time
    inside a stage's callees is its callees'), the SQL statements by a connection subclass."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._stack: list[float] = []
        self._main = threading.main_thread()

    def _enter(self) -> bool:
        if threading.current_thread() is not self._main:
            return False
        self._stack.append(0.0)
        return True

    def _leave(self, label: str, t0: float) -> None:
        dt = time.perf_counter() - t0
        inner = self._stack.pop()
        self.spent[label] = self.spent.get(label, 0.0) + dt - inner
        if self._stack:
            self._stack[-1] += dt

    def wrap(self, label: str, f: Any) -> Any:

        @functools.wraps(f)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self._enter():
                return f(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                self._leave(label, t0)

        return timed

    def run(self, where: str, n_steps: int) -> tuple[float, dict[str, float]]:
        """(seconds per step, seconds per step in each stage) for ``n_steps`` captured steps into ``where``."""
        import arc_agi.scorecard as toolkit_scorecard
        from arc_agi.local_wrapper import LocalEnvironmentWrapper

        import ledger.capture.capture as capture
        import ledger.ledger as facade
        import ledger.store.base as base
        import ledger.store.sqlite as sqlite_store
        import ledger.store.summary as summary
        from ledger.domain import chain

        timer = self

        class TimedConnection(sqlite3.Connection):
            def execute(self, sql: str, params: Any = (), /) -> sqlite3.Cursor:
                if not timer._enter():
                    return super().execute(sql, params)
                t0 = time.perf_counter()
                try:
                    return super().execute(sql, params)
                finally:
                    words = sql.split()
                    timer._leave("sql " + " ".join(words[: 3 if words[0] == "INSERT" else 2]), t0)

        targets = [
            (LocalEnvironmentWrapper, "step", "toolkit"),
            (toolkit_scorecard.ScorecardManager, "update_scorecard", "toolkit"),
            (capture.Capture, "_record_update", "capture"),
            (capture, "observation", "observation"),
            (capture, "translate", "translate"),
            (facade.Ledger, "append_card", "facade"),
            (base.StoreBase, "append", "facade"),
            (base, "encode_events", "encode"),
            (chain, "chain_hashes", "hash"),
            (sqlite_store.SQLiteStore, "_append_rows", "store"),
            # The summary is folded by the follower thread (store/summary.py), off the step: timed only if it ran on
            # the main thread.
            (summary.SummaryKeeper, "change", "summary fold"),
        ]
        saved = [(obj, name, getattr(obj, name)) for obj, name, _ in targets]
        connect = sqlite3.connect
        try:
            for obj, name, label in targets:
                setattr(obj, name, self.wrap(label, getattr(obj, name)))
            sqlite3.connect = functools.partial(connect, factory=TimedConnection)  # type: ignore[assignment]
            self.spent.clear()
            step = toolkit_steps(where, n_steps, before_timing=self.spent.clear)
        finally:
            sqlite3.connect = connect
            for obj, name, f in saved:
                setattr(obj, name, f)
        return step, {k: v / n_steps for k, v in self.spent.items()}


def inline_checkpoints(where: str, n_steps: int) -> float:
    """Seconds per captured toolkit step with SQLite's default checkpointing in the commits, no background thread."""
    from ledger.store import sqlite as sqlite_store

    saved = sqlite_store.BACKSTOP_PAGES, sqlite_store.EVERY_COMMITS
    sqlite_store.BACKSTOP_PAGES, sqlite_store.EVERY_COMMITS = 1000, 0
    try:
        return toolkit_steps(where, n_steps)
    finally:
        sqlite_store.BACKSTOP_PAGES, sqlite_store.EVERY_COMMITS = saved


#: One-b-tree designs of the events table, for the floor figures only (the ledger's schema is not these):
#: a clustered (stream, version) key with ``seq`` a plain column, or ``seq`` as rowid with no (stream, version) index.
_COLUMNS = (
    "stream VARCHAR(400) NOT NULL, version INTEGER NOT NULL, type VARCHAR(40) NOT NULL, ts VARCHAR(40) NOT NULL, "
    "body BLOB NOT NULL, prev_hash VARCHAR(64) NOT NULL, hash VARCHAR(64) NOT NULL"
)
FLOOR_TABLES = {
    "without_rowid": (
        f"CREATE TABLE events (seq INTEGER NOT NULL, {_COLUMNS}, PRIMARY KEY (stream, version)) WITHOUT ROWID"
    ),
    "rowid_only": f"CREATE TABLE events (seq INTEGER PRIMARY KEY, {_COLUMNS})",
}


def committer(
    path: Path, durability: str, table: str = "plain", summary: bool = False, autocheckpoint: int | None = None
) -> tuple[sqlite3.Connection, Any]:
    """A connection and ``commit(v)``: one raw INSERT + COMMIT of a captured-size action event into a plain table
    (``plain``: the bare commit), the ledger's own ``events`` table (``ledger``) or one of :data:`FLOOR_TABLES`;
    ``summary``: with the ``card_summary`` UPDATE in the same transaction; ``autocheckpoint`` 0: no checkpoints."""
    if table != "plain":
        with Ledger.open(path, durability=durability) as led:  # type: ignore[arg-type]
            led.store.append(STREAM, [CardOpened(ts=datetime.now(UTC), card_id=STREAM[5:])], 0)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
    if autocheckpoint is not None:
        con.execute(f"PRAGMA wal_autocheckpoint={autocheckpoint}")
    if table == "plain":
        con.execute("CREATE TABLE IF NOT EXISTS t (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        row = os.urandom(430)  # a stored action event: stream, version, type, ts, body, two hashes

        def commit(v: int) -> None:
            con.execute("BEGIN IMMEDIATE")
            con.execute("INSERT INTO t (body) VALUES (?)", (row,))
            con.execute("COMMIT")

        return con, commit
    if table != "ledger":
        con.execute("DROP TABLE events")
        con.execute(FLOOR_TABLES[table])
    body = os.urandom(190)
    # The ledger's own statements (ledger/store/sqlite.py, summary.py); seq is the rowid or given.
    seq_given = table == "without_rowid"
    insert = INSERT_SQL.replace("(stream,", "(seq, stream,", 1).replace("VALUES (", "VALUES (?, ", 1)
    insert = insert if seq_given else INSERT_SQL

    def commit_event(v: int) -> None:
        con.execute("BEGIN IMMEDIATE")
        row = (STREAM, v + 2, "action_taken", TS, body, "a" * 64, "b" * 64)
        con.execute(insert, (v + 2, *row) if seq_given else row)
        if summary:
            con.execute(COUNTERS_SQL, (v, v, v, TS, v, STREAM[5:]))
        con.execute("COMMIT")

    return con, commit_event


def commit_loop(path: Path, durability: str, n: int, *how: Any, autocheckpoint: int | None = None) -> float:
    """Seconds of one :func:`committer` commit in a tight loop of ``n``."""
    con, commit = committer(path, durability, *how, autocheckpoint=autocheckpoint)
    t = time.perf_counter()
    for v in range(n):
        commit(v)
    dt = (time.perf_counter() - t) / n
    con.close()
    return dt


def in_situ_commit(path: Path, durability: str, n_steps: int, table: str = "plain") -> float:
    """Seconds per bare toolkit step followed by one :func:`committer` commit: between steps, whose work leaves
    SQLite cold in the CPU's caches, a commit costs about three times what it costs in a tight loop."""
    con, commit = committer(path, durability, table)
    try:
        return toolkit_steps(None, n_steps, durability, after_step=commit)
    finally:
        con.close()


def run(quick: bool) -> list[str]:
    return export_figures(20_000 if quick else 1_000_000) + capture_figures(300 if quick else 3000)
