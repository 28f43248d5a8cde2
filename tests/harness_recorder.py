"""Recordings written the way the ARC-AGI-3-Agents harness writes them, from seeded agents on the real toolkit.

This rebuilds, for tests, what ``agents/swarm.py``, ``agents/agent.py`` and ``agents/recorder.py`` do (the code is
not vendored): one toolkit card per swarm, one ``Arcade.make`` per agent, and per agent one file
``{game_id}.{agent}.{uuid}.recording.jsonl`` whose lines are ``{"timestamp", "data"}``. Frame lines are
``FrameData.model_dump`` of the harness's ``_convert_raw_frame_data``, which does not copy ``action_input``
(so every line says RESET). LLM-style agents write token-count side lines and a prompt line at cleanup; every agent
records ``scorecard.get(game_id)`` last (``{}`` for local cards). Old-style files say ``score``/``win_score``.
"""

from __future__ import annotations

import json
import random
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from arcengine import FrameData, GameAction, GameState

from tests.toolkit import ENV_DIR, arcade

HARNESS_GAMES = Path(__file__).resolve().parent / "harness_games"

#: Cells the test games' ACTION6 targets are in (column, row of the 8x8 grid).
TARGET_CELLS = [(2, 3), (5, 5)]


class Recorder:
    """``agents/recorder.py``: one JSON object per line, appended."""

    def __init__(self, folder: Path, prefix: str, rng: random.Random, old_style: bool = False) -> None:
        self.guid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.path = folder / f"{prefix}.{self.guid}.recording.jsonl"
        self.old_style = old_style
        folder.mkdir(parents=True, exist_ok=True)

    def record(self, data: Any) -> None:
        if self.old_style and isinstance(data, dict) and "frame" in data:
            data = {
                ("score" if k == "levels_completed" else "win_score" if k == "win_levels" else k): v
                for k, v in data.items()
            }
        event = {"timestamp": datetime.now(UTC).isoformat(), "data": data}
        with open(self.path, "a", encoding="utf-8") as f:
            json.dump(event, f)
            f.write("\n")


def convert(raw: Any) -> FrameData:
    """``Agent._convert_raw_frame_data``, bug included: ``action_input`` is not copied."""
    return FrameData(
        game_id=raw.game_id,
        frame=[arr.tolist() if hasattr(arr, "tolist") else arr for arr in raw.frame],
        state=raw.state,
        levels_completed=raw.levels_completed,
        win_levels=raw.win_levels,
        guid=raw.guid,
        full_reset=raw.full_reset,
        available_actions=raw.available_actions,
    )


@dataclass
class SeededAgent:
    """A harness agent whose choices come from a seeded RNG: it RESETs, dies, wins, clicks, acts after the end."""

    game_id: str
    kind: str
    env: Any
    rng: random.Random
    recorder: Recorder
    max_actions: int
    llm: bool = False
    action_counter: int = 0
    tokens: int = 0
    frames: list[FrameData] = field(default_factory=lambda: [FrameData(levels_completed=0)])
    sent: list[tuple[int, int | None, int | None]] = field(default_factory=list)

    def done(self) -> bool:
        last = self.frames[-1]
        return self.action_counter > self.max_actions or (last.state is GameState.WIN and self.rng.random() < 0.3)

    def choose(self, latest: FrameData) -> tuple[GameAction, dict[str, Any]]:
        r = self.rng.random()
        if latest.state in (GameState.GAME_OVER, GameState.WIN) and r < 0.5:
            return GameAction.RESET, {}
        if r < 0.07:
            return GameAction.RESET, {}
        a = self.rng.choice([1, 1, 1, 1, 2, 3, 4, 5, 6, 6, 7])
        if a == 6:
            cx, cy = (
                self.rng.choice(TARGET_CELLS)
                if self.rng.random() < 0.4
                else (self.rng.randint(0, 7), self.rng.randint(0, 7))
            )
            return GameAction.ACTION6, {"x": cx * 8 + self.rng.randint(0, 7), "y": cy * 8 + self.rng.randint(0, 7)}
        # Deaths are rarer than other actions so runs get somewhere before they end.
        if a in (3, 7) and self.rng.random() < 0.6:
            a = 1
        return GameAction.from_id(a), {}

    def step(self) -> None:
        """One turn of ``Agent.main``."""
        action, data = self.choose(convert(self.env.observation_space))
        if self.llm:
            self.tokens += 1000 + self.action_counter
            self.recorder.record(
                {
                    "tokens": 1000,
                    "total_tokens": self.tokens,
                    "conversation_length": 2 * self.action_counter + 2,
                    "assistant": "",
                }
            )
        raw = self.env.step(action, data=data, reasoning={"text": "seeded"})
        self.sent.append((action.value, data.get("x"), data.get("y")))
        frame = convert(raw)
        self.frames.append(frame)
        self.recorder.record(json.loads(frame.model_dump_json()))
        self.action_counter += 1

    def cleanup(self, scorecard: Any) -> None:
        if self.llm:
            self.recorder.record({"system_prompt": "play", "final_conversation_length": 9, "total_tokens": self.tokens})
        if scorecard:
            self.recorder.record(scorecard.get(self.game_id))


