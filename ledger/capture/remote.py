"""ONLINE / COMPETITION capture: an ``arc_agi.Arcade`` whose scorecards live on the ARC server, recorded client-side.
Scorecard calls are HTTP requests, watched only inside the Arcade's own calls on the calling thread through one
pass-through hook on ``requests.Session.request``, and folded with :mod:`ledger.rules.server`'s counting rules."""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import msgspec
import requests

from ledger.capture.capture_base import CaptureBase, LiveCard
from ledger.domain import document
from ledger.domain.events import (
    AnyEvent,
    BaselinesReported,
    CardClosed,
    CardOnServer,
    PlayStarted,
    RequestFailed,
    ServerDocument,
)
from ledger.domain.projection import CardState, apply
from ledger.domain.translator import translate
from ledger.errors import StoreError
from ledger.rules import server as sb
from ledger.rules.server import RESET, ServerModel
from ledger.toolkit import arc_adapter as arc
from ledger.toolkit.observation import observation

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Exchange:
    method: str
    path: str
    payload: Any
    status: int | None = None
    body: bytes | None = None
    error: str | None = None


_probe = threading.local()
_original_request: Callable[..., Any] | None = None


def _probed_request(self: requests.Session, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
    exchanges: list[Exchange] | None = getattr(_probe, "exchanges", None)
    assert _original_request is not None
    if exchanges is None:
        return _original_request(self, method, url, *args, **kwargs)
    ex = Exchange(method=method.upper(), path=urlsplit(url).path, payload=kwargs.get("json"))
    exchanges.append(ex)
    try:
        resp = _original_request(self, method, url, *args, **kwargs)
    except BaseException as e:
        ex.error = f"{type(e).__name__}: {e}"[:300]
        raise
    ex.status = resp.status_code
    try:
        ex.body = resp.content
    except Exception as e:  # a body cut off mid-read: the toolkit will not get a frame from it either
        ex.error = f"{type(e).__name__}: {e}"[:300]
    return resp


def _json(ex: Exchange) -> tuple[Any, str | None]:
    if ex.error is not None:
        return None, ex.error
    if ex.status != 200:
        return None, f"HTTP {ex.status}"
    try:
        return json.loads(ex.body or b""), None
    except ValueError:
        return None, "malformed answer: not JSON"


def _frame(ex: Exchange) -> tuple[Any, str | None]:
    data, err = _json(ex)
    if err is not None:
        return None, err
    try:
        fd = arc.parse_frame(data)
    except Exception:
        return None, "malformed answer: not a frame"
    if not fd.frame or not fd.guid or fd.action_input is None:
        return None, "malformed answer: no frame"
    return fd, None


def server_url(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return parts._replace(netloc=netloc).geturl()


def server_tags(tags: Any) -> list[str]:
    """The tags the server stores for a card opened with ``tags`` (``RestAPI.new_scorecard``)."""
    out = list(tags) if isinstance(tags, list) else []
    if "human" not in out and "agent" not in out:
        out.append("agent")
    return out


class RemoteCapture(CaptureBase):
    """The hooks of one attached ONLINE/COMPETITION Arcade (the request hook passes through after ``detach()``)."""

    unit = "call"

    def _install(self) -> None:
        global _original_request
        _original_request = arc.wrap_session_request(_probed_request)  # the toolkit's own, wrapped once per process
        arcade = self.arcade
        originals = {name: getattr(arcade, name) for name in arc.REMOTE_ARCADE_HOOKS}

        def watched(name: str) -> Callable[..., Any]:
            orig = originals[name]

            def hook(*args: Any, **kwargs: Any) -> Any:
                # get_scorecard without an id opens the default card first (a POST to /api/scorecard/open).
                out = self._watched(orig, None, args, kwargs)
                if name == "make" and out is not None:
                    self._wrap_env(out)
                return out

            return hook

        for name in arc.REMOTE_ARCADE_HOOKS:
            self._patch(arcade, name, watched(name))

    def _wrap_env(self, wrapper: Any) -> None:
        for name in arc.WRAPPER_HOOKS:
            orig = getattr(wrapper, name)

            def hooked(*args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
                return self._watched(_orig, wrapper, args, kwargs)

            setattr(wrapper, name, hooked)

    def _watched(self, fn: Callable[..., Any], wrapper: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if getattr(_probe, "exchanges", None) is not None:
            return fn(*args, **kwargs)  # a call inside a watched call: the outer one records
        exchanges: list[Exchange] = []
        _probe.exchanges = exchanges
        self._tls.error = None
        try:
            out = fn(*args, **kwargs)
        except BaseException:
            # The toolkit's own exception (an HTTP error, Ctrl-C) goes on unchanged, after what was answered.
            self._record_all(exchanges, wrapper)
            self._tls.error = None
            raise
        self._record_all(exchanges, wrapper)
        self._raise_pending()
        return out

    def _record_all(self, exchanges: list[Exchange], wrapper: Any) -> None:
        _probe.exchanges = None
        card_hint = arc.wrapper_card(wrapper) if wrapper is not None else None
        try:
            for ex in exchanges:
                self._record_exchange(ex, card_hint)
        except Exception as e:  # never let the ledger change what the agent's call does
            log.exception("ledger capture failed")
            self._fail(e)

    def _record_exchange(self, ex: Exchange, card_hint: str | None) -> None:
        if ex.method == "GET" and "/api/scorecard/" in ex.path:
            self._on_scorecard(ex)
            return
        if ex.method != "POST":
            return  # other reads (games, metadata) count nothing
        payload = ex.payload if isinstance(ex.payload, dict) else {}
        if ex.path.endswith("/api/scorecard/open"):
            self._on_open(ex, payload)
        elif ex.path.endswith("/api/scorecard/close"):
            self._on_close(ex, payload)
        elif "/api/cmd/" in ex.path:
            card_id = payload.get("card_id") or card_hint
            live = self._cards.get(card_id) if isinstance(card_id, str) else None
            if live is None:
                self._unrecorded(card_id)
                return
            with live.lock:
                self._on_cmd(card_id, live, ex, payload)  # type: ignore[arg-type]

    def _on_open(self, ex: Exchange, payload: dict[str, Any]) -> None:
        data, err = _json(ex)
        card_id = data.get("card_id") if isinstance(data, dict) else None
        if err is not None or not isinstance(card_id, str):
            log.warning("scorecard open got no card id (%s): nothing to record", err or "no card_id")
            return
        competition = True if payload.get("competition_mode") is not None else None
        fields = {
            "source_url": payload.get("source_url"),
            "tags": server_tags(payload.get("tags", [])),
            "opaque": payload.get("opaque"),
            "competition_mode": competition,
        }
        now = datetime.now(UTC)
        server = CardOnServer(
            ts=now, server=server_url(self.arcade.arc_base_url), local_games=arc.local_games(self.arcade)
        )
        live = self._open_card(card_id, now, fields, self.arcade.arc_api_key, [server])
        if live is not None:
            live.model = ServerModel(competition=bool(competition))

    def _on_cmd(self, card_id: str, live: LiveCard, ex: Exchange, payload: dict[str, Any]) -> None:
        if not self._takes_facts(card_id, live):
            return
        name = ex.path.rsplit("/", 1)[-1]
        sent = RESET if name == "RESET" else int(name[6:]) if name.startswith("ACTION") and name[6:].isdigit() else -1
        fd, err = _frame(ex)
        now = datetime.now(UTC)
        if fd is None:
            failed = RequestFailed(
                ts=now,
                request=name,
                game_id=payload.get("game_id"),
                guid=payload.get("guid"),
                status=ex.status,
                error=err or "no answer",
            )
            self._append(card_id, live, [failed], fold=True)
            return
        answered = fd.action_input.id.value
        verdict = live.model.judge(
            sent, fd.game_id, fd.guid or "", answered, fd.levels_completed, arc.state_name(fd.state)
        )
        obs = observation(fd, verdict.full_reset, with_reasoning=self.record_reasoning, ts=now, frame_empty=False)
        obs = msgspec.structs.replace(obs, reapplied=verdict.reapplied)
        self._append(card_id, live, translate(live.state, obs), fold=False)

    def _on_close(self, ex: Exchange, payload: dict[str, Any]) -> None:
        card_id = payload.get("card_id")
        live = self._cards.get(card_id) if isinstance(card_id, str) else None
        if live is None or not isinstance(card_id, str):
            self._unrecorded(card_id)
            return
        data, err = _json(ex)
        now = datetime.now(UTC)
        with live.lock:
            if not self._takes_facts(card_id, live):
                return
            if err is not None or not isinstance(data, dict):
                failed = RequestFailed(ts=now, request="close", status=ex.status, error=err or "malformed answer")
                self._append(card_id, live, [failed], fold=True)
                return
            try:
                events: list[AnyEvent] = [ServerDocument(ts=now, document=data)]
                events += self._reported(live.state, data, "close", now)
            except StoreError as e:
                self._fail(e)
                return
            events += self._closing_makes(live.state, data, now)
            # The hash is of the document as the closed card will export it.
            scratch = copy.deepcopy(live.state)
            for ev in [*events, CardClosed(ts=now, reason="explicit")]:
                apply(scratch, ev)
            doc = document.sha256(self.repository.document(scratch))
            events.append(CardClosed(ts=now, reason="explicit", document_sha256=doc))
            self._append(card_id, live, events, fold=True)

    def _on_scorecard(self, ex: Exchange) -> None:
        # GET /api/scorecard/<card_id> (not .../<game_id>, whose answer carries no baselines).
        card_id = ex.path.split("/api/scorecard/", 1)[1]
        live = self._cards.get(card_id)
        data, err = _json(ex)
        if live is None or err is not None or not isinstance(data, dict):
            return
        with live.lock:
            if not self._takes_facts(card_id, live):
                return
            try:
                events = self._reported(live.state, data, "scorecard", datetime.now(UTC))
            except StoreError as e:
                self._fail(e)
                return
            self._append(card_id, live, events, fold=True)

    def _reported(self, card: CardState, data: dict[str, Any], answer: str, now: datetime) -> list[AnyEvent]:
        report = sb.reported(data)
        if not report:
            return []
        entries, news = sb.with_reported(self.repository.baselines.of(card), report, card.baselines_known_games or ())
        if not news:
            return []
        set_id = self.repository.baselines.record(entries, ts=now)
        return [BaselinesReported(ts=now, baselines_id=set_id, answer=answer, games=news, server=card.server)]  # type: ignore[arg-type]

    @staticmethod
    def _closing_makes(card: CardState, data: dict[str, Any], now: datetime) -> list[AnyEvent]:
        # The competition server makes every game the card never touched before it closes it (RestAPI
        # close_scorecard): one play of 0 actions each, whose guids only the close answer tells.
        if not card.competition_mode or not card.environments:
            return []
        out: list[AnyEvent] = []
        wanted = set(card.environments) - {g for g in card.environments if any(k.startswith(g) for k in card.games)}
        for env in data.get("environments") or []:
            runs = env.get("runs") if isinstance(env, dict) else None
            gid = env.get("id") if isinstance(env, dict) else None
            if gid in wanted and isinstance(runs, list) and len(runs) == 1 and isinstance(runs[0], dict):
                guid = runs[0].get("guid")
                if isinstance(guid, str) and runs[0].get("actions") == 0:
                    out.append(PlayStarted(ts=now, game_id=gid, guid=guid))
        return out
