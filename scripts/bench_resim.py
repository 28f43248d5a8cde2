"""Audit a harness run at game speed: ``ledger import --environments`` and ``ledger audit --environments`` of
harness recordings of the test game ``lsx3`` (64x64 mazes, seven levels, an energy bar, three lives), in lines per
second and peak memory, beside the bare cost of stepping the same actions through the game.

Each command runs as its own process, so its peak resident memory and CPU time are its own (start-up included).
With ``LEDGER_BENCH_LS20`` naming an environment_files folder that holds the public ``ls20-fa137e247ce6`` (not in
this repository), the same figures follow for it, and the peak memory of long ls20 recordings by length.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchlib import ledger

from ledger import Ledger
from tests.harness_recorder import Recorder, convert, environments
from tests.toolkit import arcade

GAME = "lsx3-0000003c"
LS20 = "ls20-fa137e247ce6"
#: Moves that complete the first two levels of ls20-fa137e247ce6 from their starts (found by a breadth-first search
#: of the game's states, 5 and 26 moves; its baselines are 5 and 32).
LS20_SOLVED = ([1, 1, 3, 1, 1], [2, 4, 4, 1, 4, 1, 1, 1, 3, 3, 2, 1, 2, 1, 2, 1, 2, 1, 1, 3, 3, 3, 2, 2, 2, 2])
CELL, CELLS = 4, 16
STEPS = {1: (0, -1), 2: (0, 1), 3: (-1, 0), 4: (1, 0)}


def _towards_goal(frame: Any) -> int | None:
    """The first move of a shortest path to the goal, read from the frame (walls 4, goal 3, player 9)."""
    grid = frame[-1]
    cell = {(x, y): grid[y * CELL + CELL // 2][x * CELL + CELL // 2] for x in range(CELLS) for y in range(CELLS)}
    start = next((c for c, v in cell.items() if v == 9), None)
    if start is None:
        return None
    seen = {start: 0}
    todo = deque([start])
    while todo:
        x, y = c = todo.popleft()
        if cell[c] == 3:
            while seen[c] and seen[seen[c]]:  # type: ignore[index]
                c = seen[c]  # type: ignore[assignment]
            return next(a for a, (dx, dy) in STEPS.items() if (start[0] + dx, start[1] + dy) == c)
        for dx, dy in STEPS.values():
            n = (x + dx, y + dy)
            if n in cell and n not in seen and cell[n] != 4:
                seen[n] = c  # type: ignore[assignment]
                todo.append(n)
    return None


def record(
    folder: Path, envs: Path, db: Path, actions: int, seed: int = 7, game: str = GAME, solving: bool = False
) -> tuple[Path, str, list[int]]:
    """A harness recording of ``actions`` actions, the same run captured live into ``db``; (path, card, actions).
    The agent heads for lsx3's goal; on another game it moves at random, or (``solving``, ls20) solves its first two
    levels after wandering a little and RESETting the level."""
    from arcengine import GameAction

    rng = random.Random(seed)
    arc = arcade(envs)
    sent: list[int] = []
    with Ledger.open(db) as led:
        capture = led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make(game, scorecard_id=card)
        rec = Recorder(folder, f"{game}.seededrandom.{actions}", rng)
        steer = game == GAME
        wander = 0
        plan: list[int] = []
        for _ in range(actions):
            last = env.observation_space
            if solving:
                a = _solving(rng, last, plan)
            else:
                r = rng.random()
                # Now and then the agent wanders for a while (and runs out of energy, then of lives).
                wander = max(wander - 1, 0) or (120 if r < 0.01 else 0)
                if last.state.name in ("GAME_OVER", "WIN") or r > 0.99:
                    a = 0
                else:
                    towards = _towards_goal(last.frame) if steer and r < 0.85 and not wander else None
                    a = towards or rng.choice([1, 2, 3, 4])
            raw = env.step(GameAction.from_id(a))
            sent.append(a)
            rec.record(json.loads(convert(raw).model_dump_json()))
        arc.close_scorecard(card)
        capture.detach()
    return rec.path, card, sent


def _solving(rng: random.Random, last: Any, plan: list[int]) -> int:
    """The next action of the ls20 agent that knows its first two levels (``plan``: the moves decided on)."""
    level = last.levels_completed
    if last.state.name in ("GAME_OVER", "WIN"):
        plan.clear()
        return 0
    if not plan:
        r = rng.random()
        if level < len(LS20_SOLVED) and r < 0.6:
            wander = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randrange(0, 12))]
            plan += [*wander, 0, *([0] if rng.random() < 0.1 else []), *LS20_SOLVED[level]]
        elif level >= len(LS20_SOLVED) and r < 0.04:
            plan += [0, 0]
    return plan.pop(0) if plan else rng.choice([1, 2, 3, 4])


def bare(envs: Path, sent: list[tuple[int, Any]], game_id: str = GAME) -> float:
    """CPU seconds to step ``sent`` (action id, its data or None) through a fresh game, nothing else."""
    from arcengine import ActionInput, GameAction

    from ledger.toolkit.game_files import scan_games
    from ledger.toolkit.seeds import start_game

    game = start_game(scan_games(envs)[game_id])
    t = time.process_time()
    for a, data in sent:
        game.perform_action(ActionInput(id=GameAction.from_id(a), **({} if data is None else {"data": data})), raw=True)
    return time.process_time() - t


def _ledger(*args: str) -> tuple[float, float, str]:
    """(CPU seconds, peak resident MB, stdout) of ``ledger ARGS``: CPU, as the bare steps, since on a shared machine
    the wall clock measures the other processes too."""
    p = ledger(*args, peak=True, ok=(0, 1))
    return p.cpu, p.mb, p.out.decode()


def _import(db: Path, path: Path, envs: Path | None = None) -> tuple[float, float, str]:
    """``ledger import`` of the recording ``path``, with the game code of ``envs`` or without."""
    return _ledger("--db", str(db), "import", str(path), *(("--environments", str(envs)) if envs else ()), "-q")


def _audit(db: Path, card: str, envs: Path, *more: str) -> tuple[float, float, str]:
    return _ledger("--db", str(db), "audit", card, "--environments", str(envs), *more)


def _only_card(db: Path) -> str:
    with Ledger.open(db) as led:
        (card,) = led.card_ids()
    return card


def _resimulation(out: str) -> dict[str, Any]:
    return next(c for c in json.loads(out)["checks"] if c["name"] == "resimulation")


@contextmanager
def _workspace(public: str | None) -> Iterator[tuple[Path, Path]]:
    """A temporary folder, and in it the tests' harness games with the public ls20 folder ``public`` beside them."""
    with tempfile.TemporaryDirectory() as tmp:
        envs = environments(Path(tmp) / "envs")
        if public:
            shutil.copytree(public, envs, dirs_exist_ok=True)
        yield Path(tmp), envs


