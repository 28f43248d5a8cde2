"""What the importers share: one card's result, the card as held, the baseline set of new cards, the import's close. A
card id comes only from what proves it, never from a name alone (see docs/import.md, 'Which card')."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ledger.domain import baselines as bl
from ledger.domain import calculators, document
from ledger.domain.events import (
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
from ledger.domain.translator import Observation, translate
from ledger.errors import ImportInputError, VersionConflict
from ledger.formats.finding import Found, head_guids
from ledger.formats.import_problems import Problem
from ledger.rules.audit_checks import compare_plays

if TYPE_CHECKING:
    from ledger.domain.document import ScorecardDoc
    from ledger.ledger import Ledger


_CARD_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_OPTION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

How = Literal["folder", "option", "ledger", "harness", "unproven"]


@dataclass(slots=True)
class CardPlan:
    files: list[Path]
    how: How


@dataclass(slots=True)
class GuidIndex:
    """play guid -> the card that holds it: the cards summary's play keys probed per guid, plus this import's cards."""

    ledger: Ledger
    _map: dict[str, str | None] = field(default_factory=dict)

    def owners(self, guids: set[str]) -> dict[str, str | None]:
        """guid -> the card holding a play of it, or None (one read for those not asked yet)."""
        new = [g for g in guids if g not in self._map]
        if new:
            from ledger.store.summary import play_owners

            found = play_owners(self.ledger.store, new)
            for g in new:
                self._map[g] = found.get(g)
        return {g: self._map[g] for g in guids}

    def add(self, guids: set[str], card_id: str) -> None:
        for g in guids:
            # A guid not asked yet is left to the read, which sees the committed card with any other holder.
            if g in self._map and self._map[g] is None:
                self._map[g] = card_id

    def held_elsewhere(self, guids: set[str], card_id: str) -> str | None:
        """The card other than ``card_id`` that holds one of ``guids`` (the first guid so held), or None."""
        return next((c for _, c in sorted(self.owners(guids).items()) if c is not None and c != card_id), None)


def plan_cards(found: Found, index: GuidIndex, card_id: str | None, problems: list[Problem]) -> dict[str, CardPlan]:
    cards = found.cards
    if card_id is not None:
        if not _OPTION_ID.match(card_id):
            raise ImportInputError(f"--card-id {card_id!r}: letters, digits and . _ : - only (at most 128)")
        if len(cards) > 1:
            raise ImportInputError(
                f"--card-id names one card, and the paths hold {len(cards)} ({', '.join(sorted(cards))}): "
                "import one run at a time"
            )
        (files,) = cards.values()
        return {card_id: CardPlan(files, "option")}
    out: dict[str, CardPlan] = {}
    for name, files in cards.items():
        if all(getattr(found.readers.get(f), "decides", None) == "frames" for f in files):
            out[name] = CardPlan(files, "harness")
        elif _CARD_ID.match(name):
            out.setdefault(name, CardPlan([], "folder")).files.extend(files)
        else:
            # No card folder: each file goes to the card its plays are on, so different runs stay apart.
            for f in files:
                owner = _owner_of(f, index)
                if owner is None:
                    out.setdefault(name, CardPlan([], "unproven")).files.append(f)
                    continue
                if owner not in out:
                    msg = f"card {owner} found by its plays' guids in the ledger (the folder {name!r} names no card)"
                    problems.append(Problem(str(f.parent), None, "harness", msg))
                out.setdefault(owner, CardPlan([], "ledger")).files.append(f)
    return out


def _owner_of(f: Path, index: GuidIndex) -> str | None:
    owners = set(index.owners(head_guids(f)).values())
    return owners.pop() if len(owners) == 1 else None


def compare_with_held(
    ledger: Ledger,
    held_id: str,
    obs: Iterable[tuple[int | None, Observation]],
    *,
    where: str,
    result: CardResult,
    problems: list[Problem],
    first_play: Callable[[CardState, Observation], list[AnyEvent]] | None = None,
    resets: bool = True,
) -> None:
    """Compare the card ``obs`` make with the held card; set ``result`` ("same card", or "differs", exit 1). Lines
    after the held card's close are left out and reported: the server counted nothing after it."""
    held = ledger.load_card(held_id)
    how = "imported" if held.close_reason == "end_of_import" else "captured live"
    closed = held.closed_at if held.closed_at is not None and held.close_reason != "end_of_import" else None
    card = new_card(held_id)
    guids: set[str] = set()
    first_ts, started, after, first_after = None, False, 0, None
    for ln, o in obs:
        guids.add(o.guid)
        first_ts = first_ts or o.ts
        if closed is not None and o.ts > closed:
            after += 1
            first_after = ln if after == 1 else first_after
            continue
        if not started:
            started = True
            # The recordings are counted as the toolkit that played the held card counted (its release's rules).
            apply(card, CardOpened(ts=o.ts, card_id=held_id, calculator=held.calculator))
            if first_play is not None:
                first_play(card, o)
        translate(card, o)
    if not started and first_ts is not None:
        apply(card, CardOpened(ts=first_ts, card_id=held_id, calculator=held.calculator))
    if after:
        assert closed is not None  # only lines after a close are left out
        at = f" (from line {first_after})" if first_after is not None else ""
        msg = (
            f"{after} line(s) after the card closed at {closed.isoformat()}{at}, not counted "
            "(the server counted nothing after the close)"
        )
        problems.append(Problem(where, first_after, "not_counted", msg))
    diffs = compare_plays(held, card, guids, resets=resets)
    result.card_id = held_id
    if diffs:
        for d in diffs[:10]:
            problems.append(Problem(where, None, "cross_check", d))
        result.status, result.exit_code = "differs", 1
        result.error = (
            f"its plays are on card {held_id} ({how}) and differ in {len(diffs)} place(s): not imported "
            "(one run is one card)"
        )
    else:
        result.status = "same card"
        msg = f"same card, equal: its plays are on card {held_id} ({how}), found by their guids; nothing written"
        problems.append(Problem(where, None, "harness", msg))


