"""Import the toolkit's JSONL recordings: every line goes through the same translator as live capture.

How the files are found and read (their layout, truncated last lines, empty frames, bad lines) is
:mod:`ledger.toolkit.recordings`; this module turns what they hold into cards. A harness recording
(``{game_id}.{agent}.{uuid}.recording.jsonl``) is a card of its own, imported by
:mod:`ledger.services.importing_harness`; a file in neither format is reported (exit 2) and makes no card. Lines
skipped at import are recorded with the card (``LinesSkipped``); every import records the sha256 of all the bytes it
consumed, so a file changed anywhere before its offset is refused; ``--environments`` also attaches its baseline
set to imported cards that have none (``BaselinesAttached``).

**Events.** A card's files are merged in timestamp order (ties keep file-name order) and translated by
:func:`ledger.core.translator.translate`. A new card gets ``CardOpened`` at its first timestamp (with the baseline
set of ``environments`` when given, content-addressed as live capture stores it; without it the card has no baseline set
and every game shows the toolkit's "No Matching EnvironmentInfo" run until exported with ``--baselines``), then the
events with the recordings' own timestamps, one ``RecordingImported`` per file read, and
``CardClosed(end_of_import)`` at its last timestamp. All of it is one ``Ledger.append_card``: one transaction per card.

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.core import baselines as bl
from ledger.core import document
from ledger.core.events import (
    AnyEvent,
    BaselineEntry,
    CardClosed,
    CardOpened,
    CardReopened,
    LinesSkipped,
    PlayStarted,
    RecordingImported,
)
from ledger.core.projection import CardState, apply, new_card
from ledger.core.scoring import score_card
from ledger.core.translator import Observation, translate
from ledger.errors import ImportInputError, VersionConflict
from ledger.services.import_cards import Baselines, CardResult, Existing, attach_baselines, load_existing
from ledger.toolkit.environments import scan_environments
from ledger.toolkit.harness import FORMATS, parse_name, sniff
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
        """2 if a card failed on bad input under strict or a file is in no format read, else 1 if the ledger
        refused a card, else 0."""
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
        }

    def inference(self) -> dict[str, int]:
        """Harness imports and baselines: actions inferred, undecided and unreproduced lines, cards whose resets
        are unknown (no game code), cards that were given baselines."""
        return {
            "inferred_actions": sum(c.inferred for c in self.cards),
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


# -- importing cards ---------------------------------------------------------------------------------------------


def _ts_key(o: Observation) -> datetime:
    return o.ts


def _import_card(
    ledger: Ledger,
    card_id: str,
    files: list[Path],
    baselines: Baselines,
    strict: bool,
    progress: Callable[[int], None] | None,
    problems: list[Problem],
) -> tuple[CardResult, int]:
    files = _known_formats(files, problems)
    if not files:
        return CardResult(card_id, "not imported", 0, error="no recording in a format the ledger reads", exit_code=2), 0
    if len(files) == 1 and parse_name(files[0].name) is not None:
        from ledger.services.importing_harness import import_harness_card

        return import_harness_card(ledger, card_id, files[0], baselines, strict, progress, problems)
    for _attempt in range(5):
        found: list[Problem] = []
        try:
            result = _import_card_once(ledger, card_id, files, baselines, strict, progress, found)
        except VersionConflict:
            # Another writer appended to this card meanwhile: look again at what it holds now.
            continue
        problems.extend(found)
        return result
    gave_up = "other writers kept changing this card"
    return CardResult(card_id, "not imported", len(files), error=gave_up, exit_code=1), 0


def _import_card_once(
    ledger: Ledger,
    card_id: str,
    files: list[Path],
    baselines: Baselines,
    strict: bool,
    progress: Callable[[int], None] | None,
    problems: list[Problem],
) -> tuple[CardResult, int]:
    existing = load_existing(ledger, card_id)
    result = CardResult(card_id, "nothing to import", len(files))
    if existing is not None and not existing.imported:
        msg = f"card {card_id} is in the ledger from live capture: not imported (its actions would count twice)"
        problems.append(Problem(str(files[0].parent), None, "captured_live", msg))
        result.status, result.error, result.exit_code = "not imported", msg, 1
        if progress is not None:
            progress(sum(_size(f) for f in files))
        return result, 0

    reads, card_problems, bytes_read = _read_new_lines(files, existing, progress)
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
        if existing is not None:
            attach_baselines(ledger, existing, baselines, result)
        return result, bytes_read
    observations = [r.observations for r in advanced if r.observations]
    if existing is None and not observations:
        # Only bad lines: no card to open (they are reported again next time).
        result.lines = 0
        return result, bytes_read

    out: list[AnyEvent] = []
    card, version, bmap, last = _open_or_reopen(ledger, card_id, existing, baselines, observations, out)
    last = _translate_in_time_order(card, observations, out, last)
    plays = sum(1 for e in out if type(e) is PlayStarted)
    _record_progress_and_close(card, advanced, bmap, last, out)
    # The card ends closed: the facade's snapshot policy caches its projection, as live capture's close does.
    ledger.append_card(card_id, out, version, state=card)
    result.status = "imported" if existing is None else "updated"
    result.events = len(out)
    result.plays = plays
    return result, bytes_read


def _read_new_lines(
    files: list[Path], existing: Existing | None, progress: Callable[[int], None] | None
) -> tuple[list[FileRead], list[Problem], int]:
    """Each file read from where the last import stopped, the card's problems, and the bytes read.

    A rewritten or unreadable file is a problem and yields no read; an empty one is a problem and an empty read.
    """
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
    return reads, card_problems, bytes_read


def _open_or_reopen(
    ledger: Ledger,
    card_id: str,
    existing: Existing | None,
    baselines: Baselines,
    observations: list[list[Observation]],
    out: list[AnyEvent],
) -> tuple[CardState, int, dict[str, BaselineEntry], datetime]:
    """The card to append to, its version, baselines and last timestamp; appends its CardOpened or CardReopened
    to ``out`` (a new card opens at its first line; a closed one reopens at its earliest new line)."""
    if existing is None:
        first = min(o[0].ts for o in observations)
        set_id, bmap = baselines.for_new_card()
        card = new_card(card_id)
        opened = CardOpened(ts=first, card_id=card_id, baselines_id=set_id)
        apply(card, opened)
        out.append(opened)
        return card, 0, bmap, first
    card = existing.card
    version = card.events
    bmap = ledger.card_baselines(card)
    last = card.closed_at or card.last_ts or datetime.now(UTC)
    if card.closed:
        starts = [o[0].ts for o in observations]
        reopened = CardReopened(ts=min(starts) if starts else last)
        apply(card, reopened)
        out.append(reopened)
    return card, version, bmap, last


def _translate_in_time_order(
    card: CardState, observations: list[list[Observation]], out: list[AnyEvent], last: datetime
) -> datetime:
    """Append the events of every file's lines, merged in timestamp order; the card's last timestamp after them."""
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
    return last


def _record_progress_and_close(
    card: CardState, advanced: list[FileRead], bmap: dict[str, BaselineEntry], last: datetime, out: list[AnyEvent]
) -> None:
    """Append each file's LinesSkipped and RecordingImported (how far it was read), then CardClosed(end_of_import)
    with the scored document's hash."""
    for r in advanced:
        if r.skipped_lines:
            skipped = LinesSkipped(ts=r.last_ts or last, file=r.name, lines=r.skipped_lines)
            apply(card, skipped)
            out.append(skipped)
        ev = RecordingImported(
            ts=r.last_ts or last,
            file=r.name,
            offset=r.end,
            lines=r.lines,
            skipped=r.skipped,
            tail_sha256=r.tail_sha256,
            game_state=r.game_state,  # type: ignore[arg-type]
            prefix_sha256=r.prefix_sha256,
        )
        apply(card, ev)
        out.append(ev)
    doc = score_card(card, bmap)
    closed = CardClosed(ts=last, reason="end_of_import", document_sha256=document.sha256(doc))
    apply(card, closed)
    out.append(closed)


