"""Import the toolkit's JSONL recordings: every line goes through the same translator as live capture.

Layout (``arc_agi/wrapper.py``): ``<recordings_dir>/<card_id>/<game_id>-<guid>.jsonl``, one file per environment
wrapper (one game instance, one guid); each line is ``{"timestamp": ..., "data": {game_id, state,
levels_completed, win_levels, action_input, guid, full_reset, available_actions, frame?}}``, written with
``json.dump`` before the toolkit updates its scorecard. The card id is the folder name.

**Reading.** Only complete lines (ending in a newline) are consumed. A last line without a newline is a record
being written or cut off by a killed process: it is reported as a truncated last line and left for a later import
(unless it is a whole record that only lacks its newline). The frame is the last key the toolkit writes, so the fast
path decodes only the bytes before ``, "frame": `` and never parses the frame: it checks that the frame's bytes hold
no ``"`` (no other key and no second record glued on after them) and that the line ends the record (``}}``), and
reads only whether the frame is ``[]``. Any line that does not fit that shape is decoded whole (msgspec, the frame
kept raw), so the result is the same, only slower. Lines longer than :data:`MAX_LINE` are streamed, keeping only
their head: memory stays bounded whatever the input.

**Empty frames.** The toolkit updates its scorecard only for a response with a non-empty frame; arcengine answers an
action sent after GAME_OVER or WIN (no RESET since) with an empty frame and ``levels_completed`` 0. With frame data
that is read from the line; without it (``include_frame_data=False``) it is inferred from the file's previous line:
a non-RESET action received while the game was GAME_OVER or WIN. A line with no guid is skipped, as the toolkit
does not score it.

**Events.** A card's files are merged in timestamp order (ties keep file-name order) and translated by
:func:`ledger.translator.translate`. A new card gets ``CardOpened`` at its first timestamp (with the baseline set of
``environments`` when given, content-addressed as live capture stores it; without it the card has no baseline set
and every game shows the toolkit's "No Matching EnvironmentInfo" run until exported with ``--baselines``), then the
events with the recordings' own timestamps, one ``RecordingImported`` per file read, and
``CardClosed(end_of_import)`` at its last timestamp. All of it is one ``Store.append``: one transaction per card.

**Idempotent and resumable.** ``RecordingImported`` records how far each file was read, so importing the same files
again adds nothing ("already imported") and a file that grew is read from where the last import stopped. A grown
card is reopened: ``CardReopened``, the new lines' events, new ``RecordingImported`` events and a new
``CardClosed(end_of_import)`` at the card's last timestamp, again in one transaction. The log is append-only, so new
lines come after everything already stored (merged in timestamp order among themselves): a game first played in
lines imported later is listed after the games already on the card. A killed import loses only the card whose
transaction it was in; the next import does it. Not imported (the card is left as it is):
a card that is in the ledger from live capture (its actions would count twice), and a file shorter than what was
imported or whose imported bytes changed (it was rewritten).

**Bad input.** A line that is not JSON or has wrong types is reported with its file and line number and skipped
(the line is consumed, so it is reported once); a file whose lines disagree with its name (``<game_id>-<guid>``) is
reported and imported from what the lines say, which is what the toolkit scored. With ``strict``, either makes the
card fail with nothing of it committed; a truncated last line does not (every killed run leaves one). An empty file
is reported and imports nothing; a card whose files hold no valid line is not created. Unknown fields are ignored.
Card metadata the recordings do not hold (tags, source_url, opaque, the API key, seeds) is absent from imported cards.
"""

from __future__ import annotations

import heapq
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ledger.core import baselines as bl
from ledger.core import document
from ledger.core.events import (
    AnyEvent,
    BaselineEntry,
    CardClosed,
    CardOpened,
    CardReopened,
    PlayStarted,
    RecordingImported,
    card_stream,
    decode,
)
from ledger.core.projection import CardState, apply, new_card
from ledger.core.scoring import score_card
from ledger.core.translator import Observation, translate
from ledger.errors import ImportInputError, VersionConflict
from ledger.toolkit.environments import scan_environments
from ledger.toolkit.recordings import (
    FATAL_KINDS,
    SKIP_REASONS,
    STRICT_KINDS,
    FileRead,
    Problem,
    RewrittenError,
    find_recordings,
    read_recording,
)

if TYPE_CHECKING:
    from ledger.ledger import Ledger


