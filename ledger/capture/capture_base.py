"""What both live captures share: attaching, opening a card, appending with recovery, failing closed, detaching. A
failed write is raised (:class:`CaptureError`) after the toolkit's own call returned, and the card's projection, which
ran ahead of the log, is rebuilt from the log (or, if unreadable, before the card's next fact)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.domain import baselines as bl
from ledger.domain.events import AnyEvent, CaptureContext, CardOpened
from ledger.domain.projection import CardState, apply, new_card
from ledger.errors import CaptureError, StoreError, VersionConflict
from ledger.toolkit import arc_adapter as arc
from ledger.toolkit.observation import fingerprint

if TYPE_CHECKING:
    from ledger.store.cards import CardRepository

log = logging.getLogger(__name__)

_MISSING = object()


@dataclass
class LiveCard:
    """A captured card: its projection (what the log holds, plus what is being appended) and version."""

    state: CardState
    version: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The version the card's last cached projection covers (the facade's snapshot policy).
    snapshot_version: int = 0
    #: The projection could not be rebuilt after a failed append: rebuild it first.
    stale: bool = False
    model: Any = None
    #: game id -> the card's baseline entry, as its document is scored.
    baselines: dict[str, Any] = field(default_factory=dict)


class CaptureBase:
    unit = "step"

    def __init__(
        self,
        repository: CardRepository,
        arcade: Any,
        *,
        record_reasoning: bool = False,
        context: CaptureContext | None = None,
        on_open: Callable[[str], None] | None = None,
        on_aside: Callable[[str, str], None] | None = None,
        raise_errors: bool = True,
    ) -> None:
        arc.check_toolkit(arcade)
        #: The release every card this capture opens is scored with.
        self.calculator = arc.installed_version()
        self.repository = repository
        self.arcade = arcade
        self.record_reasoning = record_reasoning
        #: Recorded after each CardOpened; ``on_open`` is told each card id.
        self.context = context
        self.on_open = on_open
        #: Told (card id, who captures it) when this capture stands aside for a card another capture opened first.
        self.on_aside = on_aside
        #: False (``ledger serve``): a failed write is logged, and the toolkit's answers stay exactly the same.
        self.raise_errors = raise_errors
        self._cards: dict[str, LiveCard] = {}
        self._cards_lock = threading.Lock()
        self._tls = threading.local()
        # Cards whose CardOpened could not be written: their later facts must not go unrecorded without a word.
        self._unopened: set[str] = set()
        self._saved: list[tuple[Any, str, Any]] = []
        self._setup()
        self._install()

    def _setup(self) -> None:
        """The subclass's own state, before any patch."""

    def _install(self) -> None:
        raise NotImplementedError

    def _patch(self, obj: Any, name: str, replacement: Any) -> None:
        self._saved.append((obj, name, obj.__dict__.get(name, _MISSING)))
        setattr(obj, name, replacement)

    def detach(self) -> None:
        """Put the toolkit's methods back (wrappers already made keep their hooks)."""
        for obj, name, old in reversed(self._saved):
            if old is _MISSING:
                obj.__dict__.pop(name, None)
            else:
                setattr(obj, name, old)
        self._saved.clear()

    def flush(self) -> None:
        """Commit what the capture still queues (``durability="batched"``)."""

    def _fail(self, err: Exception) -> None:
        log.error("ledger capture failed: %s", err)
        self._tls.error = err

    def _raise_pending(self) -> None:
        err = getattr(self._tls, "error", None)
        if err is not None:
            self._tls.error = None
            if self.raise_errors:
                raise CaptureError(f"the ledger did not record this {self.unit}: {err}") from err

    def _unrecorded(self, card_id: str | None) -> None:
        """A fact of a card the capture does not hold: an error if the card's opening failed to be written."""
        if card_id in self._unopened:
            self._fail(StoreError(f"card {card_id} is not in the ledger: recording its opening failed"))

    def _open_card(
        self,
        card_id: str,
        now: datetime,
        fields: dict[str, Any],
        api_key: str | None,
        extra: Sequence[AnyEvent] = (),
    ) -> LiveCard | None:
        """Write the card's opening: the Arcade's baseline set, CardOpened, ``extra``, the capture context."""
        envs = list(self.arcade.available_environments)
        entries = bl.canonical(bl.entry_from_info(i) for i in envs)
        fields = {
            **fields,
            "api_key_fingerprint": fingerprint(api_key),
            "environments": [i.game_id for i in envs] if fields["competition_mode"] else None,
        }
        try:
            set_id = self.repository.baselines.record(entries, ts=now)
            opened = CardOpened(
                ts=now,
                card_id=card_id,
                baselines_id=set_id,
                calculator=self.calculator,
                calculator_source="capture" if self.calculator else None,
                **fields,
            )
            events: list[AnyEvent] = [opened, *extra]
            if self.context is not None:
                events.append(msgspec.structs.replace(self.context, ts=now))
            state = new_card(card_id)
            for e in events:
                apply(state, e)
            self.repository.append(card_id, events, 0)
        except VersionConflict as e:
            holder = self._captured_elsewhere(card_id)
            if holder is None:
                self._unopened.add(card_id)
                self._fail(e)
            else:
                self._stand_aside(card_id, holder)
            return None
        except StoreError as e:
            self._unopened.add(card_id)
            self._fail(e)
            return None
        live = LiveCard(state=state, version=len(events), baselines=bl.as_map(entries))
        with self._cards_lock:
            self._cards[card_id] = live
        if self.on_open is not None:
            self.on_open(card_id)
        return live

    def _captured_elsewhere(self, card_id: str) -> str | None:
        """Who holds the card when its stream was there first (a ``ledger record`` harness under ``ledger serve``)."""
        try:
            held = self.repository.load(card_id)
        except (StoreError, LookupError):
            return None
        if held.opened_at is None:
            return None
        return f"`ledger {held.captured_via}`" if held.captured_via else "another capture"

    def _stand_aside(self, card_id: str, holder: str) -> None:
        """Leave the card to the capture that opened it: this capture's facts of it pass through unrecorded."""
        log.warning(
            "ledger: card %s is already being captured into this ledger by %s (it opened it first): this capture "
            "stands aside, and the card is recorded once, there",
            card_id,
            holder,
        )
        if self.on_aside is not None:
            self.on_aside(card_id, holder)

    def _takes_facts(self, card_id: str, live: LiveCard) -> bool:
        """True when the card is open and its projection is what the log holds (rebuilt first if stale)."""
        if live.stale:
            err = self._resync(card_id, live)
            if err is not None:
                self._fail(err)
                return False
        return not live.state.closed

    def _append(self, card_id: str, live: LiveCard, events: Sequence[AnyEvent], *, fold: bool) -> bool:
        """Append ``events`` (already folded into the projection unless ``fold``); True when they were written."""
        if not events:
            return True
        if fold:
            for e in events:
                apply(live.state, e)
        try:
            # A long card is cached as it grows: its export never replays it all.
            wrote = self.repository.append(
                card_id, events, live.version, state=live.state, cached_version=live.snapshot_version
            )
        except StoreError as e:
            self._resync(card_id, live)
            self._fail(e)
            return False
        live.version += len(events)
        if wrote.cached:
            live.snapshot_version = live.version
        return True

    def _resync(self, card_id: str, live: LiveCard) -> StoreError | None:
        """Rebuild the card's projection from the log; if unreadable now, mark it stale so the next fact retries."""
        try:
            live.state = self.repository.load(card_id)
        except StoreError as e:
            live.stale = True
            return e
        live.version = live.state.events
        live.stale = False
        return None