@dataclass(slots=True)
class CardResult:
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
    format: str = "toolkit"
    inferred: int = 0
    #: Actions the recording's lines name (``action_input``), none inferred.
    recorded: int = 0
    undecided: int = 0
    unreproduced: int = 0
    resets_known: bool = True
    baselines_attached: bool = False
    #: Lines after a play's end (no RESET since): kept, but neither the toolkit nor the server counts them.
    not_counted: int = 0

    def refuse(self, exit_code: int, error: str) -> None:
        self.status, self.exit_code, self.error = "not imported", exit_code, error


#: CardResult's fields under another name in the summary JSON.
JSON_NAMES = {
    "inferred": "inferred_actions",
    "recorded": "recorded_actions",
    "undecided": "undecided_lines",
    "unreproduced": "unreproduced_lines",
}


@dataclass(slots=True)
class Existing:
    card: CardState
    progress: dict[str, RecordingImported]
    imported: bool


#: How many times a card's import is tried while other writers keep appending to the card.
ATTEMPTS = 5


def with_retries(
    card_id: str, files: int, attempt: Callable[[list[Problem]], tuple[CardResult, int]], problems: list[Problem]
) -> tuple[CardResult, int]:
    """Run ``attempt`` again when another writer appended to the card meanwhile (the last attempt's problems kept)."""
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
    """Apply ``read`` and ``CardClosed(end_of_import)`` to ``card`` into ``out``; returns the document at close."""
    for ev in read:
        apply(card, ev)
        out.append(ev)
    doc = score_card(card, bmap)
    closed = CardClosed(ts=ts, reason="end_of_import", document_sha256=document.sha256(doc))
    apply(card, closed)
    out.append(closed)
    return doc


