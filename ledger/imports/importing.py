"""Import the toolkit's JSONL recordings: every line goes through the same translator as live capture. A card's files
are merged by timestamp and written in one transaction; each file's ``RecordingImported`` hashes every byte consumed, so
the same files add nothing, a grown file resumes and a rewritten one is refused."""

from __future__ import annotations

import heapq
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.domain import baselines as bl
from ledger.domain.events import (
    ActionIgnored,
    AnyEvent,
    BaselineEntry,
    CardReopened,
    LinesSkipped,
    PlayStarted,
    RecordingImported,
)
from ledger.domain.projection import CardState, apply
from ledger.domain.translator import Observation, translate
from ledger.errors import ImportInputError
from ledger.formats.finding import UNREAD, Found, find_recordings
from ledger.formats.import_problems import FATAL_KINDS, REPEAT_KINDS, SKIP_REASONS, STRICT_KINDS, Problem
from ledger.formats.recordings import FileRead, RewrittenError, read_recording
from ledger.imports.import_cards import (
    Baselines,
    CardPlan,
    CardResult,
    Existing,
    GuidIndex,
    ImportOptions,
    ImportSummary,
    attach_baselines,
    close_import,
    compare_with_held,
    load_existing,
    plan_cards,
    with_retries,
)
from ledger.rules.audit_checks import not_a_recording
from ledger.toolkit.game_files import scan_environments

if TYPE_CHECKING:
    from ledger.ledger import Ledger


def _import_card(
    opts: ImportOptions, card_id: str, plan: CardPlan, found: Found, problems: list[Problem]
) -> tuple[CardResult, int]:
    files = plan.files
    refused = [f for f in files if f in found.refused]
    if refused:
        problems.extend(Problem(str(f), None, "unknown_format", found.refused[f]) for f in refused)
        how = "in no format the ledger reads" if {found.refused[f] for f in refused} == {UNREAD} else "refused"
        what = f"{len(refused)} of its files {how} ({', '.join(f.name for f in refused[:3])})"
        return CardResult(card_id, "not imported", len(files), error=f"{what}: nothing of it imported", exit_code=2), 0
    once = _import_card_once
    if len(files) == 1 and found.readers[files[0]].decides == "frames":
        from ledger.imports.importing_harness import import_harness_once

        once = import_harness_once
    return with_retries(card_id, len(files), lambda found: once(opts, card_id, plan, found), problems)


def _import_card_once(
    opts: ImportOptions, card_id: str, plan: CardPlan, problems: list[Problem]
) -> tuple[CardResult, int]:
    ledger, baselines, index = opts.ledger, opts.baselines, opts.index
    files = plan.files
    # Files whose card nothing proves are read (to say what is wrong with them) but never joined to a card.
    existing = load_existing(ledger, card_id) if plan.how != "unproven" else None
    result = CardResult(card_id, "nothing to import", len(files))
    # A card captured live is compared with its recordings, never added to (its actions would count twice).
    live = existing is not None and not existing.imported
    reads, card_problems, bytes_read = _read_new_lines(files, None if live else existing, opts.progress)
    problems.extend(card_problems)
    for r in reads:
        for reason, n in r.skip_reasons.items():
            result.skipped[SKIP_REASONS[reason]] = result.skipped.get(SKIP_REASONS[reason], 0) + n

    refused = _refusal(reads, plan, card_id, index)
    if refused is not None:
        problems.append(refused)
        result.refuse(2, _REFUSED[refused.kind])
        return result, bytes_read
    repeats = None if opts.allow_repeats else _repeats(card_problems)
    if repeats is not None:
        result.refuse(2, repeats)
        return result, bytes_read
    fatal = [p for p in card_problems if p.kind in FATAL_KINDS]
    if fatal:
        result.refuse(1, str(fatal[0]))
        return result, bytes_read
    bad = [p for p in card_problems if p.kind in STRICT_KINDS]
    if opts.strict and bad:
        result.refuse(2, f"{len(bad)} problem(s) in its recordings (--strict): nothing of this card imported")
        return result, bytes_read

    advanced = [r for r in reads if r.end > r.start]
    result.lines = sum(r.new_lines for r in advanced)
    if _compared(ledger, card_id if live else None, reads, index, result, problems):
        return result, bytes_read
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
    last, playless = _translate_in_time_order(card, observations, out, last)
    if playless and _no_play(opts.strict, advanced, playless, result, problems):
        return result, bytes_read
    plays = sum(1 for e in out if type(e) is PlayStarted)
    result.not_counted += sum(1 for e in out if type(e) is ActionIgnored)
    _record_progress_and_close(card, advanced, bmap, last, out)
    # The card ends closed: the facade's snapshot policy caches its projection, as live capture's close does.
    ledger.append_card(card_id, out, version, state=card, whole=False, hand_over=True)
    index.add(set().union(*(r.guids for r in reads)), card_id)
    result.status = "imported" if existing is None else "updated"
    result.events = len(out)
    result.plays = plays
    return result, bytes_read


