"""The usage and cost kept with a card: ``RunUsage`` events, and token counts in a REST harness's reasoning."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import msgspec

from ledger.domain.events import RunUsage, card_stream, decode

if TYPE_CHECKING:
    from ledger.ledger import Ledger


def usage_lines(usages: list[RunUsage]) -> list[str]:
    out = []
    for u in usages:
        head = f"run {u.run_id or u.folder}" + (f", model {u.model}" if u.model else "")
        figures = []
        if u.total_tokens is not None:
            figures.append(f"{u.total_tokens} tokens")
        if u.cost is not None:
            figures.append(_cost(u.cost, f"${u.cost!r}"))
        parts = [
            f"{n} {what}"
            for n, what in (
                (u.input_tokens, "input"),
                (u.output_tokens, "output"),
                (u.cached_tokens, "cached"),
                (u.reasoning_tokens, "reasoning"),
                (u.cache_write_tokens, "cache-write"),
            )
            if n is not None
        ]
        parts += [f"{k} {json.dumps(v)}" for k, v in (u.usage_other or {}).items()]
        out.append(head + (": " + ", ".join(figures) if figures else "") + (f" ({', '.join(parts)})" if parts else ""))
        for lv in u.levels:
            cost = _cost(lv.cost, f"${lv.cost:.4f}") if lv.cost is not None else "cost not given"
            tokens = f", {lv.tokens} tokens" if lv.tokens is not None else ""
            out.append(f"  level {lv.levels_completed + 1}: {lv.steps} step(s), {cost}{tokens}")
    return out


def _cost(cost: float, shown: str) -> str:
    # A run that reports 0 (no price configured for its model) did not run for free: say what the file says.
    return f"cost reported as {cost!r}" if cost == 0 else shown


def card_usage(ledger: Ledger, card_id: str) -> list[RunUsage]:
    bodies, _, _ = ledger.store.read_bodies(card_stream(card_id))
    return current(_usage_events(bodies))


def _usage_events(bodies: Iterable[bytes]) -> list[RunUsage]:
    return [cast(RunUsage, decode(b)) for b in bodies if bytes(b).startswith(b'{"type":"run_usage"')]


def _snapshot_key(u: RunUsage) -> tuple[str, str] | None:
    # A reader's files of one run each give its running total (run_id set, folder "<reader>:<file>"): the latest
    # stands for the run. A run folder's usage (its folder's name, no reader) is a whole of its own.
    if u.run_id is None or ":" not in u.folder:
        return None
    return u.folder.split(":", 1)[0], u.run_id


def current(usages: Sequence[RunUsage]) -> list[RunUsage]:
    last = {k: i for i, u in enumerate(usages) if (k := _snapshot_key(u)) is not None}
    return [u for i, u in enumerate(usages) if (k := _snapshot_key(u)) is None or last[k] == i]


def same_run(usages: Sequence[RunUsage], usage: RunUsage) -> RunUsage | None:
    key = _snapshot_key(usage)
    return next((u for u in reversed(usages) if key is not None and _snapshot_key(u) == key), None)


class _Said(msgspec.Struct):
    game_id: str = ""
    reasoning: Any = None


_said = msgspec.json.Decoder(_Said)


def reasoning_tokens(bodies: Iterable[bytes]) -> int | None:
    """The tokens a REST harness (arc-agi-3-benchmarking's running ``"tokens:"``) says it used, per game its last
    action's, added up; None when no action says any. Read from the actions: they are on the chain already."""
    last: dict[str, int] = {}
    for b in bodies:
        raw = bytes(b)
        if not raw.startswith(b'{"type":"action_taken"') or b'"tokens:"' not in raw:
            continue
        said = _said.decode(raw)
        t = said.reasoning.get("tokens:") if isinstance(said.reasoning, dict) else None
        if isinstance(t, list) and len(t) == 2 and all(type(n) is int and n >= 0 for n in t):
            last[said.game_id] = t[0] + t[1]
    return sum(last.values()) if last else None


def usage_totals(ledger: Ledger, card_ids: Sequence[str]) -> dict[str, tuple[int | None, float | None]]:
    """card id -> (tokens, cost) of the runs' usage kept with it, else the tokens its actions' reasoning says."""
    out: dict[str, tuple[int | None, float | None]] = {}
    for cid in card_ids:
        bodies, _, _ = ledger.store.read_bodies(card_stream(cid))
        usages = current(_usage_events(bodies))
        if not usages:
            out[cid] = (reasoning_tokens(bodies), None)
            continue
        tokens = [u.total_tokens for u in usages if u.total_tokens is not None]
        costs = [u.cost for u in usages if u.cost is not None]
        out[cid] = (sum(tokens) if tokens else None, sum(costs) if costs else None)
    return out


def usage_costs(ledger: Ledger, card_ids: Sequence[str]) -> dict[str, float]:
    """card id -> the cost its runs' usage gives, for the cards whose usage gives one (only usage events read)."""
    found: dict[str, list[RunUsage]] = {}
    streams = [card_stream(c) for c in card_ids]
    sql = "SELECT stream, body FROM events WHERE type = 'run_usage' AND stream IN ({}) ORDER BY stream, version"
    for stream, body in rows_in(ledger, sql, streams):
        found.setdefault(stream, []).append(cast(RunUsage, decode(bytes(body))))
    out: dict[str, float] = {}
    for cid, stream in zip(card_ids, streams, strict=True):
        costs = [u.cost for u in current(found.get(stream, [])) if u.cost is not None]
        if costs:
            out[cid] = sum(costs)
    return out


def rows_in(ledger: Ledger, sql: str, values: Sequence[Any], chunk: int = 500) -> Iterator[Any]:
    """The rows of ``sql`` whose ``IN ({})`` is each ``chunk`` of ``values`` in turn (a query per chunk)."""
    from ledger.store.summary import query

    for i in range(0, len(values), chunk):
        part = list(values[i : i + chunk])
        yield from query(ledger.store, sql.format(", ".join("?" * len(part))), part)