def load_existing(ledger: Ledger, card_id: str) -> Existing | None:
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
    """What a new card is scored with: the --environments set (recorded on first need) and the --calculator release."""

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

    def new_card(
        self, ts: datetime, card_id: str, tags: list[str] | None = None
    ) -> tuple[CardState, CardOpened, dict[str, BaselineEntry]]:
        """A new card, opened with the set (:meth:`for_new_card`) and its calculator: the stated release, else the
        newest, recorded as assumed; with the set's entries."""
        set_id, bmap = self.for_new_card()
        calc, source = (self.calculator, "user") if self.calculator is not None else (None, "assumed")
        opened = CardOpened(
            ts=ts,
            card_id=card_id,
            tags=tags,
            baselines_id=set_id,
            calculator=calc or calculators.NEWEST.version,
            calculator_source=source,
        )
        card = new_card(card_id)
        apply(card, opened)
        return card, opened, bmap

    def game_info(self, game_id: str) -> Any:
        if self.folder is None:
            return None
        if self._infos is None:
            from ledger.toolkit.game_files import scan_games

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
    """With --environments, give an imported card without baselines this set (reopen, attach, close)."""
    card = existing.card
    if baselines.entries is None or card.baselines_id is not None or not card.closed:
        return
    set_id, bmap = baselines.for_new_card()
    assert set_id is not None
    ts = card.closed_at or card.last_ts or datetime.now(UTC)
    out: list[AnyEvent] = []
    version = card.events
    close_import(card, bmap, ts, [CardReopened(ts=ts), BaselinesAttached(ts=ts, baselines_id=set_id)], out)
    # The card ends closed: the facade's snapshot policy caches its projection, as live capture's close does.
    ledger.append_card(card.card_id, out, version, state=card)
    result.status, result.baselines_attached, result.events = "updated", True, len(out)


@dataclass(frozen=True, slots=True)
class ImportOptions:
    ledger: Ledger
    baselines: Baselines
    #: The card ids the ledger's plays are on: a play held on another card is compared with it, never written twice.
    index: GuidIndex
    strict: bool = False
    progress: Callable[[int], None] | None = None
    allow_repeats: bool = False
    #: Run folders the user named (resolved): one its recording's import does not use is an error, not a note.
    named_runs: frozenset[Path] = frozenset()


@dataclass(slots=True)
class ImportSummary:
    cards: list[CardResult]
    problems: list[Problem]
    bytes_read: int
    seconds: float
    baselines_id: str | None

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.seconds if self.seconds > 0 else 0.0

    @property
    def exit_code(self) -> int:
        """2 if a card was refused for its input, else 1 if the ledger refused one or recordings differ, else 0."""
        codes = {c.exit_code for c in self.cards}
        if any(p.kind == "unknown_format" for p in self.problems):
            codes.add(2)
        return 2 if 2 in codes else (1 if 1 in codes else 0)

    def totals(self) -> dict[str, int]:
        n = Counter(c.status for c in self.cards)
        return {
            "cards": len(self.cards),
            **{s.replace(" ", "_"): n[s] for s in ("imported", "updated", "already imported", "not imported")},
            **self._sums("plays", "events", "lines", "not_counted"),
            "same_card": n["same card"],
            "differs": n["differs"],
        }

    def inference(self) -> dict[str, int]:
        return {
            **self._sums("inferred", "recorded", "undecided", "unreproduced"),
            "resets_unknown_cards": sum(c.format == "harness" and not c.resets_known for c in self.cards),
            **self._sums("baselines_attached"),
        }

    def _sums(self, *names: str) -> dict[str, int]:
        return {JSON_NAMES.get(k, k): sum(getattr(c, k) for c in self.cards) for k in names}

    def skipped(self) -> dict[str, int]:
        out: Counter[str] = Counter()
        for c in self.cards:
            out.update(c.skipped)
        return dict(out)