def _read_new_lines(
    files: list[Path], existing: Existing | None, progress: Callable[[int], None] | None
) -> tuple[list[FileRead], list[Problem], int]:
    """Each file read from where the last import stopped, the card's problems (a rewritten file is one), bytes read."""
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
    """The card to append to, its version, baselines and last timestamp; appends its opening event to ``out``."""
    if existing is None:
        first = min(o[0].ts for o in observations)
        card, opened, bmap = baselines.new_card(first, card_id)
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
) -> tuple[datetime, Counter[str]]:
    """Append every file's lines' events in timestamp order; the last timestamp, and per guid the lines with no play."""
    merged = (
        heapq.merge(*observations, key=attrgetter("ts"))
        if len(observations) > 1
        else iter(observations[0] if observations else ())
    )
    playless: Counter[str] = Counter()
    for obs in merged:
        evs = translate(card, obs)
        if evs:
            out.extend(evs)
        elif card.play_for(obs.game_id, obs.guid) is None:
            playless[obs.guid] += 1
        if obs.ts > last:
            last = obs.ts
    return last, playless


def _no_play(
    strict: bool, advanced: list[FileRead], playless: Counter[str], result: CardResult, problems: list[Problem]
) -> bool:
    """Report the lines that make no play (no toolkit writes them); True if they refuse the card (``strict``)."""
    for r in advanced:
        n = sum(playless[g] for g in r.guids)
        if n:
            msg = (
                f"{n} line(s) make no play: no full RESET of their game comes before them (the toolkit starts every "
                'play with a line that says "full_reset": true), so nothing of them is counted'
            )
            problems.append(Problem(str(r.path), None, "impossible", msg))
    if strict:
        result.refuse(2, f"{sum(playless.values())} line(s) make no play (--strict): nothing of this card imported")
        return True
    result.exit_code = 1
    return False


def _record_progress_and_close(
    card: CardState, advanced: list[FileRead], bmap: dict[str, BaselineEntry], last: datetime, out: list[AnyEvent]
) -> None:
    read: list[AnyEvent] = []
    for r in advanced:
        if r.skipped_lines:
            read.append(LinesSkipped(ts=r.last_ts or last, file=r.path.name, lines=r.skipped_lines))
        read.append(
            RecordingImported(
                ts=r.last_ts or last,
                file=r.path.name,
                offset=r.end,
                lines=r.lines,
                skipped=r.skipped,
                tail_sha256=r.tail_sha256,
                game_state=r.game_state,  # type: ignore[arg-type]
                prefix_sha256=r.prefix_sha256,
            )
        )
    close_import(card, bmap, last, read, out)


def _refusal(reads: list[FileRead], plan: CardPlan, card_id: str, index: GuidIndex) -> Problem | None:
    for r in reads:
        why = not_a_recording(r.first_bad and r.start == 0, r.skipped, r.lines - r.skipped)
        if why is not None:
            return Problem(str(r.path), None, "not_a_recording", f"not a recording: {why}")
        if len(r.guids) > 1:
            shown = ", ".join(sorted(r.guids)[:3])
            msg = (
                f"holds the lines of {len(r.guids)} plays ({shown}): the toolkit writes one file per play "
                "(<game_id>-<guid>.jsonl), so this is several recordings put together; split it"
            )
            return Problem(str(r.path), None, "several_plays", msg)
    if not any(r.observations for r in reads):
        return None
    if plan.how == "unproven" and index.held_elsewhere(set().union(*(r.guids for r in reads)), card_id) is None:
        msg = (
            f"cannot tell which card these recordings are: the folder name {card_id!r} is no card id and none of "
            "their plays is in the ledger; put each run's files in a folder named by its card id, as the toolkit "
            "writes them (<recordings_dir>/<card_id>/<game_id>-<guid>.jsonl), or name the card with --card-id ID "
            "(one run at a time)"
        )
        return Problem(str(plan.files[0].parent), None, "unknown_card", msg)
    return None