@dataclass
class SwarmRun:
    """One swarm: the toolkit card (taken before close) and each agent's recording."""

    card_id: str
    expected: dict[str, Any]
    agents: list[SeededAgent]


def game_dir(folder: Path, name: str, source: str) -> Any:
    """A game folder ``name`` with ``source`` as its game file (game id ``NAME-01``), as ``game_files`` finds it."""
    from ledger.toolkit import game_files

    d = folder / name
    d.mkdir()
    (d / "metadata.json").write_text(json.dumps({"game_id": f"{name}-01"}))
    (d / f"{name}.py").write_text(source)
    return game_files.scan_games(folder)[f"{name}-01"]


def environments(folder: Path) -> Path:
    """The test games and the harness test games in one environment_files tree (the toolkit scans one folder)."""
    for src in (ENV_DIR, HARNESS_GAMES):
        for game in src.iterdir():
            if game.is_dir() and not (folder / game.name).exists():
                shutil.copytree(game, folder / game.name)
    return folder


def run_swarm(
    folder: Path,
    games: list[str],
    seed: int,
    *,
    env_dir: Path = ENV_DIR,
    max_actions: int = 130,
    llm: bool = False,
    old_style: bool = False,
    arc: Any = None,
) -> SwarmRun:
    """``Swarm.main`` with seeded agents: one card, one agent per game, their turns interleaved as threads would.

    ``arc``: the Arcade to play on (one a ledger captures live), else a new one over ``env_dir``.
    """
    rng = random.Random(seed)
    arc = arc if arc is not None else arcade(env_dir)
    card_id = arc.open_scorecard(tags=["agent", "seeded"])
    agents = []
    for g in games:
        env = arc.make(g, scorecard_id=card_id)
        kind = "llmtemplate.model-x.anim3" if llm else f"seededrandom.{max_actions}"
        rec = Recorder(folder, f"{g}.{kind}", rng, old_style=old_style)
        agents.append(SeededAgent(g, kind, env, random.Random(rng.random()), rec, max_actions, llm=llm))
    live = list(agents)
    while live:
        a = rng.choice(live)
        if a.done():
            live.remove(a)
            continue
        a.step()
    expected = json.loads(arc.get_scorecard(card_id).model_dump_json())
    scorecard = arc.close_scorecard(card_id)
    for a in agents:
        a.cleanup(scorecard)
    return SwarmRun(card_id, expected, agents)


def game_entry(doc: dict[str, Any], game_id: str) -> dict[str, Any]:
    """A scorecard document's entry for one game (``environments[i]`` whose id is the game id)."""
    found = [e for e in doc["environments"] if e.get("id") == game_id]
    assert len(found) == 1, (game_id, [e.get("id") for e in doc["environments"]])
    return found[0]
