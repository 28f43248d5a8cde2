"""Baselines an ARC server reveals in its scorecard documents, and where a card's baselines came from.

The server's game list (``/api/games``) leaves ``baseline_actions`` out, so a client without local game files
learns a game's baselines (and with them its level count) only from a scorecard document the server sends: a run
the server scored carries the game's whole ``level_baseline_actions``; a run it could not score says why in its
``message``. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ledger.domain.document import ScorecardDoc
from ledger.domain.events import BaselineEntry
from ledger.domain.projection import CardState
from ledger.domain.scoring import MSG_NO_BASELINES, MSG_NO_INFO, MSG_SIZE_MISMATCH


def reported(doc: Any) -> dict[str, list[int] | None]:
    """game_id -> the baselines a scorecard document shows: a scored run's ``level_baseline_actions``, or None
    where the server says it has no baselines for the game. Games whose runs show neither are left out."""
    out: dict[str, list[int] | None] = {}
    envs = doc.get("environments") if isinstance(doc, dict) else None
    for env in envs if isinstance(envs, list) else []:
        gid = env.get("id") if isinstance(env, dict) else None
        runs = env.get("runs") if isinstance(env, dict) else None
        if not isinstance(gid, str) or not isinstance(runs, list):
            continue
        for run in runs:
            if not isinstance(run, dict):
                continue
            base = run.get("level_baseline_actions")
            if run.get("message") is None and isinstance(base, list) and _baselines(base):
                out[gid] = [int(b) for b in base]
                break
            if run.get("message") == MSG_NO_BASELINES:
                out[gid] = None
            elif run.get("message") == MSG_SIZE_MISMATCH and isinstance(actions := run.get("level_actions"), list):
                # The server's baselines cover fewer levels than this play completed, and their values are not
                # shown: zeros of the longest length that still makes the play unscored, as the server left it.
                # A run the server scored (in this document or a later one) replaces them with the real values.
                marks = len(actions) - (0 if run.get("state") == "WIN" else 1)
                if marks >= 2:
                    out[gid] = [0] * (marks - 1)
    return out


def _baselines(value: list[Any]) -> bool:
    return bool(value) and all(type(b) is int and b >= 0 for b in value)


def with_reported(
    current: Mapping[str, BaselineEntry], report: Mapping[str, list[int] | None], known: Iterable[str] = ()
) -> tuple[list[BaselineEntry], list[str]]:
    """The set ``current`` with the reported baselines in place (titles and tags kept), and the games the report
    tells something new about: baselines that differ from ``current``'s, or a game not ``known`` (already reported)
    before. Sorted; empty when the report tells nothing new."""
    out = dict(current)
    seen = set(known)
    news: list[str] = []
    for gid in sorted(report):
        new, old = report[gid], current.get(gid)
        if old is not None and (old.baseline_actions or None) == new:
            if gid not in seen:
                news.append(gid)
            continue
        out[gid] = (
            msgspec.structs.replace(old, baseline_actions=new)
            if old is not None
            else BaselineEntry(game_id=gid, baseline_actions=new)
        )
        news.append(gid)
    return list(out.values()), news


def unknown_baselines(card: CardState, doc: ScorecardDoc) -> list[str]:
    """The games of ``doc`` (the live document of ``card``) whose baselines nothing revealed yet, when ``card`` is
    an open card on an ARC server (no local game file gave them, no document from the server yet): their scores
    read 0, a number the server will not give. Empty for a closed card and for a card of the toolkit's own
    (whose baselines are the toolkit's own files)."""
    if card.server is None or card.closed:
        return []
    known = set(card.baselines_known_games or ())
    return [
        env.id
        for env in doc.environments
        if env.id not in known
        and any(r.message in (MSG_NO_BASELINES, MSG_NO_INFO.format(game_id=env.id)) for r in env.runs)
    ]


def baselines_source(card: CardState) -> str:
    """Where the card's baselines come from, in one line (``ledger replay``, ``ledger audit``)."""
    if card.baselines_id is None:
        return "baselines: none recorded for this card"
    sid = card.baselines_id[:12]
    if card.baselines_reported_at is not None:
        server = f" {card.server}" if card.server else ""
        answer = (
            "its close answer" if card.baselines_reported_in == "close" else "its answer to GET /api/scorecard/<card>"
        )
        return (
            f"baselines {sid}: reported by the server{server} at {card.baselines_reported_at.isoformat()} in {answer}"
        )
    if card.baselines_attached_at is not None:
        return f"baselines {sid}: attached to the imported card at {card.baselines_attached_at.isoformat()}"
    if card.server is not None:
        shown = reported(card.server_document) if card.server_document is not None else {}
        # A document whose baselines the card held already adds no event: say so, not that none came.
        said = (
            "its close answer showed the baselines it had already"
            if any(v is not None for v in shown.values())
            else "the server has revealed none yet"
        )
        return (
            f"baselines {sid}: the client's game list when the card was opened (the server's /api/games, which "
            f"leaves baselines out, and any local metadata.json); {said}"
        )
    return (
        f"baselines {sid}: recorded when the card was opened (the toolkit's game files, or the set given to the import)"
    )
