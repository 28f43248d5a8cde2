"""The baseline sets a ledger holds: each set a stream of one event, stored once per content (its id is a digest of
its entries), so a card names the set it was scored under and re-scoring can name another."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from datetime import UTC, datetime

from ledger.domain import baselines as bl
from ledger.domain.events import BASELINES_STREAM, BaselineEntry, BaselinesRecorded, baselines_stream, decode
from ledger.domain.projection import CardState
from ledger.errors import UnknownBaselines, VersionConflict
from ledger.store.base import LogStore


class BaselineSets:
    """A ledger's baseline sets; a set read or recorded once is kept (a set never changes)."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self._sets: dict[str, dict[str, BaselineEntry]] = {}

    def record(self, entries: Iterable[BaselineEntry], *, ts: datetime | None = None) -> str:
        """Store a baseline set (once per content) and return its id."""
        canon = bl.canonical(entries)
        sid = bl.set_id(canon)
        if sid in self._sets:
            return sid
        stream = baselines_stream(sid)
        if not self.store.stream_exists(stream):
            ev = BaselinesRecorded(ts=ts or datetime.now(UTC), set_id=sid, entries=canon)
            # Another writer may have stored the same content first: that is the same set.
            with contextlib.suppress(VersionConflict):
                self.store.append(stream, [ev], expected_version=0)
        self._sets[sid] = bl.as_map(canon)
        return sid

    def get(self, set_id: str) -> dict[str, BaselineEntry]:
        """The entries of a stored baseline set, by game id."""
        cached = self._sets.get(set_id)
        if cached is not None:
            return cached
        bodies, _, _ = self.store.read_bodies(baselines_stream(set_id))
        if not bodies:
            raise UnknownBaselines(f"baseline set {set_id} is not in this ledger")
        ev = decode(bodies[0])
        assert isinstance(ev, BaselinesRecorded)
        out = bl.as_map(ev.entries)
        self._sets[set_id] = out
        return out

    def of(self, card: CardState) -> dict[str, BaselineEntry]:
        """The baseline set the card was played under (empty if it has none)."""
        return self.get(card.baselines_id) if card.baselines_id else {}

    def ids(self) -> list[str]:
        """Every stored baseline set id, oldest first."""
        return [s.stream[len(BASELINES_STREAM) :] for s in self.store.streams(BASELINES_STREAM)]
