"""What both importers (toolkit recordings, harness recordings) share: one card's result, the card as the ledger
holds it, the baseline set new cards are stored with, attaching baselines to a card imported without them, and how
an import closes the card.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ledger.domain import baselines as bl
from ledger.domain import calculators, document
from ledger.domain.events import (
    ActionIgnored,
    AnyEvent,
    BaselineEntry,
    BaselinesAttached,
    CardClosed,
    CardOpened,
    CardReopened,
    RecordingImported,
    card_stream,
    decode,
)
from ledger.domain.projection import CardState, apply, new_card
from ledger.domain.scoring import score_card
from ledger.errors import VersionConflict
from ledger.formats.import_problems import Problem

if TYPE_CHECKING:
    from ledger.domain.document import ScorecardDoc
    from ledger.imports.import_identity import GuidIndex
    from ledger.ledger import Ledger


@dataclass(slots=True)
class CardResult:
    """What the import did with one card."""

    card_id: str
    status: Literal[
        "imported", "updated", "already imported", "nothing to import", "not imported", "same card", "differs"
    ]
    files: int = 0
    lines: int = 0
    plays: int = 0
    events: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    #: 0, or the exit code this card asks for: 1 (the ledger refused it), 2 (bad input under ``strict``).
    exit_code: int = 0
    #: ``toolkit`` or ``harness`` (ARC-AGI-3-Agents recordings, whose actions are inferred).
    format: str = "toolkit"
    #: Harness imports: actions recovered, lines that could also have been a level RESET, lines no action
    #: reproduces (skipped), and whether resets are known (the game's code was given).
    inferred: int = 0
    undecided: int = 0
    unreproduced: int = 0
    resets_known: bool = True
    #: Actions taken as the recording's lines name them (``action_input``), none inferred.
    recorded: int = 0
    #: --environments gave baselines to a card imported without them.
    baselines_attached: bool = False
    #: Lines after a play's end (GAME_OVER or WIN, no RESET since): kept, but neither the toolkit nor the server
    #: counts them.
    not_counted: int = 0


@dataclass(slots=True)
class Existing:
    """A card the ledger holds already: its state, each file's import progress, whether an import made it."""

    card: CardState
    progress: dict[str, RecordingImported]
    imported: bool


#: How many times a card's import is tried while other writers keep appending to the card.
ATTEMPTS = 5


def with_retries(
    card_id: str, files: int, attempt: Callable[[list[Problem]], tuple[CardResult, int]], problems: list[Problem]
) -> tuple[CardResult, int]:
    """Run ``attempt`` (one import of a card, told where to put its problems) again when another writer appended to
    the card meanwhile (:class:`VersionConflict`); only the finished attempt's problems are kept."""
    for _attempt in range(ATTEMPTS):
        found: list[Problem] = []
        try:
            result = attempt(found)
        except VersionConflict:
            continue  # look again at what the card holds now
        problems.extend(found)
        return result
    gave_up = "other writers kept changing this card"
    return CardResult(card_id, "not imported", files, error=gave_up, exit_code=1), 0


def close_import(
    card: CardState, bmap: Mapping[str, BaselineEntry], ts: datetime, read: Sequence[AnyEvent], out: list[AnyEvent]
) -> ScorecardDoc:
    """Apply ``read`` (what the import says of its files: lines skipped, how far each was read) then the
    ``CardClosed(end_of_import)`` at ``ts`` with the scored document's hash to ``card``, appending them to ``out``;
    returns that document. Every import ends a card this way."""
    for ev in read:
        apply(card, ev)
        out.append(ev)
    doc = score_card(card, bmap)
    closed = CardClosed(ts=ts, reason="end_of_import", document_sha256=document.sha256(doc))
    apply(card, closed)
    out.append(closed)
    return doc


def load_existing(ledger: Ledger, card_id: str) -> Existing | None:
    """The card as the ledger holds it (None if it holds none)."""
    bodies, _, _ = ledger.store.read_bodies(card_stream(card_id))
    if not bodies:
        return None
    card = new_card(card_id)
    progress: dict[str, RecordingImported] = {}
    imported = False
    for b in bodies:
        e = decode(b)
        apply(card, e)
        if type(e) is RecordingImported:
            progress[e.file] = e
            imported = True
        elif type(e) is CardClosed and e.reason == "end_of_import":
            imported = True
    return Existing(card, progress, imported)


