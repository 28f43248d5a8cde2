"""The ARC server as a client sees it: its counting rules, its document at close, the baselines it reveals.
:class:`ServerModel` keeps per guid the little of the server's game state the counting rules depend on. The game list
leaves baselines out: a client without local game files learns them only from a scorecard document."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import zip_longest
from typing import Any

import msgspec

from ledger.domain.document import ScorecardDoc
from ledger.domain.events import BaselineEntry
from ledger.domain.projection import CardState
from ledger.domain.scoring import MSG_NO_BASELINES, MSG_NO_INFO, MSG_SIZE_MISMATCH

RESET = 0


class GuidState(msgspec.Struct):
    game_id: str
    levels_completed: int = 0
    state: str = "NOT_FINISHED"
    #: arcengine's ``_action_count == 0``: no action since the level began.
    level_untouched: bool = True


class Verdict(msgspec.Struct):
    full_reset: bool = False
    reapplied: bool = False


class ServerModel(msgspec.Struct):
    competition: bool = False
    guids: dict[str, GuidState] = msgspec.field(default_factory=dict)

    def judge(self, sent: int, game_id: str, guid: str, answered: int, levels_completed: int, state: str) -> Verdict:
        """How an answer (``answered``: its action id) to action ``sent`` counts; the model moves past it. A RESET is a
        full reset on a level without action or a won game (arcengine's ``handle_reset``), else a level reset; in
        competition mode a RESET on an untouched level is not executed (the last observation re-applied)."""
        g = self.guids.get(guid)
        if g is None:
            # A guid never answered before: the server made the game, and make's first reset began a play.
            self.guids[guid] = GuidState(game_id=game_id, levels_completed=levels_completed, state=state)
            return Verdict(full_reset=answered == RESET)
        if sent == RESET:
            if answered != RESET or (self.competition and g.level_untouched):
                return Verdict(reapplied=True)  # the server re-applied the last observation; the game is unchanged
            full = g.level_untouched or g.state == "WIN"
            g.level_untouched, g.levels_completed, g.state = True, levels_completed, state
            return Verdict(full_reset=full)
        advanced = levels_completed > g.levels_completed and state != "WIN"
        g.level_untouched, g.levels_completed, g.state = advanced, levels_completed, state
        return Verdict()


_MISSING = object()


def _show(v: Any) -> str:
    if v is _MISSING:
        return "(absent)"
    text = repr(v) if isinstance(v, str) else str(v).replace("True", "true").replace("False", "false")
    return text if len(text) <= 60 else text[:57] + "..."


def first_difference(ledger: Any, server: Any, path: str = "") -> str | None:
    """The first difference between two JSON values as ``path: ledger X, server Y``, or None if they are equal."""
    if isinstance(ledger, dict) and isinstance(server, dict):
        for key in [*ledger, *(k for k in server if k not in ledger)]:
            sub = f"{path}.{key}" if path else str(key)
            d = first_difference(ledger.get(key, _MISSING), server.get(key, _MISSING), sub)
            if d is not None:
                return d
        return None
    if isinstance(ledger, list) and isinstance(server, list):
        for i, (a, b) in enumerate(zip_longest(ledger, server, fillvalue=_MISSING)):
            d = first_difference(a, b, f"{path}[{i}]")
            if d is not None:
                return d
        return None
    # JSON has one number type: 3 and 3.0 are the same value (bool is not a number here).
    same = ledger is server if type(ledger) is bool or type(server) is bool else ledger == server
    return None if same else f"{path or '(document)'}: ledger {_show(ledger)}, server {_show(server)}"


def server_check(
    ledger_doc: Any,
    server_doc: Any | None,
    requests_failed: int,
    *,
    on_server: bool = False,
    baselines_source: str | None = None,
) -> tuple[str, str] | None:
    """(status, message) of the audit's ``server`` check; None for a card with no server behind it."""
    if server_doc is None and requests_failed == 0 and not on_server:
        return None
    failed = f"; {requests_failed} request(s) failed and counted nothing" if requests_failed else ""
    source = f"; {baselines_source}" if baselines_source else ""
    if server_doc is None:
        return "WARN", f"no document from the server: the card was not closed on it{failed}{source}"
    diff = first_difference(ledger_doc, server_doc)
    if diff is None:
        return "PASS", f"the ledger's card equals the document the server returned at close{failed}{source}"
    return "FAIL", f"the server's document differs, first at {diff}{failed}{source}"


def reported(doc: Any) -> dict[str, list[int] | None]:
    """game_id -> the baselines a scorecard document shows (None: the server has none for the game)."""
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
    """The set ``current`` with the reported baselines in place, and the games (sorted) it tells something new of."""
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
    """The games of ``doc`` (an open server card's live document) whose baselines nothing revealed yet."""
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