@dataclass(slots=True)
class CardResult:
    """What the import did with one card."""

    card_id: str
    status: Literal["imported", "updated", "already imported", "nothing to import", "not imported"]
    files: int = 0
    lines: int = 0
    plays: int = 0
    events: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    #: 0, or the exit code this card asks for: 1 (the ledger refused it), 2 (bad input under ``strict``).
    exit_code: int = 0


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
        """2 if a card failed on bad input under strict, else 1 if the ledger refused one, else 0."""
        codes = {c.exit_code for c in self.cards}
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
        }

    def skipped(self) -> dict[str, int]:
        """Skipped lines by reason, over every card."""
        out: Counter[str] = Counter()
        for c in self.cards:
            out.update(c.skipped)
        return dict(out)


# -- importing cards ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Existing:
    card: CardState
    progress: dict[str, RecordingImported]
    imported: bool


def _load_existing(ledger: Ledger, card_id: str) -> _Existing | None:
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
    return _Existing(card, progress, imported)


def _ts_key(o: Observation) -> datetime:
    return o.ts


class _Baselines:
    """The --environments set, recorded in the ledger only when a new card needs it."""

    def __init__(self, ledger: Ledger, entries: Sequence[BaselineEntry] | None) -> None:
        self.ledger = ledger
        self.entries = entries
        self.set_id: str | None = None

    def for_new_card(self) -> tuple[str | None, dict[str, BaselineEntry]]:
        if self.entries is None:
            return None, {}
        if self.set_id is None:
            self.set_id = self.ledger.record_baselines(self.entries)
        return self.set_id, bl.as_map(self.entries)


def _import_card(
    ledger: Ledger,
    card_id: str,
    files: list[Path],
    baselines: _Baselines,
    strict: bool,
    progress: Callable[[int], None] | None,
    problems: list[Problem],
) -> tuple[CardResult, int]:
    for _attempt in range(5):
        found: list[Problem] = []
        try:
            result = _import_card_once(ledger, card_id, files, baselines, strict, progress, found)
        except VersionConflict:
            # Another writer appended to this card meanwhile: look again at what it holds now.
            continue
        problems.extend(found)
        return result
    result = CardResult(card_id, "not imported", len(files), error="other writers kept changing this card", exit_code=1)
    return result, 0