class Baselines:
    """What a new card is scored with: the --environments set, recorded in the ledger only when a new card needs
    it (and the games' code), and the --calculator release (a stated arc-agi version; None: not stated)."""

    def __init__(
        self,
        ledger: Ledger,
        entries: Sequence[BaselineEntry] | None,
        folder: str | os.PathLike[str] | None = None,
        calculator: str | None = None,
    ) -> None:
        self.ledger = ledger
        self.entries = entries
        self.set_id: str | None = None
        self.folder = folder
        self.calculator = calculators.get(calculator).version if calculator is not None else None
        self._infos: dict[str, Any] | None = None

    def opened(self, ts: datetime, card_id: str, set_id: str | None, tags: list[str] | None = None) -> CardOpened:
        """A new card's CardOpened: its baseline set, and its calculator (the stated release, else the newest,
        recorded as assumed)."""
        calc, source = (self.calculator, "user") if self.calculator is not None else (None, "assumed")
        return CardOpened(
            ts=ts,
            card_id=card_id,
            tags=tags,
            baselines_id=set_id,
            calculator=calc or calculators.NEWEST.version,
            calculator_source=source,
        )

    def game_info(self, game_id: str) -> Any:
        """The toolkit's EnvironmentInfo of ``game_id`` under --environments (None without it or if absent)."""
        if self.folder is None:
            return None
        if self._infos is None:
            from ledger.toolkit.environments import scan_games

            self._infos = scan_games(self.folder)
        return self._infos.get(game_id)

    def for_new_card(self) -> tuple[str | None, dict[str, BaselineEntry]]:
        """The set's id (recorded on first use) and entries for a new card; (None, {}) without --environments."""
        if self.entries is None:
            return None, {}
        if self.set_id is None:
            self.set_id = self.ledger.record_baselines(self.entries)
        return self.set_id, bl.as_map(self.entries)


def attach_baselines(ledger: Ledger, existing: Existing, baselines: Baselines, result: CardResult) -> None:
    """With --environments, give an imported card that has no baseline set this one (reopen, attach, close).

    The close before it keeps the document it recorded (scored without baselines, as the card stood then).
    """
    card = existing.card
    if baselines.entries is None or card.baselines_id is not None or not card.closed:
        return
    set_id, _ = baselines.for_new_card()
    assert set_id is not None
    ts = card.closed_at or card.last_ts or datetime.now(UTC)
    out: list[AnyEvent] = [CardReopened(ts=ts), BaselinesAttached(ts=ts, baselines_id=set_id)]
    version = card.events
    for e in out:
        apply(card, e)
    doc = score_card(card, ledger.card_baselines(card))
    closed = CardClosed(ts=ts, reason="end_of_import", document_sha256=document.sha256(doc))
    apply(card, closed)
    out.append(closed)
    # The card ends closed: the facade's snapshot policy caches its projection, as live capture's close does.
    ledger.append_card(card.card_id, out, version, state=card)
    result.status, result.baselines_attached, result.events = "updated", True, len(out)


def count_not_counted(events: Sequence[AnyEvent], result: CardResult) -> None:
    """Count the lines the server would not have counted: actions answered after their play ended."""
    result.not_counted += sum(1 for e in events if type(e) is ActionIgnored)


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """What every card of one import is read and written with (both importers take it whole)."""

    ledger: Ledger
    baselines: Baselines
    #: The card ids the ledger's plays are on: a play held on another card is compared with it, never written twice.
    index: GuidIndex
    strict: bool = False
    progress: Callable[[int], None] | None = None
    allow_repeats: bool = False
    #: Benchmarking run folders the user named (resolved): one the import of its recording does not use is an
    #: error (exit 2), not a note.
    named_runs: frozenset[Path] = frozenset()


@dataclass(slots=True)
class ImportSummary:
    """The whole import: per-card results, problems, bytes read and time taken."""

    cards: list[CardResult]
    problems: list[Problem]
    bytes_read: int
    seconds: float
    baselines_id: str | None

    @property
    def mb_per_s(self) -> float:
        """Recording bytes read per second (MB = 10^6 bytes)."""
        return self.bytes_read / 1e6 / self.seconds if self.seconds > 0 else 0.0

    @property
    def exit_code(self) -> int:
        """2 if a card was refused for its input (no recording, no proven card, repeated lines, bad input under
        strict), else 1 if the ledger refused a card or recordings differ from the card holding their plays, else 0."""
        codes = {c.exit_code for c in self.cards}
        if any(p.kind == "unknown_format" for p in self.problems):
            codes.add(2)
        return 2 if 2 in codes else (1 if 1 in codes else 0)

    def totals(self) -> dict[str, int]:
        """Counts over every card."""
        return {
            "cards": len(self.cards),
            "imported": sum(c.status == "imported" for c in self.cards),
            "updated": sum(c.status == "updated" for c in self.cards),
            "already_imported": sum(c.status == "already imported" for c in self.cards),
            "not_imported": sum(c.status == "not imported" for c in self.cards),
            "plays": sum(c.plays for c in self.cards),
            "events": sum(c.events for c in self.cards),
            "lines": sum(c.lines for c in self.cards),
            "not_counted": sum(c.not_counted for c in self.cards),
            "same_card": sum(c.status == "same card" for c in self.cards),
            "differs": sum(c.status == "differs" for c in self.cards),
        }

    def inference(self) -> dict[str, int]:
        """Harness imports and baselines: actions inferred, undecided and unreproduced lines, cards whose resets
        are unknown (no game code), cards that were given baselines."""
        return {
            "inferred_actions": sum(c.inferred for c in self.cards),
            "recorded_actions": sum(c.recorded for c in self.cards),
            "undecided_lines": sum(c.undecided for c in self.cards),
            "unreproduced_lines": sum(c.unreproduced for c in self.cards),
            "resets_unknown_cards": sum(c.format == "harness" and not c.resets_known for c in self.cards),
            "baselines_attached": sum(c.baselines_attached for c in self.cards),
        }

    def skipped(self) -> dict[str, int]:
        """Skipped lines by reason, over every card."""
        out: Counter[str] = Counter()
        for c in self.cards:
            out.update(c.skipped)
        return dict(out)