def _compared(
    ledger: Ledger,
    live: str | None,
    reads: list[FileRead],
    index: GuidIndex,
    result: CardResult,
    problems: list[Problem],
) -> bool:
    """When the ledger holds these plays already, compare the card the lines make with it, write nothing (True)."""
    if not any(r.observations for r in reads):
        return False
    held = live if live is not None else index.held_elsewhere(set().union(*(r.guids for r in reads)), result.card_id)
    if held is None:
        return False
    obs = sorted((o for r in reads for o in r.observations), key=attrgetter("ts"))
    where = str(reads[0].path.parent)
    compare_with_held(ledger, held, ((None, o) for o in obs), where=where, result=result, problems=problems)
    return True


#: The card line of a refused card (its problem, printed above it, says where and why).
_REFUSED = {
    "not_a_recording": "a file is no recording: nothing of this card imported",
    "several_plays": "a file holds several plays (recordings put together): nothing of this card imported",
    "unknown_card": "nothing says which card these files are (see above): not imported",
}


def _repeats(problems: list[Problem]) -> str | None:
    """Why lines that repeat earlier ones or go back in time (what no recorder writes) refuse the card."""
    found = [p for p in problems if p.kind in REPEAT_KINDS]
    if not found:
        return None
    return (
        f"{len(found)} line(s) repeat an earlier line or go back in time (first: line {found[0].line}): nothing of "
        "this card imported; --allow-repeats imports the lines as they are"
    )


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def total_bytes(cards: dict[str, list[Path]]) -> int:
    return sum(_size(f) for files in cards.values() for f in files)


def import_recordings(
    ledger: Ledger,
    paths: Iterable[str | os.PathLike[str]] | None = None,
    *,
    found: Found | None = None,
    environments: str | os.PathLike[str] | None = None,
    strict: bool = False,
    progress: Callable[[int], None] | None = None,
    on_card: Callable[[CardResult], None] | None = None,
    card_id: str | None = None,
    allow_repeats: bool = False,
    calculator: str | None = None,
) -> ImportSummary:
    """Import what the readers read under ``paths`` (or ``found``) into ``ledger``; ``on_card`` is called with each
    card's result once committed or refused, so an interrupted import can say how far it got."""
    if found is None:
        found = find_recordings(paths or [])
    problems = list(found.problems)
    entries: list[BaselineEntry] | None = None
    if environments is not None:
        envs, env_problems = scan_environments(environments)
        if not envs:
            raise ImportInputError(f"{environments}: no metadata.json in it (an environment_files tree)")
        problems.extend(Problem(p, None, "environments", "skipped (the toolkit skips it too)") for p in env_problems)
        entries = bl.canonical(envs)
    baselines = Baselines(ledger, entries, environments, calculator)
    opts = ImportOptions(ledger, baselines, GuidIndex(ledger), strict, progress, allow_repeats, found.runs)
    plans = plan_cards(found, opts.index, card_id, problems)
    t0 = time.perf_counter()
    results: list[CardResult] = []
    bytes_read = 0
    for cid, plan in plans.items():
        r, n = _import_card(opts, cid, plan, found, problems)
        results.append(r)
        if on_card is not None:
            on_card(r)
        bytes_read += n
    if found.read:  # loaded (with the run usage it attaches) only when a reader's format was found
        from ledger.imports.import_readers import import_read
    for reader, path in found.read:
        for r in import_read(opts, reader, path, problems):
            results.append(r)
            if on_card is not None:
                on_card(r)
    if found.reader_error is not None:
        results.append(CardResult("-", "not imported", 0, error=found.reader_error, exit_code=2))
    return ImportSummary(results, problems, bytes_read, time.perf_counter() - t0, baselines.set_id)


def summary_json(s: ImportSummary, with_environments: bool) -> dict[str, Any]:
    return {
        "exit_code": s.exit_code,
        "totals": s.totals(),
        "harness": s.inference(),
        "skipped": s.skipped(),
        "bytes_read": s.bytes_read,
        "seconds": s.seconds,
        "mb_per_s": s.mb_per_s,
        "baselines_id": s.baselines_id,
        "environments": with_environments,
        "cards": [
            {
                "card_id": c.card_id,
                "status": c.status,
                "files": c.files,
                "lines": c.lines,
                "plays": c.plays,
                "events": c.events,
                "skipped": c.skipped,
                "error": c.error,
                "format": c.format,
                "inferred_actions": c.inferred,
                "recorded_actions": c.recorded,
                "undecided_lines": c.undecided,
                "unreproduced_lines": c.unreproduced,
                "resets_known": c.resets_known,
                "baselines_attached": c.baselines_attached,
                "not_counted": c.not_counted,
            }
            for c in s.cards
        ],
        "problems": [{"path": p.path, "line": p.line, "kind": p.kind, "message": p.message} for p in s.problems],
    }