def shape(path: Path) -> dict[str, int]:
    """What the recording holds: frame lines, GAME_OVERs, level completions, full resets."""
    counts = {"lines": 0, "game_over": 0, "full_reset": 0, "wins": 0, "levels": 0}
    level = 0
    for raw in path.read_bytes().splitlines():
        d = json.loads(raw)["data"]
        if "frame" not in d:
            continue
        counts["lines"] += 1
        counts["levels"] += d["levels_completed"] > level
        level = d["levels_completed"]
        counts["game_over"] += d["state"] == "GAME_OVER"
        counts["wins"] += d["state"] == "WIN"
        counts["full_reset"] += bool(d.get("full_reset"))
    return counts


def one_size(root: Path, envs: Path, actions: int, game: str, solving: bool) -> list[str]:
    live_db, with_db, without_db = root / "live.sqlite", root / "with.sqlite", root / "without.sqlite"
    path, live_card, sent = record(root / "rec", envs, live_db, actions, game=game, solving=solving)
    seen = shape(path)
    n = seen["lines"]
    step_s = bare(envs, [(a, None) for a in sent], game)
    t_with, mb_with, _ = _import(with_db, path, envs)
    t_frames, mb_frames, _ = _import(without_db, path)
    card = _only_card(without_db)
    t_audit, mb_audit, out = _audit(without_db, card, envs, "--json")
    decided = _resimulation(out)
    searched = ""
    if game == LS20:  # every candidate of every open line (minutes on lsx3's 5,000 lines): on ls20 only
        t_all, mb_all, out_all = _audit(without_db, card, envs, "--decide", "--json")
        every = _resimulation(out_all)
        searched = (
            f"  audit --environments --decide of it: {t_all:6.2f} s, {n / t_all:5.0f} lines/s, peak {mb_all:.0f} MB; "
            f"resimulation {every['status']} ({every['decided_actions']} decided by the game)"
        )
    t_live, mb_live, out_live = _audit(live_db, live_card, envs, "--json")
    live_verdict = _resimulation(out_live)["status"]
    t_coded, mb_coded, out_coded = _audit(with_db, _only_card(with_db), envs, "--json")
    coded_verdict = _resimulation(out_coded)["status"]
    return [
        f"{n}-line {game} recording{' (an agent that solves its first two levels)' if solving else ''} "
        f"({seen['game_over']} GAME_OVER, {seen['full_reset']} full resets, {seen['levels']} levels completed, "
        f"{seen['wins']} WIN lines); bare game: {n / step_s:.0f} lines/s ({step_s / n * 1000:.2f} ms a step)",
        f"  import --environments:          {t_with:6.2f} s, {n / t_with:5.0f} lines/s, {t_with / step_s:4.1f}x the "
        f"bare steps, peak {mb_with:.0f} MB",
        f"  import without the game code:   {t_frames:6.2f} s, {n / t_frames:5.0f} lines/s, peak {mb_frames:.0f} MB",
        f"  audit --environments of it:     {t_audit:6.2f} s, {n / t_audit:5.0f} lines/s, peak {mb_audit:.0f} MB; "
        f"resimulation {decided['status']} ({decided.get('undecided_actions', 0)} undecided actions, "
        + (
            f"{decided.get('decided_actions', 0)} decided by the game)"
            if decided.get("searched")
            else f"{decided.get('reproduced_actions', 0)} reproduced along one path)"
        ),
        f"  audit --environments, live card: {t_live:6.2f} s, {n / t_live:5.0f} lines/s, {t_live / step_s:4.1f}x the "
        f"bare steps, peak {mb_live:.0f} MB, resimulation {live_verdict}",
        f"  audit --environments of the card imported with the code: {t_coded:6.2f} s, {n / t_coded:5.0f} lines/s, "
        f"peak {mb_coded:.0f} MB, resimulation {coded_verdict}",
        f"  audit of the card imported without the code / the live card's: {t_audit / t_live:.1f}x; "
        f"with the code / live: {t_coded / t_live:.1f}x"
        + (f"; --decide / live: {t_all / t_live:.1f}x" if searched else ""),
        *([searched] if searched else []),
    ]


