"""joinplank/arc-agi-3-benchmarking (package ``arcagi3``) played through a real ``ledger serve`` on 127.0.0.1: the
token counts it sends in each action's reasoning are its cards' usage, its results JSON and ``costs.json`` (written
as ``save_result`` and ``CheckpointManager.save_state`` write them) give its cards their usage and cost once, and
``compare --group`` shows the cost per level completed beside the scores.

The client sends what that harness sends (see tests/test_serve_rest_harness.py): a RESET with ``card_id`` and a
string reasoning, every other action with a reasoning object whose ``"tokens:"`` is the run's running
``[prompt, completion]`` total. It closes a card that WINs and leaves the others open, as the harness does.
"""

from __future__ import annotations

import copy
import json
import shutil
import signal
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger
from ledger.domain.events import RunUsage, card_stream, decode
from tests.cli_run import in_process
from tests.rest_agent import Arcagi3Client, start_server

GAME = "cnt3-0000000a"  # ACTION1 twice completes level 1, three more level 2, two more WIN
CONFIG = "gpt-4o-mini-2024-07-18"
IN_PRICE, OUT_PRICE = 0.15 / 1e6, 0.6 / 1e6  # models.yml pricing, per token


class Agent(Arcagi3Client):
    """One ``MultimodalAgent``: one card, one game, one running total of tokens and cost."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.prompt_cost = self.completion_cost = 0.0
        self.actions: list[dict[str, Any]] = []
        self.card = ""
        self.state = ""

    def model_call(self, n: int) -> None:
        p, c = 1500 + 41 * n, 90 + 3 * n
        self.prompt += p
        self.completion += c
        self.prompt_cost += p * IN_PRICE
        self.completion_cost += c * OUT_PRICE

    def play(self, tags: list[str], actions: int, *, failed_call_at_end: bool = False) -> None:
        self.card = self.open(GAME, tags)
        guid = self.reset(self.card, GAME)["guid"]
        for n in range(1, actions + 1):
            self.model_call(n)
            reasoning = {
                "analysis": f"step {n}",
                "action": "ACTION1",
                "human_action": "press",
                "reasoning": "count up",
                "expected": "a level completes",
            }
            state = self.action1(GAME, guid, reasoning)
            self.state = state["state"]
            self.actions.append({"action_num": n, "action": "ACTION1", "result_state": self.state})
        if failed_call_at_end:
            # A model answer the agent could not parse: its tokens count, no action is sent, the loop ends.
            self.model_call(actions + 1)
        if self.state == "WIN":
            self.post("/api/scorecard/close", {"card_id": self.card})

    def totals(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``total_cost`` and ``total_usage`` as the agent's ``Cost`` and ``Usage`` dump them."""
        cost = {
            "prompt_cost": self.prompt_cost,
            "completion_cost": self.completion_cost,
            "reasoning_cost": None,
            "total_cost": self.prompt_cost + self.completion_cost,
        }
        usage = {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        return cost, usage

    def save_result(self, folder: Path) -> Path:
        """``arcagi3.utils.task_utils.save_result``: ``GameResult.model_dump(mode="json")``, indent 2."""
        cost, usage = self.totals()
        now = datetime.now(UTC)
        doc = {
            "game_id": GAME,
            "config": CONFIG,
            "final_score": 0,
            "final_state": self.state,
            "actions_taken": len(self.actions),
            "duration_seconds": 12.5,
            "total_cost": cost,
            "usage": usage,
            "actions": [
                {**a, "action_data": None, "reasoning": {"human_action": "press"}, "result_score": 0, "cost": None}
                for a in self.actions
            ],
            "final_memory": "## Memory",
            "timestamp": now.isoformat(),
            "scorecard_url": f"{self.url}/scorecards/{self.card}",
            "card_id": self.card,
        }
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{GAME}_{CONFIG}_{now.strftime('%Y%m%d_%H%M%S')}_{self.card[:4]}.json"
        path.write_text(json.dumps(doc, indent=2))
        return path

    def save_checkpoint(self, root: Path) -> Path:
        """``CheckpointManager.save_state``: ``.checkpoint/<card_id>/`` with metadata.json and costs.json."""
        cost, usage = self.totals()
        folder = root / ".checkpoint" / self.card
        folder.mkdir(parents=True, exist_ok=True)
        meta = {
            "card_id": self.card,
            "config": CONFIG,
            "game_id": GAME,
            "guid": "g",
            "max_actions": 40,
            "retry_attempts": 3,
            "num_plays": 1,
            "action_counter": len(self.actions),
            "current_play": 1,
            "play_action_counter": len(self.actions),
            "previous_score": 0,
            "use_vision": True,
            "checkpoint_timestamp": datetime.now(UTC).isoformat(),
        }
        (folder / "metadata.json").write_text(json.dumps(meta, indent=2))
        (folder / "costs.json").write_text(json.dumps({"total_cost": cost, "total_usage": usage}, indent=2))
        (folder / "action_history.json").write_text(json.dumps(self.actions, indent=2))
        (folder / "memory.txt").write_text("## Memory")
        return folder / "costs.json"


@dataclass
class Run:
    db: Path
    won: Agent
    left: Agent
    other: Agent


def ledger(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The server is the real program; what these tests run against its ledger afterwards is plain output.
    return in_process("--db", str(db), *args)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Three agents through one server: one WINs (its card closed), one leaves its card open, one of another tag.
    Played once for the module: each test gets a copy (``run``)."""
    db = tmp_path_factory.mktemp("served") / "served.sqlite"
    proc, url = start_server(db)
    try:
        won, left, other = Agent(url), Agent(url), Agent(url)
        won.play(["bench", CONFIG], 7)
        left.play(["bench", CONFIG], 3, failed_call_at_end=True)
        other.play(["rival"], 5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 130, proc.returncode
    assert won.state == "WIN" and left.state == "NOT_FINISHED"
    for agent in (won, left, other):
        agent.session.close()
    return Run(db, won, left, other)


@pytest.fixture()
def run(served: Run, tmp_path: Path) -> Run:
    """The served ledger copied (its file as the server left it) and the agents' tallies, this test's own."""
    db = tmp_path / served.db.name
    for part in served.db.parent.glob(served.db.name + "*"):
        if not part.name.endswith("-shm"):
            shutil.copy2(part, db.parent / part.name)
    return Run(db, *copy.deepcopy((served.won, served.left, served.other)))


def usage_events(db: Path, card: str) -> list[RunUsage]:
    with Ledger.open(db) as led:
        return [decode(e.body) for e in led.store.read_stream(card_stream(card)) if e.type == "run_usage"]  # type: ignore[misc]


def cards_json(db: Path) -> dict[str, dict[str, Any]]:
    r = ledger(db, "cards", "--columns", "tokens", "--columns", "cost", "--json")
    assert r.returncode == 0, r.stderr
    return {c["card_id"]: c for c in json.loads(r.stdout)}


def test_the_token_counts_sent_in_reasoning_are_the_served_cards_usage(run: Run) -> None:
    listed = cards_json(run.db)
    total = run.won.prompt + run.won.completion
    assert (listed[run.won.card]["tokens"], listed[run.won.card]["cost"]) == (total, None)
    # The last action's running total: the failed model call after it sent nothing.
    sent = (run.left.prompt - (1500 + 41 * 4)) + (run.left.completion - (90 + 3 * 4))
    assert listed[run.left.card]["tokens"] == sent
    text = ledger(run.db, "cards", "--columns", "tokens").stdout
    row = next(ln for ln in text.splitlines() if ln.startswith(run.left.card))
    assert f" {sent} " in row
    assert usage_events(run.db, run.won.card) == []  # derived when shown: nothing written


def test_its_results_json_and_costs_json_give_the_served_card_its_usage_once(run: Run, tmp_path: Path) -> None:
    results = run.won.save_result(tmp_path / "results" / CONFIG)
    costs = run.won.save_checkpoint(tmp_path)
    before = ledger(run.db, "export", run.won.card).stdout
    r = ledger(run.db, "import", str(results), str(costs))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert f"updated           {run.won.card}: 1 file, 0 lines, 0 plays, 1 event" in r.stdout
    assert f"already imported  {run.won.card}: 1 file" in r.stdout
    total = run.won.prompt + run.won.completion
    assert f"its usage attached to card {run.won.card}: {total} tokens" in r.stderr
    assert f"{costs}: its usage is on card {run.won.card} already (from arcagi3:{results.name})" in r.stderr
    assert "not used: " in r.stderr and "final_score (the card's score is the ledger's)" in r.stderr
    assert "Traceback" not in r.stderr
    (u,) = usage_events(run.db, run.won.card)
    cost = run.won.prompt_cost + run.won.completion_cost
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.model) == (
        run.won.prompt,
        run.won.completion,
        total,
        CONFIG,
    )
    assert u.cost == pytest.approx(cost) and u.run_id == f"arcagi3:{run.won.card}" and u.reasoning_tokens == 0
    assert ledger(run.db, "export", run.won.card).stdout == before
    assert ledger(run.db, "audit", run.won.card).returncode == 0
    listed = cards_json(run.db)
    assert listed[run.won.card]["tokens"] == total and listed[run.won.card]["cost"] == pytest.approx(cost)
    text = ledger(run.db, "cards", "--columns", "tokens", "--columns", "cost").stdout
    assert f"${cost:.4f}" in next(ln for ln in text.splitlines() if ln.startswith(run.won.card))

    again = ledger(run.db, "import", str(results), str(costs))
    held = f"already imported  {run.won.card}: 1 file\n"
    assert again.returncode == 0 and again.stdout.count(held) == 2, again.stdout
    assert len(usage_events(run.db, run.won.card)) == 1


def test_the_checkpoint_folder_gives_each_card_its_usage_and_later_snapshots_replace_earlier(
    run: Run, tmp_path: Path
) -> None:
    early = run.left.save_checkpoint(tmp_path)
    kept = early.read_bytes()
    run.won.save_checkpoint(tmp_path)
    r = ledger(run.db, "import", str(tmp_path / ".checkpoint"))
    assert r.returncode == 0 and r.stdout.count("updated ") == 2, (r.stdout, r.stderr)
    # The run went on (a checkpoint resumed, more model calls): its later total replaces the earlier one.
    run.left.model_call(9)
    later = run.left.save_checkpoint(tmp_path)
    r = ledger(run.db, "import", str(later))
    assert r.returncode == 0 and "a later snapshot of run arcagi3:" in r.stderr, r.stderr
    assert cards_json(run.db)[run.left.card]["tokens"] == run.left.prompt + run.left.completion
    assert len(usage_events(run.db, run.left.card)) == 2  # both kept on the chain, the later one counts
    # The earlier file again: said, nothing written; --strict refuses it.
    early.write_bytes(kept)
    r = ledger(run.db, "import", str(early))
    assert r.returncode == 0 and "Warning: " in r.stderr and "an earlier snapshot of run" in r.stderr, r.stderr
    strict = ledger(run.db, "import", "--strict", str(early))
    assert strict.returncode == 2 and "(--strict)" in strict.stdout, (strict.stdout, strict.stderr)
    assert len(usage_events(run.db, run.left.card)) == 2
    assert cards_json(run.db)[run.left.card]["tokens"] == run.left.prompt + run.left.completion


def test_a_file_that_is_not_the_cards_or_is_damaged_is_one_line_and_nothing_written(run: Run, tmp_path: Path) -> None:
    results = run.won.save_result(tmp_path / "r")
    doc = json.loads(results.read_text())
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({**doc, "card_id": "00000000-0000-0000-0000-000000000000"}))
    r = ledger(run.db, "import", str(unknown))
    assert r.returncode == 1 and "is not in the ledger: its usage has no card to go with" in r.stdout, r.stdout
    other_game = tmp_path / "other_game.json"
    other_game.write_text(json.dumps({**doc, "game_id": "clk2-0000000b"}))
    r = ledger(run.db, "import", str(other_game))
    assert r.returncode == 1 and "which the card did not: its usage is not this card's" in r.stdout, r.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**doc, "usage": {**doc["usage"], "prompt_tokens": "many"}}))
    r = ledger(run.db, "import", str(bad))
    assert r.returncode == 2 and "usage.prompt_tokens is 'many', not a count of tokens" in r.stdout, r.stdout
    assert "Traceback" not in r.stderr + r.stdout
    no_card = tmp_path / "somewhere" / "costs.json"
    no_card.parent.mkdir()
    no_card.write_text(json.dumps({"total_cost": doc["total_cost"], "total_usage": doc["usage"]}))
    r = ledger(run.db, "import", str(no_card))
    assert r.returncode == 2 and "which card it is, nothing says" in r.stdout, r.stdout
    assert usage_events(run.db, run.won.card) == []


def test_compare_by_group_shows_cost_per_level_completed_beside_scores(run: Run, tmp_path: Path) -> None:
    before = ledger(run.db, "compare", "--group", "bench", "--json")
    assert json.loads(before.stdout)["tags"][0]["cost"] is None
    assert "no card carries a cost" in ledger(run.db, "compare", "--group", "bench").stdout
    for agent in (run.won, run.left, run.other):
        assert ledger(run.db, "import", str(agent.save_result(tmp_path / "results"))).returncode == 0
    r = ledger(run.db, "compare", "--group", "bench", "--group", "rival", "--json")
    assert r.returncode == 0, r.stderr
    tags = {t["tag"]: t for t in json.loads(r.stdout)["tags"]}
    cost = sum(a.prompt_cost + a.completion_cost for a in (run.won, run.left))
    bench = tags["bench"]["cost"]
    assert (bench["cards"], bench["levels_completed"]) == (2, 3 + 1)  # the WIN's 3 levels, the open card's 1
    assert bench["cost"] == pytest.approx(cost) and bench["cost_per_level"] == pytest.approx(cost / 4)
    rival = tags["rival"]["cost"]
    assert rival["levels_completed"] == 2
    assert rival["cost_per_level"] == pytest.approx((run.other.prompt_cost + run.other.completion_cost) / 2)
    text = ledger(run.db, "compare", "--group", "bench", "--group", "rival").stdout
    assert f"${cost / 4:.4f} per level completed" in text
    ranked = next(ln for ln in text.splitlines() if ln.strip().startswith("1. bench"))
    assert "median" in ranked and f"cost ${cost:.4f} over 2 card(s) with one, 4 level(s) completed" in ranked