def _import_card_once(
    ledger: Ledger,
    card_id: str,
    files: list[Path],
    baselines: _Baselines,
    strict: bool,
    progress: Callable[[int], None] | None,
    problems: list[Problem],
) -> tuple[CardResult, int]:
    existing = _load_existing(ledger, card_id)
    result = CardResult(card_id, "nothing to import", len(files))
    if existing is not None and not existing.imported:
        msg = f"card {card_id} is in the ledger from live capture: not imported (its actions would count twice)"
        problems.append(Problem(str(files[0].parent), None, "captured_live", msg))
        result.status, result.error, result.exit_code = "not imported", msg, 1
        if progress is not None:
            progress(sum(_size(f) for f in files))
        return result, 0

    reads: list[FileRead] = []
    card_problems: list[Problem] = []
    bytes_read = 0
    for f in files:
        since = existing.progress.get(f.name) if existing is not None else None
        if progress is not None and since is not None:
            progress(min(since.offset, _size(f)))
        try:
            r = read_recording(f, since=since, progress=progress)
        except RewrittenError as e:
            card_problems.append(Problem(str(f), None, "rewritten", f"{e}: it was rewritten, not imported"))
            if progress is not None:
                progress(max(0, _size(f) - since.offset))  # type: ignore[union-attr]
            continue
        except OSError as e:
            card_problems.append(Problem(str(f), None, "unreadable", f"cannot read: {e.strerror or e}"))
            continue
        bytes_read += r.bytes_read
        if r.start == 0 and r.end == 0 and r.bytes_read == 0:
            card_problems.append(Problem(str(f), None, "empty", "empty file: nothing to import"))
        card_problems.extend(r.problems)
        reads.append(r)
    problems.extend(card_problems)
    for r in reads:
        for reason, n in r.skip_reasons.items():
            result.skipped[SKIP_REASONS[reason]] = result.skipped.get(SKIP_REASONS[reason], 0) + n

    fatal = [p for p in card_problems if p.kind in FATAL_KINDS]
    if fatal:
        result.status, result.error, result.exit_code = "not imported", str(fatal[0]), 1
        return result, bytes_read
    bad = [p for p in card_problems if p.kind in STRICT_KINDS]
    if strict and bad:
        result.status, result.exit_code = "not imported", 2
        result.error = f"{len(bad)} problem(s) in its recordings (--strict): nothing of this card imported"
        return result, bytes_read

    advanced = [r for r in reads if r.end > r.start]
    result.lines = sum(r.new_lines for r in advanced)
    if not advanced:
        result.status = "already imported" if existing is not None else "nothing to import"
        return result, bytes_read
    observations = [r.observations for r in advanced if r.observations]
    if existing is None and not observations:
        # Only bad lines: no card to open (they are reported again next time).
        result.lines = 0
        return result, bytes_read

    out: list[AnyEvent] = []
    if existing is None:
        first = min(o[0].ts for o in observations)
        set_id, bmap = baselines.for_new_card()
        card = new_card(card_id)
        opened = CardOpened(ts=first, card_id=card_id, baselines_id=set_id)
        apply(card, opened)
        out.append(opened)
        version = 0
        last = first
    else:
        card = existing.card
        version = card.events
        bmap = ledger.card_baselines(card)
        last = card.closed_at or card.last_ts or datetime.now(UTC)
        if card.closed:
            starts = [o[0].ts for o in observations]
            reopened = CardReopened(ts=min(starts) if starts else last)
            apply(card, reopened)
            out.append(reopened)

    merged = (
        heapq.merge(*observations, key=_ts_key)
        if len(observations) > 1
        else iter(observations[0] if observations else ())
    )
    for obs in merged:
        evs = translate(card, obs)
        if evs:
            out.extend(evs)
        if obs.ts > last:
            last = obs.ts
    plays = sum(1 for e in out if type(e) is PlayStarted)
    for r in advanced:
        ev = RecordingImported(
            ts=r.last_ts or last,
            file=r.name,
            offset=r.end,
            lines=r.lines,
            skipped=r.skipped,
            tail_sha256=r.tail_sha256,
            game_state=r.game_state,  # type: ignore[arg-type]
        )
        apply(card, ev)
        out.append(ev)
    doc = score_card(card, bmap)
    closed = CardClosed(ts=last, reason="end_of_import", document_sha256=document.sha256(doc))
    apply(card, closed)
    out.append(closed)
    stored = ledger.store.append(card_stream(card_id), out, expected_version=version)
    # The card is closed again: cache its projection, as live capture does at close.
    ledger.save_snapshot(card_id, card, stored[-1].version, stored[-1].seq)
    result.status = "imported" if existing is None else "updated"
    result.events = len(out)
    result.plays = plays
    return result, bytes_read


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def total_bytes(cards: dict[str, list[Path]]) -> int:
    """The bytes of every file to import (the progress bar's total)."""
    return sum(_size(f) for files in cards.values() for f in files)


def import_recordings(
    ledger: Ledger,
    paths: Iterable[str | os.PathLike[str]] | None = None,
    *,
    cards: dict[str, list[Path]] | None = None,
    environments: str | os.PathLike[str] | None = None,
    strict: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Import the recordings under ``paths`` (or the ``cards`` from :func:`find_recordings`) into ``ledger``.

    ``environments``: an ``environment_files`` tree whose ``metadata.json`` baselines new cards are stored with.
    ``progress`` is called with byte counts as files are read. Raises :class:`ImportInputError` on bad paths or
    an ``environments`` folder without any ``metadata.json``.
    """
    problems: list[Problem] = []
    if cards is None:
        cards, problems = find_recordings(paths or [])
    entries: list[BaselineEntry] | None = None
    if environments is not None:
        found, env_problems = scan_environments(environments)
        if not found:
            raise ImportInputError(f"{environments}: no metadata.json in it (an environment_files tree)")
        problems.extend(Problem(p, None, "environments", "skipped (the toolkit skips it too)") for p in env_problems)
        entries = bl.canonical(found)
    baselines = _Baselines(ledger, entries)
    t0 = time.perf_counter()
    results: list[CardResult] = []
    bytes_read = 0
    for card_id, files in cards.items():
        r, n = _import_card(ledger, card_id, files, baselines, strict, progress, problems)
        results.append(r)
        bytes_read += n
    return ImportSummary(results, problems, bytes_read, time.perf_counter() - t0, baselines.set_id)
