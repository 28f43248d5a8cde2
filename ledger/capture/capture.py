"""Live capture: attach a ledger to an ``arc_agi.Arcade`` so every scorecard fact is committed as it happens. The
toolkit swallows exceptions raised in ``update_scorecard``, so the wrappers ``Arcade.make`` returns re-raise a failed
write (:class:`CaptureError`) after the toolkit's own call finished."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.capture import rest
from ledger.capture.batching import Batcher
from ledger.capture.capture_base import CaptureBase, LiveCard
from ledger.domain import document
from ledger.domain.events import CardClosed, CloseReason
from ledger.domain.scoring import score_card
from ledger.domain.translator import translate
from ledger.toolkit import arc_adapter as arc
from ledger.toolkit.observation import observation

if TYPE_CHECKING:
    from ledger.store.cards import CardRepository

log = logging.getLogger(__name__)


def attach(repository: CardRepository, arcade: Any, *, record_reasoning: bool = False, **options: Any) -> CaptureBase:
    """Capture what ``arcade`` does to its scorecards: Capture (OFFLINE/NORMAL), RemoteCapture (ONLINE/COMPETITION)."""
    if arc.capture_kind(arcade) == "remote":
        from ledger.capture.remote import RemoteCapture

        return RemoteCapture(repository, arcade, record_reasoning=record_reasoning, **options)
    return Capture(repository, arcade, record_reasoning=record_reasoning, **options)


class Capture(CaptureBase):
    def _setup(self) -> None:
        self._seeds: dict[str, int | None] = {}
        self._batcher: Batcher | None = None
        if getattr(self.repository.store, "durability", "normal") == "batched":
            self._batcher = Batcher(self.repository)

    def _install(self) -> None:
        mgr = arc.manager(self.arcade)
        guids, open_cards = arc.card_of_guid(mgr), arc.scorecards(mgr)
        orig_new, orig_update, orig_close = (getattr(mgr, n) for n in arc.MANAGER_HOOKS)
        orig_make, orig_arcade_close, orig_create = (getattr(self.arcade, n) for n in arc.LOCAL_ARCADE_HOOKS)

        def new_scorecard(*args: Any, **kwargs: Any) -> str:
            card_id = orig_new(*args, **kwargs)
            self._record_open(card_id)
            return card_id

        def update_scorecard(guid: str, data: Any, full_reset: bool = True) -> Any:
            card_id = guids.get(guid)
            live = self._cards.get(card_id) if card_id else None
            if live is None or card_id not in open_cards:
                result = orig_update(guid, data, full_reset)
                self._unrecorded(card_id)
                return result
            with live.lock, rest.ViaManager():
                result = orig_update(guid, data, full_reset)
                # The wrapper calls update_scorecard only for non-empty frames.
                self._record_update(card_id, live, data, full_reset, frame_empty=False)
            return result

        def close_scorecard(card_id: str, api_key: str | None) -> Any:
            live = self._cards.get(card_id)
            reason = self._close_reason(card_id)
            if live is None:
                result = orig_close(card_id, api_key)
                self._unrecorded(card_id)
                return result
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

        for name, hook in zip(arc.MANAGER_HOOKS, (new_scorecard, update_scorecard, close_scorecard), strict=True):
            self._patch(mgr, name, hook)
        for name, hook in zip(arc.LOCAL_ARCADE_HOOKS, (make, arcade_close, create_scorecard), strict=True):
            self._patch(self.arcade, name, hook)
        for card_id, sc in list(open_cards.items()):
            if not arc.played(sc):
                self._record_open(card_id)
            else:
                log.warning("card %s was played before the ledger was attached: not captured", card_id)

    def _wrap_env(self, wrapper: Any) -> None:
        for name in arc.WRAPPER_HOOKS:
            orig = getattr(wrapper, name)

            def hooked(*args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
                self._tls.error = None
                out = _orig(*args, **kwargs)
                if out is not None and arc.empty_frame(out):
                    # The toolkit never passes empty frames to the scorecard; record the wasted action here.
                    self._record_ignored(arc.wrapper_card(wrapper), out)
                self._raise_pending()
                return out

            setattr(wrapper, name, hooked)

    def _record_ignored(self, card_id: str, data: Any) -> None:
        live = self._cards.get(card_id)
        if live is None or card_id not in arc.scorecards(arc.manager(self.arcade)):
            self._unrecorded(card_id)
            return
        with live.lock:
            self._record_update(card_id, live, data, False, frame_empty=True)

    def detach(self) -> None:
        super().detach()
        self.flush()  # what is batched is committed before the toolkit is left on its own

    def flush(self) -> None:
        if self._batcher is not None:
            self._batcher.close()

    def _raise_pending(self) -> None:
        if self._batcher is not None and self._batcher.error is not None:
            self._fail(self._batcher.take_error())  # type: ignore[arg-type]
        super()._raise_pending()

    def _record_open(self, card_id: str) -> None:
        fields = arc.opening(arc.scorecards(arc.manager(self.arcade))[card_id])
        api_key = fields.pop("api_key")
        if self._open_card(card_id, datetime.now(UTC), fields, api_key) is not None:
            # The REST server also updates a card directly, bypassing the manager.
            rest.watch(card_id, self)

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
        live: LiveCard,
        data: Any,
        full_reset: bool,
        frame_empty: bool | None = None,
        reapplied: bool = False,
    ) -> None:
        if not self._takes_facts(card_id, live):
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
        self._append(card_id, live, new, fold=False)

    def _record_close(self, card_id: str, live: LiveCard, reason: CloseReason) -> None:
        now = datetime.now(UTC)
        doc = score_card(live.state, live.baselines)
        closed = CardClosed(ts=now, reason=reason, document_sha256=document.sha256(doc))
        if self._batcher is not None:
            self._batcher.flush()
            if self._batcher.error is not None:
                self._resync(card_id, live)
                self._fail(self._batcher.take_error())  # type: ignore[arg-type]
                return
        # Closed, the card is cached by the facade's snapshot policy: exports need not replay it.
        self._append(card_id, live, [closed], fold=True)

    def _close_reason(self, card_id: str) -> CloseReason:
        if getattr(self._tls, "explicit_close", False):
            return "explicit"
        times = arc.auto_close_times(arc.manager(self.arcade), card_id)
        if times is None:
            return "explicit"
        last_update, open_at, idle_for, max_open_for = times
        now = datetime.now(UTC)
        if now - last_update >= idle_for:
            return "idle"
        if max_open_for is not None and now - open_at >= max_open_for:
            return "max_open"
        return "explicit"
