"""Files written the way arc-agi-3-benchmarking writes them at 1f4a8cc (arc-agi 0.9.8), from seeded agents on the real
toolkit (the harness's code is not vendored; this rebuilds what ``benchmarking/base.py``, ``agent.py``,
``recorder.py`` and ``recording.py`` write).

Per agent: the recording ``{game_id}.benchmarkingagent.{config}.anim3.{uuid}.recording.jsonl`` whose frame lines
carry the toolkit's ``action_input`` (``_convert_raw_frame_data`` copies it: ``{"id": 0}`` for RESET, the real id
and data otherwise, the model's metadata as ``reasoning``), a token line (``track_tokens``) before each model call,
a ``system_prompt`` side line and ``scorecard.get(game_id)`` at cleanup; and the run folder
``{same prefix}.{run_id}/`` with ``run_meta.json`` (rewritten after every step) and one ``step_NNN.json`` a step.
After GAME_OVER the harness forces a RESET without a model call: its step file has no usage and no token line is
written. A model answer it cannot parse is asked again (``retries``): a token line each attempt, the step's usage
their sum. ``interrupt`` plays a Ctrl-C: the card is closed and every agent cleaned up while one agent thread
answers one more action after its ``{}`` line.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from arcengine import FrameData, GameAction, GameState

CONFIG = "local-model"
MODEL = "stand-in-model-1"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def convert(raw: Any) -> FrameData:
    """``Agent._convert_raw_frame_data`` at 1f4a8cc: ``action_input`` copied."""
    kwargs: dict[str, Any] = {
        "game_id": raw.game_id,
        "frame": [arr.tolist() if hasattr(arr, "tolist") else arr for arr in raw.frame],
        "state": raw.state,
        "levels_completed": raw.levels_completed,
        "win_levels": raw.win_levels,
        "guid": raw.guid,
        "full_reset": raw.full_reset,
        "available_actions": raw.available_actions,
    }
    if raw.action_input is not None:
        kwargs["action_input"] = raw.action_input
    return FrameData(**kwargs)


def _usage(rng: random.Random) -> dict[str, Any]:
    prompt, completion = rng.randint(2000, 9000), rng.randint(50, 400)
    cost = round(prompt * 1e-6 + completion * 4e-6, 8)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "reasoning_tokens": completion // 2,
        "cached_tokens": prompt // 3,
        "cache_write_tokens": 0,
        "cost": cost,
        "cost_details": {"input": round(prompt * 1e-6, 8), "output": round(completion * 4e-6, 8)},
    }


def _add(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {k: a[k] + b[k] for k in a if k != "cost_details"}
    out["cost_details"] = {k: a["cost_details"].get(k, 0.0) + b["cost_details"].get(k, 0.0) for k in b["cost_details"]}
    return out


_ZERO = {
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "total_tokens": 0,
    "reasoning_tokens": 0,
    "cached_tokens": 0,
    "cache_write_tokens": 0,
    "cost": 0.0,
    "cost_details": {},
}


@dataclass
class HeadAgent:
    """One ``BenchmarkingAgent`` whose model is a seeded RNG."""

    game_id: str
    env: Any
    rng: random.Random
    folder: Path
    max_actions: int
    guid: str = ""
    path: Path = Path()
    run_dir: Path = Path()
    run_id: str = ""
    action_counter: int = 0
    step_counter: int = 0
    token_counter: int = 0
    total_usage: dict[str, Any] = field(default_factory=lambda: dict(_ZERO))
    frames: list[FrameData] = field(default_factory=lambda: [FrameData(levels_completed=0, win_levels=0)])
    started_at: str = ""
    done_: bool = False
    forced: int = 0

    def __post_init__(self) -> None:
        prefix = f"{self.game_id}.benchmarkingagent.{CONFIG}.anim3"
        self.guid = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.run_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"{prefix}.{self.guid}.recording.jsonl"
        self.run_dir = self.folder / f"{prefix}.{self.run_id}"
        self.run_dir.mkdir()
        self.started_at = _now()
        self._meta()

    def record(self, data: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            json.dump({"timestamp": _now(), "data": data}, f)
            f.write("\n")

    def _meta(self, outcome: str | None = None, ended: str | None = None) -> None:
        meta = {
            "run_id": self.run_id,
            "game_id": self.game_id,
            "agent_name": self.run_dir.name.rsplit(".", 1)[0],
            "model": MODEL,
            "started_at": self.started_at,
            "ended_at": ended,
            "duration_seconds": None,
            "total_steps": self.step_counter,
            "total_usage": self.total_usage,
            "outcome": outcome,
            "run_dir": f"recordings/{self.run_dir.name}",
        }
        (self.run_dir / "run_meta.json").write_text(json.dumps(meta, indent=2))

    def _save_step(self, parsed: Any, usage: dict[str, Any], retries: int, duration: float) -> None:
        self.step_counter += 1
        self.total_usage = _add(self.total_usage, usage)
        step = {
            "step": self.step_counter,
            "timestamp": _now(),
            "duration_seconds": duration,
            "model": MODEL,
            "messages_sent": [],
            "assistant_response": None if duration == 0 else "ACTION1",
            "reasoning": None,
            "parsed_action": parsed,
            "usage": usage,
            "retries": retries,
        }
        (self.run_dir / f"step_{self.step_counter:03d}.json").write_text(json.dumps(step, indent=2))
        self._meta()

    def done(self) -> bool:
        return self.done_ or self.frames[-1].state is GameState.WIN or self.action_counter > self.max_actions

    def _choose(self, latest: FrameData) -> tuple[GameAction, dict[str, Any], dict[str, Any]]:
        retries = 1 if self.rng.random() < 0.1 else 0
        usage = dict(_ZERO)
        for _ in range(retries + 1):
            u = _usage(self.rng)
            self.token_counter += u["total_tokens"]
            self.record(
                {
                    "tokens": u["total_tokens"],
                    "total_tokens": self.token_counter,
                    "conversation_length": 3,
                    "assistant": "",
                }
            )
            usage = _add(usage, u)
        r = self.rng.random()
        offered = [a for a in latest.available_actions if a != 0] or [1]
        if r < 0.06 and self.action_counter > 0:
            action, data = GameAction.RESET, {}
        else:
            a = self.rng.choice(offered)
            if a in (3, 7) and self.rng.random() < 0.5:
                a = offered[0]
            action = GameAction.from_id(a)
            data = {"x": self.rng.randint(0, 63), "y": self.rng.randint(0, 63)} if a == 6 else {}
        parsed: Any = {"action": action.name, **data} if action is GameAction.ACTION6 else action.name
        self._save_step(parsed, usage, retries, 1.25)
        return action, data, {"model": MODEL, "total_tokens": usage["total_tokens"], "cost": usage["cost"]}

    def step(self) -> None:
        """One turn of ``Agent.main``: a forced RESET after GAME_OVER (no model call), else the model's action."""
        latest = convert(self.env.observation_space)
        if latest.state in (GameState.GAME_OVER, GameState.NOT_PLAYED):
            action = GameAction.RESET
            data: dict[str, Any] = {}
            reasoning: dict[str, Any] = {}
            self.forced += 1
            self._save_step("RESET", dict(_ZERO), 0, 0.0)
        else:
            action, data, reasoning = self._choose(latest)
        raw = self.env.step(action, data=data, reasoning=reasoning)
        if raw is not None:
            frame = convert(raw)
            self.frames.append(frame)
            self.record(json.loads(frame.model_dump_json()))
        self.action_counter += 1

    def cleanup(self, scorecard: Any) -> None:
        if self.done_:
            return
        self.done_ = True
        state = self.frames[-1].state
        outcome = "WIN" if state is GameState.WIN else "GAME_OVER" if state is GameState.GAME_OVER else None
        self._meta(outcome, _now())
        self.record({"system_prompt": "play", "final_conversation_length": 3, "total_tokens": self.token_counter})
        if scorecard:
            self.record(scorecard.get(self.game_id))