def by_length(root: Path, envs: Path, sizes: tuple[int, ...]) -> list[str]:
    """Peak memory of both imports and of the audit (one path, and ``--decide``) for ls20 recordings of the random
    agent at each size, and what each costs a line between the sizes."""
    peaks: list[tuple[int, float, float, float, float]] = []
    for n in sizes:
        d = root / f"n{n}"
        d.mkdir()
        path, _, _ = record(d / "rec", envs, d / "live.sqlite", n, game=LS20)
        without = d / "without.sqlite"
        mb_with = _import(d / "with.sqlite", path, envs)[1]
        mb_frames = _import(without, path)[1]
        audit = (without, _only_card(without), envs, "--json")
        peaks.append((n, mb_with, mb_frames, _audit(*audit)[1], _audit(*audit, "--decide")[1]))
        shutil.rmtree(d)  # a 100,000-line recording is 1.3 GB
    out = [f"peak memory by length, public ls20, random agent ({', '.join(f'{n:,}' for n in sizes)} lines):"]
    whats = ("import --environments", "import without the code", "audit --environments of it", "  with --decide")
    for i, what in enumerate(whats, 1):
        mbs = [p[i] for p in peaks]
        n0, n1 = peaks[0][0], peaks[-1][0]
        per_line = (mbs[-1] - mbs[0]) * 1e6 / (n1 - n0)
        out.append(
            f"  {what:28s} {' / '.join(f'{mb:.0f}' for mb in mbs)} MB; {per_line:.0f} bytes a line between "
            f"{n0:,} and {n1:,} lines"
        )
    return out