def _known_formats(files: list[Path], problems: list[Problem]) -> list[Path]:
    """The files in a format the ledger reads; every other one is reported (exit 2) and makes no card."""
    kept = []
    for f in files:
        try:
            fmt = sniff(f)
        except OSError:
            fmt = "toolkit"  # the reader reports it as unreadable
        if fmt == "unknown":
            formats = "; ".join(FORMATS)
            problems.append(
                Problem(str(f), None, "unknown_format", f"not a recording the ledger reads. It reads: {formats}")
            )
        else:
            kept.append(f)
    return kept


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
    on_card: Callable[[CardResult], None] | None = None,
) -> ImportSummary:
    """Import the recordings under ``paths`` (or the ``cards`` from :func:`find_recordings`) into ``ledger``.

    ``environments``: an ``environment_files`` tree whose ``metadata.json`` baselines new cards are stored with.
    ``progress`` is called with byte counts as files are read; ``on_card`` with each card's result once it is
    committed (or refused), so an interrupted import can say how far it got. Raises :class:`ImportInputError` on
    bad paths or an ``environments`` folder without any ``metadata.json``.
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
    baselines = Baselines(ledger, entries, environments)
    t0 = time.perf_counter()
    results: list[CardResult] = []
    bytes_read = 0
    for card_id, files in cards.items():
        r, n = _import_card(ledger, card_id, files, baselines, strict, progress, problems)
        results.append(r)
        if on_card is not None:
            on_card(r)
        bytes_read += n
    return ImportSummary(results, problems, bytes_read, time.perf_counter() - t0, baselines.set_id)
