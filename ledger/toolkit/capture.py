"""Live capture: attach a ledger to an ``arc_agi.Arcade`` so every scorecard fact is committed as it happens.

The hooks sit on the Arcade's ``ScorecardManager`` (``new_scorecard``, ``update_scorecard``,
``close_scorecard``): those calls are exactly what the toolkit's scorecard counts, and a wrapper's
``update_scorecard`` runs inside its ``step``/``reset``, so each event is committed before the toolkit call
returns. The toolkit swallows exceptions raised in ``update_scorecard``; so that a failed write still reaches
the agent, the wrappers that ``Arcade.make`` returns re-raise it (:class:`CaptureError`) after the toolkit's
own call finished. Capture never changes what the toolkit returns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.core import baselines as bl
from ledger.core import document
from ledger.core.events import AnyEvent, CaptureContext, CardClosed, CardOpened
from ledger.core.projection import CardState, apply, new_card
from ledger.core.scoring import score_card
from ledger.core.translator import translate
from ledger.errors import CaptureError, StoreError
from ledger.toolkit import rest
from ledger.toolkit.batching import Batcher
from ledger.toolkit.observation import fingerprint, observation

if TYPE_CHECKING:
    from ledger.ledger import Ledger

log = logging.getLogger(__name__)


@dataclass
class _LiveCard:
    state: CardState
    version: int
    baselines: dict[str, Any]
    lock: threading.Lock = field(default_factory=threading.Lock)
    snapshot_version: int = 0
    #: The projection could not be rebuilt after a failed append (the database was unreachable): rebuild it first.
    stale: bool = False


class Capture:
    """The hooks of one attached Arcade. ``detach()`` restores the toolkit's own methods."""

    def __init__(
        self,
        ledger: Ledger,
        arcade: Any,
        *,
        record_reasoning: bool = False,
        context: CaptureContext | None = None,
        on_open: Callable[[str], None] | None = None,
        raise_errors: bool = True,
    ) -> None:
        self.ledger = ledger
        self.arcade = arcade
        self.record_reasoning = record_reasoning
        #: Recorded after each CardOpened (``ledger serve``/``record``); ``on_open`` is told each card id.
        self.context = context
        self.on_open = on_open
        #: False (``ledger serve``): a failed write is logged, and the toolkit's answers stay exactly the same.
        self.raise_errors = raise_errors
        self._cards: dict[str, _LiveCard] = {}
        self._cards_lock = threading.Lock()
        self._tls = threading.local()
        self._seeds: dict[str, int | None] = {}
        # Cards whose CardOpened could not be written: their steps must not go unrecorded without a word.
        self._unopened: set[str] = set()
        self._saved: list[tuple[Any, str, Any]] = []
        self._batcher: Batcher | None = None
        if getattr(ledger.store, "durability", "normal") == "batched":
            self._batcher = Batcher(ledger)
            ledger.on_close(self._batcher.close)
        self._install()

    # -- installation ---------------------------------------------------------------------------------------

    def _patch(self, obj: Any, name: str, replacement: Any) -> None:
        self._saved.append((obj, name, obj.__dict__.get(name, _MISSING)))
        setattr(obj, name, replacement)

    def _install(self) -> None:
        mgr = self.arcade.scorecard_manager
        orig_new, orig_update, orig_close = mgr.new_scorecard, mgr.update_scorecard, mgr.close_scorecard
        orig_make, orig_arcade_close = self.arcade.make, self.arcade.close_scorecard
        orig_create = self.arcade.create_scorecard

        def new_scorecard(*args: Any, **kwargs: Any) -> str:
            card_id = orig_new(*args, **kwargs)
            self._record_open(card_id)
            return card_id

        def update_scorecard(guid: str, data: Any, full_reset: bool = True) -> Any:
            card_id = mgr.guids.get(guid)
            live = self._cards.get(card_id) if card_id else None
            if live is None or card_id not in mgr.scorecards:
                result = orig_update(guid, data, full_reset)
                if card_id in self._unopened:
                    self._fail(StoreError(f"card {card_id} is not in the ledger: recording its opening failed"))
                return result
            with live.lock, rest.via_manager():
                result = orig_update(guid, data, full_reset)
                # The wrapper calls update_scorecard only for non-empty frames.
                self._record_update(card_id, live, data, full_reset, frame_empty=False)
            return result

        def close_scorecard(card_id: str, api_key: str | None) -> Any:
            live = self._cards.get(card_id)
            reason = self._close_reason(card_id)
            if live is None:
                return orig_close(card_id, api_key)
            with live.lock:
                result = orig_close(card_id, api_key)
                if result[0] is not None:
                    rest.unwatch(card_id)
                    self._record_close(card_id, live, reason)
                    with self._cards_lock:  # never updated again: a long-lived process must not keep every card
                        self._cards.pop(card_id, None)
                    for guid in result[1] or ():
                        self._seeds.pop(guid, None)
            return result

        def make(*args: Any, **kwargs: Any) -> Any:
            self._tls.error = None
            # make(game_id, seed=0, ...): the wrapper's first full reset happens inside make.
            self._tls.make_seed = kwargs.get("seed", args[1] if len(args) > 1 else 0)
            try:
                wrapper = orig_make(*args, **kwargs)
            finally:
                self._tls.make_seed = None
            if wrapper is not None:
                self._wrap_env(wrapper)
            self._raise_pending()
            return wrapper

        def create_scorecard(*args: Any, **kwargs: Any) -> str:
            # open_scorecard goes through here; a CardOpened that failed to write must reach the agent now.
            self._tls.error = None
            card_id = orig_create(*args, **kwargs)
            self._raise_pending()
            return card_id

        def arcade_close(*args: Any, **kwargs: Any) -> Any:
            self._tls.explicit_close = True
            self._tls.error = None
            try:
                out = orig_arcade_close(*args, **kwargs)
            finally:
                self._tls.explicit_close = False
            self._raise_pending()
            return out

        self._patch(mgr, "new_scorecard", new_scorecard)
        self._patch(mgr, "update_scorecard", update_scorecard)
        self._patch(mgr, "close_scorecard", close_scorecard)
        self._patch(self.arcade, "make", make)
        self._patch(self.arcade, "close_scorecard", arcade_close)
        self._patch(self.arcade, "create_scorecard", create_scorecard)
        # Cards opened before attach are captured only if nothing was played on them yet.
        for card_id, sc in list(mgr.scorecards.items()):
            if not sc.cards:
                self._record_open(card_id)
            else:
                log.warning("card %s was played before the ledger was attached: not captured", card_id)

    def _wrap_env(self, wrapper: Any) -> None:
        for name in ("step", "reset"):
            orig = getattr(wrapper, name)

            def hooked(*args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
                self._tls.error = None
                out = _orig(*args, **kwargs)
                if out is not None and len(out.frame) == 0:
                    # The toolkit never passes empty frames to the scorecard; record the wasted action here.
                    self._record_ignored(wrapper.scorecard_id, out)
                self._raise_pending()
                return out

            setattr(wrapper, name, hooked)

    def _record_ignored(self, card_id: str, data: Any) -> None:
        live = self._cards.get(card_id)
        if live is None or card_id not in self.arcade.scorecard_manager.scorecards:
            if card_id in self._unopened:
                self._fail(StoreError(f"card {card_id} is not in the ledger: recording its opening failed"))
            return
        with live.lock:
            self._record_update(card_id, live, data, False, frame_empty=True)

    def detach(self) -> None:
        """Put the toolkit's methods back (wrappers already made keep raising capture errors)."""
        for obj, name, old in reversed(self._saved):
            if old is _MISSING:
                obj.__dict__.pop(name, None)
            else:
                setattr(obj, name, old)
        self._saved.clear()
        if self._batcher is not None:
            self._batcher.close()

    # -- recording ------------------------------------------------------------------------------------------

    def _raise_pending(self) -> None:
        if self._batcher is not None and self._batcher.error is not None:
            self._fail(self._batcher.take_error())  # type: ignore[arg-type]
        err = getattr(self._tls, "error", None)
        if err is not None:
            self._tls.error = None
            if not self.raise_errors:
                return  # logged by _fail already
            raise CaptureError(f"the ledger did not record this step: {err}") from err

    def _fail(self, err: Exception) -> None:
        log.error("ledger capture failed: %s", err)
        self._tls.error = err

    def _record_open(self, card_id: str) -> None:
        sc = self.arcade.scorecard_manager.scorecards[card_id]
        entries = bl.canonical(bl.entry_from_info(i) for i in self.arcade.available_environments)
        now = datetime.now(UTC)
        try:
            set_id = self.ledger.record_baselines(entries, ts=now)
            opened = CardOpened(
                ts=now,
                card_id=card_id,
                source_url=sc.source_url,
                tags=list(sc.tags) if sc.tags is not None else None,
                opaque=sc.opaque,
                competition_mode=sc.competition_mode,
                api_key_fingerprint=fingerprint(sc.api_key),
                baselines_id=set_id,
                environments=[i.game_id for i in self.arcade.available_environments] if sc.competition_mode else None,
            )
            events: list[AnyEvent] = [opened]
            if self.context is not None:
                events.append(msgspec.structs.replace(self.context, ts=now))
            state = new_card(card_id)
            for e in events:
                apply(state, e)
            self.ledger.append_card(card_id, events, 0)
        except StoreError as e:
            self._unopened.add(card_id)
            self._fail(e)
            return
        with self._cards_lock:
            self._cards[card_id] = _LiveCard(state=state, version=len(events), baselines=bl.as_map(entries))
        # The REST server also updates a card directly, bypassing the manager (see ledger.toolkit.rest).
        rest.watch(card_id, self)
        if self.on_open is not None:
            self.on_open(card_id)

    def direct_update(self, sc: Any, orig: Callable[..., Any], guid: str, data: Any, full_reset: bool) -> Any:
        """``Scorecard.update_scorecard`` called on a watched card itself (``RestAPI.cmd``): run it, record it."""
        live = self._cards.get(sc.card_id)
        if live is None:
            return orig(sc, guid, data, full_reset)
        with live.lock:
            result = orig(sc, guid, data, full_reset)
            # Not through a wrapper: the card counts the observation whatever its frame holds.
            self._record_update(sc.card_id, live, data, full_reset, frame_empty=False, reapplied=not full_reset)
        return result

    def _record_update(
        self,
        card_id: str,
        live: _LiveCard,
        data: Any,
        full_reset: bool,
        frame_empty: bool | None = None,
        reapplied: bool = False,
    ) -> None:
        if live.stale:
            err = self._resync(card_id, live)
            if err is not None:
                self._fail(err)
                return
        if live.state.closed:
            return
        now = datetime.now(UTC)
        obs = observation(data, full_reset, with_reasoning=self.record_reasoning, ts=now, frame_empty=frame_empty)
        if reapplied:
            obs = msgspec.structs.replace(obs, reapplied=True)
        seed = self._seeds.setdefault(obs.guid, getattr(self._tls, "make_seed", None))
        new = translate(live.state, obs, seed=seed)
        if not new:
            return
        if self._batcher is not None:  # durability="batched": committed by the batcher's thread (batching.py)
            self._batcher.add(card_id, live.version, new, live)
            live.version += len(new)
            return
        try:
            # A long card is cached as it grows (the facade's snapshot policy): its export never replays it all.
            wrote = self.ledger.append_card(
                card_id, new, live.version, state=live.state, cached_version=live.snapshot_version
            )
            live.version += len(new)
            if wrote.cached:
                live.snapshot_version = live.version
        except StoreError as e:
            # The projection ran ahead of the log: rebuild it from what is actually stored.
            self._resync(card_id, live)
            self._fail(e)

    def _resync(self, card_id: str, live: _LiveCard) -> StoreError | None:
        """Rebuild the card's projection from the log; if the log cannot be read now (a server restarting),
        mark it stale: the next step rebuilds it first, so capture resumes by itself once the database is back."""
        try:
            live.state = self.ledger.load_card(card_id)
        except StoreError as e:
            live.stale = True
            return e
        live.version = live.state.events
        live.stale = False
        return None

    def _record_close(self, card_id: str, live: _LiveCard, reason: str) -> None:
        now = datetime.now(UTC)
        doc = score_card(live.state, live.baselines)
        closed = CardClosed(ts=now, reason=reason, document_sha256=document.sha256(doc))  # type: ignore[arg-type]
        apply(live.state, closed)
        if self._batcher is not None:
            self._batcher.flush()
            if self._batcher.error is not None:
                self._resync(card_id, live)
                self._fail(self._batcher.take_error())  # type: ignore[arg-type]
                return
        try:
            # Closed, the card is cached by the facade's snapshot policy: exports need not replay it.
            self.ledger.append_card(card_id, [closed], live.version, state=live.state)
            live.version += 1
        except StoreError as e:
            # The projection ran ahead of the log: rebuild it from what is actually stored.
            self._resync(card_id, live)
            self._fail(e)

    def _close_reason(self, card_id: str) -> str:
        if getattr(self._tls, "explicit_close", False):
            return "explicit"
        mgr = self.arcade.scorecard_manager
        sc = mgr.scorecards.get(card_id)
        if sc is None:
            return "explicit"
        now = datetime.now(UTC)
        if now - sc.last_update >= mgr.idle_for:
            return "idle"
        if now - sc.open_at >= getattr(mgr, "max_open_for", timedelta.max):
            return "max_open"
        return "explicit"


_MISSING = object()
