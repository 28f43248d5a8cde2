"""joinplank/arc-agi-3-benchmarking's results JSON and ``.checkpoint/<card_id>/costs.json``: a built-in reader. They
decide no action, only usage (see docs/import.md, 'Usage and cost'). Each file is a snapshot of one running total, so
every file of a card gives the same run (``arcagi3:<card_id>``): the import keeps the latest, never a sum."""

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
_WHY_NOT = {
    "actions": "the per-action records (the card's own actions, with the reasoning the harness sent, are the record)",
    "final_score": "final_score (the card's score is the ledger's)",
    "final_state": "final_state (the card's states are the ledger's)",
}


class Arcagi3Files:
    name = "arcagi3"

    def reads(self, path: Path) -> bool:
        if path.suffix != ".json":
            return False
        doc = json_object(path, MAX_BYTES)
        return doc is not None and (
            doc.keys() >= _RESULT_KEYS or (path.name == "costs.json" and doc.keys() == _COSTS_KEYS)
        )

    def read(self, path: Path) -> list[Decided]:
        doc = json_object(path, MAX_BYTES)
        if doc is None:
            raise ValueError("not a JSON object")
        if doc.keys() >= _RESULT_KEYS:
            return [_result(path, doc)]
        return [_costs(path, doc)]


def json_object(path: Path, max_bytes: int) -> dict[str, Any] | None:
    """The file's JSON object; None when larger than ``max_bytes``, unreadable or no object (no leading ``{``)."""
    try:
        if path.stat().st_size > max_bytes:
            return None
        with open(path, "rb") as f:
            if f.read(64).lstrip()[:1] != b"{":
                return None
            f.seek(0)
            doc = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _result(path: Path, doc: dict[str, Any]) -> Decided:
    card = doc["card_id"]
    if not isinstance(card, str) or not card:
        raise ValueError("its card_id is not a card id (the harness writes the scorecard it opened)")
    game = doc["game_id"]
    if not isinstance(game, str):
        raise ValueError("its game_id is not a string")
    spent, notes = _spent(card, doc["config"], doc["usage"], doc["total_cost"], "usage", "total_cost")
    rest = [k for k in doc if k not in _RESULT_KEYS]
    if rest:
        notes.append("not used: " + "; ".join(_WHY_NOT.get(k, k) for k in rest))
    return Decided(card_id=card, usage=spent, game_ids=[game], notes=notes)


def _costs(path: Path, doc: dict[str, Any]) -> Decided:
    meta = json_object(path.parent / "metadata.json", MAX_BYTES) or {}
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
        run_id=f"arcagi3:{card}",
        reasoning_tokens=reasoning,
        other=other or None,
    )
    read = {"prompt_tokens", "completion_tokens", "total_tokens", "completion_tokens_details"}
    rest = [k for k in usage if k not in read]
    if rest:
        notes.append(f"{usage_key} keys not used: {', '.join(rest)}")
    return spent, notes
