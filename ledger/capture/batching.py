"""Group commit for live capture under ``durability="batched"`` (see docs/guarantees.md, 'What is on disk')."""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ledger.domain.events import AnyEvent
from ledger.errors import StoreError

if TYPE_CHECKING:
    from ledger.store.cards import CardRepository

#: The loss window of ``durability="batched"``: at most this many milliseconds of steps...
BATCH_MS = 50
#: ...and at most this many events.
BATCH_EVENTS = 1000


class Batcher:
    def __init__(self, repository: CardRepository) -> None:
        self.repository = repository
        #: The first commit that failed, for the next step to raise (then cleared).
        self.error: StoreError | None = None
        # card id -> (the version the queued events follow, the events, the capture's live card)
        self._pending: dict[str, tuple[int, list[AnyEvent], Any]] = {}
        self._queued = 0
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time, so a card's batches are committed in order
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="ledger-batched-commit", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def add(self, card_id: str, version: int, events: Sequence[AnyEvent], live: Any) -> None:
        with self._lock:
            held = self._pending.get(card_id)
            # A card rebuilt from the log after a failed commit starts a new batch (the old one cannot commit).
            if held is None or held[0] + len(held[1]) != version:
                self._pending[card_id] = (version, list(events), live)
            else:
                held[1].extend(events)
            self._queued += len(events)
            if self._queued >= BATCH_EVENTS:
                self._wake.set()

    def flush(self) -> None:
        with self._flushing:
            with self._lock:
                pending, self._pending, self._queued = self._pending, {}, 0
            for card_id, (version, events, live) in pending.items():
                try:
                    self.repository.append(card_id, events, version)
                except StoreError as e:
                    live.stale = True  # the next step rebuilds the projection from the log
                    if self.error is None:
                        self.error = e

    def take_error(self) -> StoreError | None:
        err, self.error = self.error, None
        return err

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(BATCH_MS / 1000)
            self._wake.clear()
            with contextlib.suppress(Exception):  # a failure is kept in self.error by flush
                self.flush()

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        with contextlib.suppress(Exception):
            self.flush()
        atexit.unregister(self.close)
