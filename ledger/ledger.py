"""The Python API: :class:`Ledger` ties the log, the projection, the calculator and the document together."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.domain import calculators, document
from ledger.domain.events import AnyEvent, BaselineEntry, CardClosed, CloseReason
from ledger.domain.projection import CardState
from ledger.domain.scoring import calculator_of
from ledger.errors import BaselinesNotKnown, InputError
from ledger.rules.timeline import retraction, retraction_note
from ledger.store.backends import open_store
from ledger.store.base import Durability, LogStore, StoredEvent
from ledger.store.cards import (  # noqa: F401  (the snapshot policy, named here for the API's users)
    SNAPSHOT_AFTER,
    SNAPSHOT_EVERY,
    SNAPSHOT_KIND,
    Appended,
    BrokenChain,
    CardRepository,
    apply_events,
)

if TYPE_CHECKING:
    from ledger.rules.rescoring import GameMatch, Match


class CardRead(msgspec.Struct, frozen=True):
    """A card, its document, and what chose and qualifies it (:meth:`Ledger.read`)."""

    card: CardState
    doc: document.ScorecardDoc
    calculator: calculators.Calculator
    own_calculator: calculators.Calculator
    #: The baseline set ``doc`` is scored under (None: none), and how each played game met it.
    set_id: str | None
    matches: list[GameMatch]
    #: True when a choice other than the card's own baselines, exact match, its own view or calculator was made.
    rescored: bool
    #: Games whose baselines an ARC server has not revealed yet (only for the card's own baselines).
    unknown: list[str]
    #: Lines to show beside the document (export writes them to stderr).
    notes: list[str] = msgspec.field(default_factory=list)
    retraction: dict[str, str] | None = None
    #: Why the card's chain is not whole (read with ``allow_broken``), else None.
    broken: str | None = None


def default_db() -> str:
    return os.environ.get("LEDGER_DB") or "ledger.sqlite"


class Ledger:
    """An open ledger. Use :meth:`open` (also a context manager)."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.repository = CardRepository(store, note=lambda line: print(line, file=sys.stderr))
        self._on_close: list[Any] = []

    @classmethod
    def open(
        cls,
        path_or_url: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "normal",
        readonly: bool = False,
    ) -> Ledger:
        """Open the ledger at a SQLite path or SQLAlchemy URL, creating and migrating it as needed. ``readonly=True``:
        never create, migrate or write. ``durability="batched"``: see docs/guarantees.md."""
        where = os.fspath(path_or_url) if path_or_url is not None else default_db()
        if readonly:
            return cls(open_store(where, readonly=True))
        store = open_store(where, durability=durability)
        try:
            store.migrate()
        except BaseException:
            store.close()
            raise
        return cls(store)

    @classmethod
    def open_readonly(cls, path_or_url: str | os.PathLike[str] | None = None) -> Ledger:
        return cls.open(path_or_url, readonly=True)

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the database (first committing what ``durability="batched"`` capture still queues)."""
        for hook in self._on_close:
            hook()
        self._on_close.clear()
        self.store.close()

    def attach(self, arcade: Any, *, record_reasoning: bool = False, **options: Any) -> Any:
        """Capture everything ``arcade`` (an ``arc_agi.Arcade``) does to its scorecards from now on; returns the capture
        (``detach()`` stops it). CaptureError for an untested release or an Arcade it cannot patch (docs/capture.md)."""
        from ledger.capture.capture import attach

        capture = attach(self.repository, arcade, record_reasoning=record_reasoning, **options)
        self._on_close.append(capture.flush)
        return capture

    def record_baselines(self, entries: Iterable[BaselineEntry], *, ts: datetime | None = None) -> str:
        """Store a baseline set (once per content); returns its id."""
        return self.repository.baselines.record(entries, ts=ts)

    def baselines(self, set_id: str) -> dict[str, BaselineEntry]:
        return self.repository.baselines.get(set_id)

    def baseline_set_ids(self) -> list[str]:
        return self.repository.baselines.ids()

    def card_ids(self) -> list[str]:
        """Every card id, in the order the ledger first stored each card."""
        return self.repository.ids()

    def resolve_card(self, ref: str) -> str:
        """The card id ``ref`` names: the id itself, or a unique prefix of one (:class:`AmbiguousCard` else)."""
        return self.repository.resolve(ref)

    def seq_at_version(self, card_id: str, version: int) -> int:
        """The ledger-wide ``seq`` of the card's event ``version`` (what ``until=`` takes)."""
        return self.repository.seq_at_version(card_id, version)

    def close_card(self, card_id: str, reason: CloseReason = "explicit", *, ts: datetime | None = None) -> CardState:
        """Append a ``card_closed`` event (with the document hash, as capture does) to an open card; returns it."""
        read = self.repository.read(card_id)
        card = read.state
        if card.closed:
            raise InputError(f"card {card_id} is already closed ({card.close_reason}); nothing written")
        doc = self.document(card_id, card=card)
        ev = CardClosed(ts=ts or datetime.now(UTC), reason=reason, document_sha256=document.sha256(doc))
        closed = apply_events(card_id, [ev], card)
        self.append_card(card_id, [ev], read.version, state=closed)
        return closed

    def load_card(
        self, card_id: str, *, until: int | None = None, use_cache: bool = True, allow_broken: bool = False
    ) -> CardState:
        """The card rebuilt up to global ``seq`` ``until``; BrokenChain for a broken chain, unless ``allow_broken``."""
        return self.repository.load(card_id, until=until, use_cache=use_cache, allow_broken=allow_broken)

    def load_cards(self, card_ids: Iterable[str]) -> dict[str, CardState]:
        return self.repository.load_many(card_ids)

    def cached_card(self, card_id: str) -> tuple[int, CardState] | None:
        return self.repository.cached(card_id)

    def save_snapshot(self, card_id: str, state: CardState, version: int, seq: int) -> None:
        """Cache ``state`` as the projection of the card's first ``version`` events."""
        self.repository.save(card_id, state, version, seq)

    def append(
        self, stream: str, events: Iterable[AnyEvent], expected_version: int | None, *, whole: bool = True
    ) -> list[StoredEvent]:
        """Append ``events`` to ``stream``, hash-chained, in one transaction; returns them as stored (``whole`` False:
        the last one). ``expected_version``: the stream's version the caller built on (0: a new stream; ``None``: at
        the head); if another writer went first, :class:`VersionConflict`."""
        return self.store.append(stream, events, expected_version=expected_version, whole=whole)

    def append_card(
        self,
        card_id: str,
        events: Iterable[AnyEvent],
        expected_version: int,
        *,
        state: CardState | None = None,
        cached_version: int = 0,
        whole: bool = True,
        hand_over: bool = False,
    ) -> Appended:
        """:meth:`append` to a card's stream, then apply the snapshot policy (see ``CardRepository.append``)."""
        return self.repository.append(
            card_id,
            events,
            expected_version,
            state=state,
            cached_version=cached_version,
            whole=whole,
            hand_over=hand_over,
        )

    def card_baselines(self, card: CardState) -> dict[str, BaselineEntry]:
        """The baseline set the card was played under (empty if it has none)."""
        return self.repository.baselines.of(card)

    def document(
        self,
        card_id: str,
        *,
        until: int | None = None,
        baselines: Mapping[str, BaselineEntry] | None = None,
        card: CardState | None = None,
        calculator: calculators.Calculator | None = None,
    ) -> document.ScorecardDoc:
        """The scorecard document of a card, under its own baselines and calculator unless others are given."""
        c = card if card is not None else self.load_card(card_id, until=until)
        return self.repository.document(c, baselines=baselines, calculator=calculator)

    def read(
        self,
        card_id: str,
        *,
        until: int | None = None,
        set_of: Callable[[], str] | None = None,
        entries: Mapping[str, BaselineEntry] | None = None,
        calculator: calculators.Calculator | None = None,
        match: Match = "exact",
        all_environments: bool = False,
        card: CardState | None = None,
        allow_broken: bool = False,
    ) -> CardRead:
        """The one read of a card for what is shown of it, every choice applied here once for every command. ``set_of``:
        the baseline set id to score under (default: its own); ``entries``: these instead; ``card``: the card already
        loaded; ``allow_broken``: read a broken chain as far as it holds (``broken`` says why)."""
        # The rules a read may apply, loaded by the reads that apply them (a list of cards needs none).
        from ledger.rules.rescoring import match_note, score_under
        from ledger.rules.server import unknown_baselines

        broken = None
        if card is None:
            loaded = self.repository.read(card_id, until=until, allow_broken=allow_broken)
            card, broken = loaded.state, loaded.broken
        own = calculator_of(card)
        calc = calculator if calculator is not None else own
        sid = set_of() if set_of is not None else card.baselines_id
        by_set = set_of is not None or match != "exact" or all_environments
        matches: list[GameMatch] = []
        unknown: list[str] = []
        if by_set:
            chosen = entries if entries is not None else (self.baselines(sid) if sid is not None else {})
            doc, matches = score_under(card, chosen, match=match, all_environments=all_environments, calculator=calc)
        else:
            doc = self.document(card_id, card=card, baselines=entries, calculator=calc)
            unknown = unknown_baselines(card, doc) if entries is None else []
        notes: list[str] = []
        if broken is not None:
            notes.append(f"Note: card {card_id} is BROKEN ({broken}): shown as far as the log holds it, not whole")
        if calculator is not None and calculator != own:
            notes.append(
                f"Note: scored with the calculator of {calculators.label(calculator)}; the card's own is {own.version}"
            )
        elif (said := calculators.card_note(card.calculator, card.calculator_source)) is not None:
            notes.append(f"Note: {said}")
        if match == "base":
            notes += [n for n in (match_note(m) for m in matches) if n is not None]
        # A retraction appended after ``until`` still withdraws the card: it is read from the whole card.
        if until is None or retraction_note(card) is not None:
            withdrawn = retraction(card)
        else:
            withdrawn = retraction(self.load_card(card_id, allow_broken=allow_broken))
        if withdrawn is not None:
            notes.append(f"Note: card {card_id} was {withdrawn['note']}")
        return CardRead(
            card=card,
            doc=doc,
            calculator=calc,
            own_calculator=own,
            set_id=sid,
            matches=matches,
            rescored=by_set or (calculator is not None and calculator != own),
            unknown=unknown,
            notes=notes,
            retraction=withdrawn,
            broken=broken,
        )

    def export(
        self,
        card_id: str,
        *,
        until: int | None = None,
        indent: int | None = None,
        baselines: Mapping[str, BaselineEntry] | None = None,
    ) -> str:
        """The card's JSON, identical to the toolkit's ``get_scorecard(card_id).model_dump_json()``; BaselinesNotKnown
        for an open server card whose baselines nothing revealed yet (unless given)."""
        read = self.read(card_id, until=until, entries=baselines)
        if read.unknown:
            raise BaselinesNotKnown(card_id, read.unknown)
        return document.to_json(read.doc, indent=indent)

    def baselines_known(self, card: CardState) -> bool:
        """False for an open card on an ARC server whose baselines nothing revealed yet (its score is no score)."""
        from ledger.rules.server import unknown_baselines

        return card.server is None or card.closed or not unknown_baselines(card, self.document(card.card_id, card=card))