def head(root: Path, envs: Path, actions: int, game: str) -> list[str]:
    """The same figures for a recording of arc-agi-3-benchmarking's head (frame lines that name their actions)."""
    from tests.head_harness import run_head

    live_db = root / "live.sqlite"
    with Ledger.open(live_db) as led:
        arc = arcade(envs)
        capture = led.attach(arc)
        run = run_head(arc, root / "rec", [game], 11, max_actions=actions)
        capture.detach()
    path = run.agents[0].path
    sent = []
    for raw in path.read_bytes().splitlines():
        d = json.loads(raw)["data"]
        if isinstance(d, dict) and "frame" in d:
            sent.append((d["action_input"]["id"], d["action_input"]["data"]))
    n = len(sent)
    step_s = bare(envs, sent, game)
    dbs = {"with": root / "hwith.sqlite", "without": root / "hwithout.sqlite"}
    t_with, mb_with, _ = _import(dbs["with"], path, envs)
    t_without, mb_without, _ = _import(dbs["without"], path)
    audits = {k: _audit(db, run.agents[0].guid, envs)[0] for k, db in dbs.items()}
    t_live = _audit(live_db, run.card_id, envs)[0]
    return [
        f"{game}, arc-agi-3-benchmarking head recording (action_input on every line), {n:,} actions, "
        f"{run.agents[0].forced} RESETs forced after GAME_OVER; bare steps {step_s:.2f} s CPU:",
        f"  import --environments:       {t_with:6.2f} s, {n / t_with:5.0f} lines/s, {t_with / step_s:4.1f}x the bare "
        f"steps, peak {mb_with:.0f} MB",
        f"  import without the code:     {t_without:6.2f} s, {n / t_without:5.0f} lines/s, peak {mb_without:.0f} MB",
        f"  audit --environments of each: {audits['with']:.2f} s and {audits['without']:.2f} s; of the live card "
        f"{t_live:.2f} s ({audits['with'] / t_live:.2f}x and {audits['without'] / t_live:.2f}x)",
    ]


def run(quick: bool) -> list[str]:
    out: list[str] = []
    public = os.environ.get("LEDGER_BENCH_LS20")
    if public and not (Path(public) / "ls20").is_dir():
        out.append(
            f"LEDGER_BENCH_LS20={public}: no ls20 folder there (environment_files/ls20/...): the public ls20 is skipped"
        )
        public = None
    sizes = (60,) if quick else (400, 5000)
    runs = [(GAME, a, False) for a in sizes]
    if public:
        runs += [(LS20, a, False) for a in sizes]
        runs.append((LS20, 400 if quick else max(sizes), True))
    for game, actions, solving in runs:
        with _workspace(public if game == LS20 else None) as (root, envs):
            out += one_size(root, envs, actions, game, solving)
    for game in [GAME, *([LS20] if public else [])]:
        with _workspace(public if game == LS20 else None) as (root, envs):
            out += head(root, envs, 60 if quick else 2_100, game)
    if public:
        with _workspace(public) as (root, envs):
            out += by_length(root, envs, (2_000, 10_000) if quick else (20_000, 100_000))
    return out
