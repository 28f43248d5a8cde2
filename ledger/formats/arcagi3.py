"""The files joinplank/arc-agi-3-benchmarking (package ``arcagi3``, a REST client) writes of a run: the built-in
reader behind the same interface as the plugins (:mod:`ledger.formats.readers`).

That harness plays through the REST API (``ledger serve`` captures its cards as they are played), so its files
decide no action: they hold the run's usage, which they give to the card they name.

- the results JSON, ``{save_results_dir}/{game_id}_{config}_{timestamp}.json``: ``GameResult.model_dump``, with
  ``card_id``, ``game_id``, ``config`` (the models.yml entry), ``usage`` (``prompt_tokens``,
  ``completion_tokens``, ``total_tokens``, ``completion_tokens_details``) and ``total_cost`` (``prompt_cost``,
  ``completion_cost``, ``reasoning_cost``, ``total_cost``), the run's totals over every play of the card;
- ``.checkpoint/<card_id>/costs.json``: ``{"total_cost": {...}, "total_usage": {...}}``, the same totals as of the
  checkpoint; its card and model are in ``metadata.json`` beside it (``card_id``, ``config``, ``game_id``).

Both are snapshots of one running total (the agent adds each model call's tokens to it), so every file of a card
gives the same run (``run_id`` ``arcagi3:<card_id>``): the import keeps the latest snapshot, never a sum.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ledger.formats.readers import Decided, Spent

#: Larger files are not looked into (a results file of 10,000 actions with their reasoning is a few MB).
MAX_BYTES = 256 << 20
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_RESULT_KEYS = frozenset({"game_id", "config", "usage", "total_cost", "actions", "card_id"})
_COSTS_KEYS = frozenset({"total_cost", "total_usage"})
#: What the ledger takes of a results file; the other keys are named as not used.
_RESULT_USED = _RESULT_KEYS
_WHY_NOT = {
    "actions": "the per-action records (the card's own actions, with the reasoning the harness sent, are the record)",
    "final_score": "final_score (the card's score is the ledger's)",
    "final_state": "final_state (the card's states are the ledger's)",
}


def run_id(card_id: str) -> str:
    """The run every file of the harness about ``card_id`` gives (one agent, one running total, per card)."""
    return f"arcagi3:{card_id}"


class Arcagi3Files:
    """The results JSON and ``costs.json`` of joinplank/arc-agi-3-benchmarking."""

    name = "arcagi3"

    def reads(self, path: Path) -> bool:
        if path.suffix != ".json":
            return False
        doc = _load(path)
        return isinstance(doc, dict) and (doc.keys() >= _RESULT_KEYS or _is_costs(path, doc))

    def read(self, path: Path) -> list[Decided]:
        doc = _load(path)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        if doc.keys() >= _RESULT_KEYS:
            return [_result(path, doc)]
        return [_costs(path, doc)]


def _load(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None


def _is_costs(path: Path, doc: dict[str, Any]) -> bool:
    return path.name == "costs.json" and doc.keys() == _COSTS_KEYS


def _result(path: Path, doc: dict[str, Any]) -> Decided:
    card = doc["card_id"]
    if not isinstance(card, str) or not card:
        raise ValueError("its card_id is not a card id (the harness writes the scorecard it opened)")
    game = doc["game_id"]
    if not isinstance(game, str):
        raise ValueError("its game_id is not a string")
    spent, notes = _spent(card, doc["config"], doc["usage"], doc["total_cost"], "usage", "total_cost")
    rest = [k for k in doc if k not in _RESULT_USED]
    if rest:
        notes.append("not used: " + "; ".join(_WHY_NOT.get(k, k) for k in rest))
    return Decided(card_id=card, usage=spent, game_ids=[game], notes=notes)


def _costs(path: Path, doc: dict[str, Any]) -> Decided:
    meta = _load(path.parent / "metadata.json")
    meta = meta if isinstance(meta, dict) else {}
    card = meta.get("card_id")
    if not isinstance(card, str) or not card:
        if not _UUID.match(path.parent.name):
            raise ValueError(
                "no metadata.json with a card_id beside it and its folder is not named by a card id (the harness "
                "writes .checkpoint/<card_id>/costs.json): which card it is, nothing says"
            )
        card = path.parent.name
    game = meta.get("game_id")
    spent, notes = _spent(card, meta.get("config"), doc["total_usage"], doc["total_cost"], "total_usage", "total_cost")
    if not meta:
        notes.append("no metadata.json beside it: the card is its folder's name, the model is not known")
    return Decided(card_id=card, usage=spent, game_ids=[game] if isinstance(game, str) else [], notes=notes)


def _count(obj: dict[str, Any], key: str, where: str) -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{where}.{key} is {v!r}, not a count of tokens")
    return v


def _spent(card: str, config: Any, usage: Any, cost: Any, usage_key: str, cost_key: str) -> tuple[Spent, list[str]]:
    if not isinstance(usage, dict):
        raise ValueError(f"its {usage_key} is not an object")
    if cost is not None and not isinstance(cost, dict):
        raise ValueError(f"its {cost_key} is not an object")
    notes = []
    total = cost.get("total_cost") if isinstance(cost, dict) else None
    if total is not None and (isinstance(total, bool) or not isinstance(total, int | float) or total < 0):
        raise ValueError(f"{cost_key}.total_cost is {total!r}, not a cost")
    if total is None:
        notes.append(f"no {cost_key}.total_cost: the card's cost is not known")
    details = usage.get("completion_tokens_details")
    reasoning = (
        _count(details, "reasoning_tokens", f"{usage_key}.completion_tokens_details")
        if isinstance(details, dict)
        else None
    )
    other: dict[str, Any] = {}
    if isinstance(cost, dict) and len(cost) > 1:
        other["cost_breakdown"] = {k: v for k, v in cost.items() if k != "total_cost"}
    if isinstance(details, dict):
        other["completion_tokens_details"] = details
    spent = Spent(
        total_tokens=_count(usage, "total_tokens", usage_key),
        input_tokens=_count(usage, "prompt_tokens", usage_key),
        output_tokens=_count(usage, "completion_tokens", usage_key),
        cost=None if total is None else float(total),
        model=config if isinstance(config, str) and config else None,
        run_id=run_id(card),
        reasoning_tokens=reasoning,
        other=other or None,
    )
    read = {"prompt_tokens", "completion_tokens", "total_tokens", "completion_tokens_details"}
    rest = [k for k in usage if k not in read]
    if rest:
        notes.append(f"{usage_key} keys not used: {', '.join(rest)}")
    return spent, notes