@dataclass
class HeadRun:
    card_id: str
    agents: list[HeadAgent]
    expected: dict[str, Any]


def run_head(
    arc: Any, folder: Path, games: list[str], seed: int, *, max_actions: int = 60, interrupt: bool = False
) -> HeadRun:
    """``Swarm.main`` with seeded agents, turns interleaved as threads would; ``interrupt``: the Ctrl-C handler
    closes the card partway and the first live agent's thread answers one more action after its ``{}`` line."""
    rng = random.Random(seed)
    card_id = arc.open_scorecard(tags=["agent", "benchmarkingagent"])
    agents = [
        HeadAgent(g, arc.make(g, scorecard_id=card_id), random.Random(rng.random()), folder, max_actions) for g in games
    ]
    live = list(agents)
    turns = 0
    while live and not (interrupt and turns >= max_actions // 2):
        a = rng.choice(live)
        if a.done():
            live.remove(a)
            continue
        a.step()
        turns += 1
    expected = json.loads(arc.get_scorecard(card_id).model_dump_json())
    scorecard = arc.close_scorecard(card_id)
    for a in agents:
        a.cleanup(scorecard)
    if interrupt and live:
        late = live[0]
        late.done_ = False
        late.step()  # the agent thread was waiting on its model: its answer comes after the close
    return HeadRun(card_id, agents, expected)
