"""The Python API: :class:`Ledger` ties the log, the projection, the calculator and the document together."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from ledger.core import baselines as bl
from ledger.core import document
from ledger.core.events import (
    BASELINES_STREAM,
    CARD_STREAM,
    BaselineEntry,
    BaselinesRecorded,
    baselines_stream,
    card_stream,
    decode,
)
from ledger.core.projection import CardState, fold, new_card
from ledger.core.scoring import score_card
from ledger.errors import UnknownBaselines, UnknownCard, VersionConflict
from ledger.storage.store import Durability, Store

DEFAULT_DB = "ledger.sqlite"

#: The projection cache's format; a new one makes old snapshots be ignored (and rewritten).
SNAPSHOT_KIND = "card/v1"
#: Write a new snapshot once a read folded this many events past the cached one.
SNAPSHOT_AFTER = 2000

_snapshot_enc = msgspec.msgpack.Encoder()
_snapshot_dec = msgspec.msgpack.Decoder(CardState)


def _decode_snapshot(body: bytes) -> CardState | None:
    # A snapshot that does not decode (older format, damage) is ignored: the log is the truth.
    try:
        return _snapshot_dec.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@dataclass(frozen=True, slots=True)
class CardSummary:
    """One line of ``ledger cards``."""

    card_id: str
    opened: str | None
    closed: str | None
    close_reason: str | None
    games: int
    plays: int
    actions: int
    score: float
    events: int


def default_db() -> str:
    """``$LEDGER_DB`` or ``./ledger.sqlite``."""
    return os.environ.get("LEDGER_DB") or DEFAULT_DB


class Ledger:
    """An open ledger. Use :meth:`open` (also a context manager)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._baselines_cache: dict[str, dict[str, BaselineEntry]] = {}

    @classmethod
    def open(cls, path_or_url: str | os.PathLike[str] | None = None, *, durability: Durability = "normal") -> Ledger:
        """Open (creating and migrating as needed) the ledger at a SQLite path or SQLAlchemy URL."""
        store = Store(os.fspath(path_or_url) if path_or_url is not None else default_db(), durability=durability)
        try:
            store.migrate()
        except BaseException:
            store.close()
            raise
        return cls(store)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the database."""
        self.store.close()

    # -- capture ------------------------------------------------------------------------------------------

    def attach(self, arcade: Any, *, record_reasoning: bool = False) -> Any:
        """Capture everything ``arcade`` (an ``arc_agi.Arcade``) does to its scorecards from now on.

        Returns the :class:`ledger.capture.Capture`; call its ``detach()`` to stop.
        """
        from ledger.toolkit.capture import Capture

        return Capture(self, arcade, record_reasoning=record_reasoning)

    # -- baselines ----------------------------------------------------------------------------------------

    def record_baselines(self, entries: Iterable[BaselineEntry], *, ts: datetime | None = None) -> str:
        """Store a baseline set (once per content) and return its id."""
        canon = bl.canonical(entries)
        sid = bl.set_id(canon)
        if sid in self._baselines_cache:
            return sid
        stream = baselines_stream(sid)
        if not self.store.stream_exists(stream):
            ev = BaselinesRecorded(ts=ts or datetime.now(UTC), set_id=sid, entries=canon)
            # Another writer may have stored the same content first: that is the same set.
            with contextlib.suppress(VersionConflict):
                self.store.append(stream, [ev], expected_version=0)
        self._baselines_cache[sid] = bl.as_map(canon)
        return sid

    def baselines(self, set_id: str) -> dict[str, BaselineEntry]:
        """The entries of a stored baseline set, by game id."""
        cached = self._baselines_cache.get(set_id)
        if cached is not None:
            return cached
        bodies, _, _ = self.store.read_bodies(baselines_stream(set_id))
        if not bodies:
            raise UnknownBaselines(f"baseline set {set_id} is not in this ledger")
        ev = decode(bodies[0])
        assert isinstance(ev, BaselinesRecorded)
        out = bl.as_map(ev.entries)
        self._baselines_cache[set_id] = out
        return out

    def baseline_set_ids(self) -> list[str]:
        """Every stored baseline set id, oldest first."""
        return [s.stream[len(BASELINES_STREAM) :] for s in self.store.streams(BASELINES_STREAM)]

    # -- reading cards ----------------------------------------------------------------------------------------

    def card_ids(self) -> list[str]:
        """Every card id, in order of opening."""
        return [s.stream[len(CARD_STREAM) :] for s in self.store.streams(CARD_STREAM)]

    def load_card(self, card_id: str, *, until: int | None = None, use_cache: bool = True) -> CardState:
        """The card rebuilt from its events (up to global ``seq`` ``until``).

        A cached projection (snapshot) is used for the events it covers and only the later events are folded;
        the result is the same as a full replay (``use_cache=False``), which tests check.
        """
        stream = card_stream(card_id)
        snap = self.store.get_snapshot(stream, SNAPSHOT_KIND) if use_cache else None
        if snap is not None and until is not None and snap[1] > until:
            snap = None  # the cached state is later than the point asked for
        return self._load(card_id, snap, until=until, use_cache=use_cache)

    def load_cards(self, card_ids: Iterable[str]) -> dict[str, CardState]:
        """Many cards at once (one query for all their cached projections)."""
        ids = list(card_ids)
        snaps = self.store.snapshots_for([card_stream(c) for c in ids], SNAPSHOT_KIND)
        return {c: self._load(c, snaps.get(card_stream(c))) for c in ids}

    def cached_card(self, card_id: str) -> tuple[int, CardState] | None:
        """The cached projection of a card and the version it covers, or None (for the audit)."""
        snap = self.store.get_snapshot(card_stream(card_id), SNAPSHOT_KIND)
        state = _decode_snapshot(snap[2]) if snap else None
        return (snap[0], state) if snap and state is not None else None  # type: ignore[index]

    def _load(
        self,
        card_id: str,
        snap: tuple[int, int, bytes] | None,
        *,
        until: int | None = None,
        use_cache: bool = True,
    ) -> CardState:
        stream = card_stream(card_id)
        state = _decode_snapshot(snap[2]) if snap else None
        after = snap[0] if snap and state is not None else 0
        bodies, last_version, last_seq = self.store.read_bodies(stream, after_version=after, until_seq=until)
        if state is None and not bodies:
            if until is not None and self.store.stream_exists(stream):
                return new_card(card_id)
            raise UnknownCard(card_id)
        state = fold(card_id, (decode(b) for b in bodies), state)
        if use_cache and until is None and len(bodies) >= SNAPSHOT_AFTER:
            self.store.put_snapshot(stream, SNAPSHOT_KIND, last_version, last_seq, _snapshot_enc.encode(state))
        return state

    def save_snapshot(self, card_id: str, state: CardState, version: int, seq: int) -> None:
        """Cache ``state`` as the projection of the card's first ``version`` events."""
        self.store.put_snapshot(card_stream(card_id), SNAPSHOT_KIND, version, seq, _snapshot_enc.encode(state))

    def card_baselines(self, card: CardState) -> dict[str, BaselineEntry]:
        """The baseline set the card was played under (empty if it has none)."""
        return self.baselines(card.baselines_id) if card.baselines_id else {}

    def document(
        self,
        card_id: str,
        *,
        until: int | None = None,
        baselines: Mapping[str, BaselineEntry] | None = None,
        card: CardState | None = None,
    ) -> document.ScorecardDoc:
        """The scorecard document of a card, under its own baselines unless others are given."""
        c = card if card is not None else self.load_card(card_id, until=until)
        return score_card(c, baselines if baselines is not None else self.card_baselines(c))

    def export(
        self,
        card_id: str,
        *,
        until: int | None = None,
        indent: int | None = None,
        baselines: Mapping[str, BaselineEntry] | None = None,
    ) -> str:
        """The card's JSON, identical to the toolkit's ``get_scorecard(card_id).model_dump_json()``."""
        return document.to_json(self.document(card_id, until=until, baselines=baselines), indent=indent)

    def cards(self) -> list[CardSummary]:
        """A summary of every card."""
        out = []
        for cid, c in self.load_cards(self.card_ids()).items():
            doc = self.document(cid, card=c)
            out.append(
                CardSummary(
                    card_id=cid,
                    opened=c.opened_at.isoformat() if c.opened_at else None,
                    closed=c.closed_at.isoformat() if c.closed_at else None,
                    close_reason=c.close_reason,
                    games=len(c.games),
                    plays=sum(len(p) for p in c.games.values()),
                    actions=c.total_actions,
                    score=doc.score,
                    events=c.events,
                )
            )
        return out
