"""Importing one ARC-AGI-3-Agents harness recording as one card (see docs/import.md, 'The harnesses' recordings'). A
grown file is re-simulated from its start (the game's state depends on every line); only new lines add events."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import batched, chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import msgspec

from ledger.domain.events import (
    ActionIgnored,
    ActionsInferred,
    ActionTaken,
    AnyEvent,
    CardReopened,
    FramesNoted,
    LinesSkipped,
    PlayStarted,
    RecordingImported,
    RunUsage,
    SkippedLine,
    State,
)
from ledger.domain.projection import apply
from ledger.domain.translator import Observation, translate
from ledger.formats.builtin_readers import parse_name
from ledger.formats.frame_lines import FrameLine, LineSet
from ledger.formats.harness import HarnessRead, read_harness
from ledger.formats.harness_frames import classify_from_frames, from_recorded
from ledger.formats.recordings import MAX_LISTED, Problem, RewrittenError, check_continues, tail_hash
from ledger.formats.run_folders import Step, match_run_folder, read_run_meta
from ledger.imports.import_cards import (
    Baselines,
    CardPlan,
    CardResult,
    Existing,
    ImportOptions,
    attach_baselines,
    close_import,
    compare_with_held,
    load_existing,
)
from ledger.imports.import_runs import attach_usage, run_tags, run_usage, usage_held
from ledger.resim.harness_search import line_signature
from ledger.rules.audit_checks import not_a_recording
from ledger.toolkit.game_states import frame_digest

if TYPE_CHECKING:
    from ledger.ledger import Ledger


def report_read(read: HarnessRead, done: int, problems: list[Problem], result: CardResult) -> None:
    new_skips = [s for s in read.skipped if s.line > done]
    for s in new_skips[:MAX_LISTED]:
        kind = "not_json" if s.reason == "not JSON" else "wrong_type"
        problems.append(Problem(str(read.path), s.line, kind, f"{s.reason}: skipped"))  # type: ignore[arg-type]
    for ln, msg in [i for i in read.impossible if i[0] > done][:MAX_LISTED]:
        problems.append(Problem(str(read.path), ln, "impossible", f"{msg}: the harness cannot write it"))
    for ln, msg in [c for c in read.cuts if c[0] > done]:
        problems.append(Problem(str(read.path), ln, "cut_line", msg))
    if read.truncated_tail:
        msg = "truncated last line (no newline): read next time"
        problems.append(Problem(str(read.path), read.lines + 1, "truncated", msg))
    for s in new_skips:
        result.skipped[s.reason] = result.skipped.get(s.reason, 0) + 1
    late = [s for s in read.after_close if s.line > done]
    if late:
        more = f" (lines {late[0].line} to {late[-1].line})" if len(late) > 1 else ""
        msg = f"{len(late)} frame line(s){more} {late[0].reason}"
        problems.append(Problem(str(read.path), late[0].line, "not_counted", msg))
        result.skipped["after the card's close"] = len(late)
    if read.side_lines and done == 0:
        result.skipped["side lines (not frames)"] = read.side_lines


def skipped_lines(read: HarnessRead, unreproduced: list[int], done: int) -> list[SkippedLine]:
    """The lines past ``done`` not imported: unreadable, after the card's close, or no action reproduces them."""
    out = [s for s in (*read.skipped, *read.after_close) if s.line > done]
    if unreproduced:
        wanted = {ln for ln in unreproduced if ln > done}
        with open(read.path, "rb") as f:
            for i, raw in enumerate(f, 1):
                if i in wanted:
                    body = raw.rstrip(b"\r\n")
                    out.append(SkippedLine(i, "no action reproduces it", hashlib.sha256(body).hexdigest(), len(body)))
    return sorted(out, key=lambda s: s.line)


def cross_check(read: HarnessRead, doc: Any, method: str, problems: list[Problem]) -> None:
    """The final ``scorecard.get(game_id)`` line against the card (skipped when several agents played the game)."""
    final = read.final
    if not final or "actions" not in final:
        return
    guid = final.get("guid")
    runs = [r for env in doc.environments for r in env.runs if r.guid == guid]
    if not runs:
        return
    run = runs[0]
    fields = ["actions", "levels_completed", "state"] + (["resets"] if method != "frames" else [])
    diffs = [
        f"{k} {final.get(k)!r} (its scorecard line) vs {getattr(run, k)!r} (imported)"
        for k in fields
        if k in final and final.get(k) != getattr(run, k)
    ]
    if diffs:
        problems.append(Problem(str(read.path), read.final_lineno, "cross_check", "; ".join(diffs)))
    else:
        problems.append(Problem(str(read.path), read.final_lineno, "harness", "its final scorecard line agrees"))


#: Lines one FramesNoted or ActionsInferred event lists at most (a long recording's are never all held).
EVENT_LINES = 4096
_DIGESTS_KEPT = 4096


def _steps_for(
    path: Path, read: HarnessRead, problems: list[Problem], named: frozenset[Path], strict: bool = False
) -> tuple[dict[int, Step], Path | None, str | None]:
    """The run folder's steps matched to frame lines, that folder, and why a folder is not used (None: all used)."""
    found = match_run_folder(path.parent, read.name, read.frames, read.tokens)
    why_named: str | None = None
    where = path.parent.resolve()
    for d, why in found.not_used:
        problems.append(Problem(str(d), None, "harness", f"run folder not used: {why}"))
        if d.resolve() in named:
            why_named = f"the run folder {d} named to import is not used: {why}"
        elif strict and why_named is None:
            why_named = f"the run folder {d} beside it is not used (--strict): {why}"
    for d in sorted(named):
        if d.parent == where and why_named is None and (found.folder is None or found.folder.resolve() != d):
            game = read_run_meta(d)
            if game is not None and game.game_id == read.name.game_id:
                why_named = f"the run folder {d} named to import is not used: it is not this recording's run"
    if found.folder is not None:
        msg = f"parsed_action of {len(found.steps)} step(s) from {found.folder.name}/ used ({found.how})"
        problems.append(Problem(str(path), None, "harness", msg))
    return found.steps, found.folder, why_named


def _recover(
    read: HarnessRead,
    game_id: str,
    baselines: Baselines,
    steps: dict[int, Step],
    problems: list[Problem],
    progress: Callable[[int], None] | None = None,
) -> tuple[Mapping[int, tuple[int, int | None, int | None]], LineSet, list[int], str, Mapping[int, list[int]]]:
    """lineno -> (action, x, y), undecided, unreproduced, method, and open lines' candidates; ``progress(0)`` after
    each line is the import's safe point for a Ctrl-C."""
    info = baselines.game_info(game_id)
    tick = (lambda: progress(0)) if progress is not None else None
    if read.acts:
        named, missing = from_recorded(read.frames, game_id, read.actions)
        if not missing:
            _check_recorded(read, info, named.choices, problems, tick)
            return named.choices, LineSet(), named.unreproduced, "recorded", {}
        msg = (
            f"{len(missing)} frame line(s) name no action (the first: line {missing[0]}), the others do: theirs are "
            "found as in a recording that names none, the named ones tried first"
        )
        problems.append(Problem(str(read.path), missing[0], "harness", msg))
        steps = dict(steps)
        for f in read.frames:
            act = named.choices.get(f.lineno)
            if act is not None:
                steps[f.lineno] = Step(0, f.ts, *act)
    if info is not None:
        from ledger.resim.harness_search import recover

        rec = recover(read.frames, info, steps, lost=read.lost_frames, tick=tick)
        if rec.error is None:
            if rec.cut:
                msg = f"too many hypotheses from this line on ({len(rec.cut)} lines): the first ones were kept"
                problems.append(Problem(str(read.path), rec.cut[0], "harness", msg))
            return rec.choices, rec.undecided, rec.unreproduced, "resimulated", {}
        problems.append(Problem(str(read.path), None, "harness", f"{rec.error}: actions read from the frames only"))
    cls = classify_from_frames(read.frames, game_id, steps)
    return cls.choices, cls.undecided, cls.unreproduced, "frames", cls.candidates


def _check_recorded(
    read: HarnessRead,
    info: Any,
    choices: Mapping[int, tuple[int, int | None, int | None]],
    problems: list[Problem],
    tick: Callable[[], None] | None,
) -> None:
    """With the game's code, step each named action once and compare its answer with its line (nothing searched)."""
    where = str(read.path)
    if info is None:
        problems.append(Problem(where, None, "harness", "each frame line names its action (action_input): no search"))
        return
    from ledger.resim.harness_search import replay_recorded

    got = replay_recorded(read.frames, info, choices.get, tick=tick)
    if got.error is not None:
        msg = f"{got.error}: the actions are imported as the lines name them"
        problems.append(Problem(where, None, "harness", msg))
    elif got.first_off is not None:
        msg = (
            f"the code of {info.game_id} does not answer this line's action as the line does: it is not the code "
            "that played it; the actions are imported as the lines name them"
        )
        problems.append(Problem(where, got.first_off, "cross_check", msg))
    else:
        msg = f"each frame line names its action (action_input); the game's code answers all {got.steps} as recorded"
        problems.append(Problem(where, None, "harness", msg))


def _observations(
    frames: Sequence[FrameLine], choices: Mapping[int, tuple[int, int | None, int | None]], after: int
) -> Iterator[tuple[FrameLine, Observation]]:
    """The lines after ``after`` that have a choice, with their observations, made lazily."""
    for f in frames:
        c = choices.get(f.lineno)
        if c is None or f.lineno <= after or f.guid is None:
            continue
        a, x, y = c
        state = cast(State, f.state)  # a recorded frame's state is one of the toolkit's GameState values
        yield f, Observation(f.ts, f.game_id, f.guid, a, state, f.levels_completed, f.full_reset, f.empty, x, y)


def _digest(line: FrameLine, digests: dict[bytes, str]) -> str:
    d = digests.get(line.packed)
    if d is None:
        if len(digests) >= _DIGESTS_KEPT:  # the frames an agent repeats are recent ones: a bounded cache is enough
            digests.clear()
        d = digests[line.packed] = frame_digest(line_signature(line)[3])
    return d


@dataclass(slots=True)
class _ReadyFile:
    existing: Existing | None
    read: HarnessRead
    done: int
    size: int
    run_dir: Path | None = None
    usage: RunUsage | None = None


def _prepare(opts: ImportOptions, result: CardResult, path: Path, problems: list[Problem]) -> _ReadyFile | None:
    """Refusals first (captured live, rewritten, unreadable, bad input under --strict); None when refused."""
    name = parse_name(path.name)
    assert name is not None
    existing = load_existing(opts.ledger, result.card_id)
    size = path.stat().st_size if path.exists() else 0
    if opts.progress is not None:
        opts.progress(size)
    if existing is not None and not existing.imported:
        msg = f"card {result.card_id} is in the ledger from live capture: not imported (its actions would count twice)"
        problems.append(Problem(str(path), None, "captured_live", msg))
        result.refuse(1, msg)
        return None
    since = existing.progress.get(path.name) if existing is not None else None
    try:
        if since is not None:
            with open(path, "rb") as f:
                check_continues(f, since, hashlib.sha256())
        read = read_harness(path, name)
    except OSError as e:
        problems.append(Problem(str(path), None, "unreadable", f"cannot read: {e.strerror or e}"))
        result.refuse(1, f"{path}: cannot read")
        return None
    except RewrittenError as e:
        msg = f"{e}: it was rewritten, not imported"
        problems.append(Problem(str(path), None, "rewritten", msg))
        result.refuse(1, f"{path}: {msg}")
        return None
    done = since.lines if since is not None else 0
    n_bad = len(read.skipped)
    why = not_a_recording(read.first_bad, n_bad, read.lines - n_bad - read.blank_lines)
    if why is not None:
        problems.append(Problem(str(path), None, "not_a_recording", f"not a recording: {why}"))
        result.refuse(2, f"{path}: not a recording: {why}: nothing of it imported")
        return None
    guids = sorted({f.guid for f in read.frames if f.guid})
    if len(guids) > 1:
        # One agent plays one environment: its guid never changes, so two guids are recordings put together.
        msg = f"holds the frames of {len(guids)} plays ({', '.join(guids[:3])}): several recordings put together"
        problems.append(Problem(str(path), None, "several_plays", f"{msg}; split it"))
        result.refuse(2, f"{msg}: nothing of it imported")
        return None
    result.format = "harness"
    order = [o for o in read.order if o[0] > done]
    for ln, kind, msg in order[:MAX_LISTED]:
        problems.append(Problem(str(path), ln, kind, f"{msg}: no recorder writes it"))  # type: ignore[arg-type]
    if order and not opts.allow_repeats:
        ln, _, msg = order[0]
        where = f"{path}:{ln}: {msg} ({len(order)} such line(s))"
        result.refuse(2, f"{where}: nothing of it imported; --allow-repeats imports the lines as they are")
        return None
    report_read(read, done, problems, result)
    bad = [ln for ln, _ in read.impossible if ln > done] + [s.line for s in read.skipped if s.line > done]
    if opts.strict and bad:
        result.refuse(2, f"{len(bad)} problem(s) in its recording (--strict): nothing of this card imported")
        return None
    if since is not None and read.end <= since.offset:
        result.status = "already imported"
    return _ReadyFile(existing, read, done, size)


def import_harness_once(
    opts: ImportOptions, card_id: str, plan: CardPlan, problems: list[Problem]
) -> tuple[CardResult, int]:
    """The plan's one file; ``plan.how`` says how ``card_id`` was found (``harness``: the recorder's uuid, said)."""
    path = plan.files[0]
    ledger, baselines, index = opts.ledger, opts.baselines, opts.index
    result = CardResult(card_id, "nothing to import", 1)
    prep = _prepare(opts, result, path, problems)
    if prep is None:
        return result, 0 if result.exit_code == 1 else (path.stat().st_size if path.exists() else 0)
    read, done = prep.read, prep.done
    steps, prep.run_dir, why_named = _steps_for(path, read, problems, opts.named_runs, opts.strict)
    if why_named is not None:
        problems.append(Problem(str(path), None, "run_not_used", why_named))
        result.refuse(2, f"{why_named}: nothing of it imported")
        return result, prep.size
    if prep.run_dir is not None and read.frames:
        usage = run_usage(prep.run_dir, read.frames, steps, read.frames[-1].ts, problems)
        # A card imported before holds the run's usage already, or gets it now (once).
        prep.usage = usage if usage is None or prep.existing is None or not usage_held(ledger, card_id, usage) else None
    if result.status == "already imported":
        attach_baselines(ledger, prep.existing, baselines, result)  # type: ignore[arg-type]
        if prep.usage is not None:  # imported before without its run folder
            attach_usage(ledger, card_id, prep.usage, str(prep.run_dir), problems)
        return result, prep.size
    game_id = read.frames[0].game_id if read.frames else read.name.game_id
    choices, undecided, unreproduced, method, candidates = _recover(
        read, game_id, baselines, steps, problems, opts.progress
    )
    undecided = LineSet(ln for ln in undecided if ln > done)
    # Without the code, a reset is known where a step file named every line's action and no line stayed open.
    known = method != "frames" or (not undecided and all(ln in steps for ln in choices if ln > done))
    unreproduced = [ln for ln in unreproduced if ln > done]
    for ln in unreproduced[:MAX_LISTED]:
        msg = "no action reproduces this line (never reached the game): skipped"
        problems.append(Problem(str(path), ln, "unreproduced", msg))
    first = next((o for _, o in _observations(read.frames, choices, done)), None)
    if prep.existing is None and first is None:
        result.lines = 0
        return result, prep.size
    # One guid a recording (_prepare refuses more): the first observation's is every one's.
    held = index.held_elsewhere({first.guid} if first is not None else set(), card_id)
    if held is not None:
        obs = ((f.lineno, o) for f, o in _observations(read.frames, choices, done))
        first_play = _first_play if prep.existing is None else None
        resets = known and not undecided  # an undecided line may have been a RESET
        compare_with_held(
            ledger, held, obs, where=str(path), result=result, problems=problems, first_play=first_play, resets=resets
        )
        if result.status == "same card" and prep.usage is not None:
            attach_usage(ledger, held, prep.usage, str(prep.run_dir), problems)
        result.lines = read.lines - done
        return result, prep.size
    if prep.existing is None and plan.how == "harness":
        msg = (
            f"card id {card_id} is the recorder's uuid in the file name: the recording does not name its card "
            "(--card-id names it)"
        )
        problems.append(Problem(str(path), None, "harness", msg))
    new = _observations(read.frames, choices, done)
    made, doc = _commit(
        ledger, card_id, prep, first, new, baselines, method, (undecided, known), unreproduced, candidates
    )
    result.not_counted += made.ignored
    if read.final == {} and read.final_lineno is not None and read.final_lineno > done:
        msg = "the final scorecard line is empty ({}): the harness wrote no score to compare with"
        problems.append(Problem(str(path), read.final_lineno, "harness", msg))
    cross_check(read, doc, method, problems)
    result.status = "imported" if prep.existing is None else "updated"
    result.events, result.plays = made.events, made.plays
    result.lines = read.lines - done
    result.inferred = made.lines if method != "recorded" else 0
    result.undecided = len(undecided)
    result.unreproduced = len(unreproduced)
    result.resets_known = known
    result.recorded = made.lines if method == "recorded" else 0
    return result, prep.size


@dataclass(slots=True)
class _AppendCounts:
    events: int = 0
    plays: int = 0
    ignored: int = 0
    lines: int = 0


def _commit(
    ledger: Ledger,
    card_id: str,
    prep: _ReadyFile,
    first: Observation | None,
    lines: Iterator[tuple[FrameLine, Observation]],
    baselines: Baselines,
    method: str,
    decided: tuple[LineSet, bool],
    unreproduced: list[int],
    candidates: Mapping[int, list[int]],
) -> tuple[_AppendCounts, Any]:
    """The card's new events in one append, made lazily; returns what they held and the document at close."""
    read = prep.read
    tags = [read.name.agent, *run_tags(prep.run_dir)]
    head, card, version = _open_or_reopen(prep.existing, card_id, tags, first, baselines)
    bmap = ledger.card_baselines(card)
    made = _AppendCounts()
    closed: list[Any] = []

    def events() -> Iterator[AnyEvent]:
        made.events += len(head)
        made.plays += sum(type(e) is PlayStarted for e in head)
        yield from head
        last = card.last_ts or read.frames[-1].ts
        digests: dict[bytes, str] = {}  # by the line's packed frame: equal frames, one digest (computed once)
        noted: list[str] = []
        for f, o in lines:
            evs = translate(card, o)
            cands = candidates.get(f.lineno)
            if cands:
                evs = [msgspec.structs.replace(e, candidates=cands) if type(e) is ActionTaken else e for e in evs]
                noted.append(_digest(f, digests))
            made.lines += 1
            made.events += len(evs)
            for e in evs:
                made.plays += type(e) is PlayStarted
                made.ignored += type(e) is ActionIgnored
            yield from evs
            last = max(last, o.ts)
            if len(noted) == EVENT_LINES:
                # A reader pairs each FramesNoted with the open actions since the one before, in stream order.
                chunk = FramesNoted(ts=o.ts, file=read.path.name, digests=noted)
                apply(card, chunk)
                made.events += 1
                yield chunk
                noted = []
        tail_ts = max(last, read.frames[-1].ts) if read.frames else last
        inferred = made.lines if method != "recorded" else 0
        for e in _facts(prep, tail_ts, method, inferred, decided, unreproduced, noted):
            apply(card, e)
            made.events += 1
            yield e
        tail: list[AnyEvent] = []
        closed.append(close_import(card, bmap, tail_ts, (), tail))
        made.events += len(tail)
        yield from tail

    # The card ends closed: the facade's snapshot policy caches its projection, as live capture's close does.
    ledger.append_card(card_id, events(), version, state=card, whole=False, hand_over=True)
    return made, closed[0]


def _facts(
    prep: _ReadyFile,
    ts: datetime,
    method: str,
    inferred: int,
    decided: tuple[LineSet, bool],
    unreproduced: list[int],
    noted: list[str],
) -> Iterator[AnyEvent]:
    read = prep.read
    name = read.path.name
    new_skips = skipped_lines(read, unreproduced, prep.done)
    if prep.usage is not None:
        yield prep.usage
    if new_skips:
        yield LinesSkipped(ts=ts, file=name, lines=new_skips)
    if noted:
        yield FramesNoted(ts=ts, file=name, digests=noted)
    yield from _inferred(ts, name, method, inferred, *decided)
    with open(read.path, "rb") as f:
        tail = tail_hash(f, read.end)
    yield RecordingImported(
        ts=ts,
        file=name,
        offset=read.end,
        lines=read.lines,
        skipped=len(read.skipped) + len(read.after_close) + len(unreproduced),
        tail_sha256=tail,
        game_state=read.frames[-1].state if read.frames else None,  # type: ignore[arg-type]
        prefix_sha256=read.prefix_sha256,
    )


def _inferred(
    ts: datetime, file: str, method: str, lines: int, undecided: LineSet, known: bool
) -> Iterator[ActionsInferred]:
    """Undecided lines over as many events as they need (EVENT_LINES each, one event at least); the first holds the
    inferred count."""
    chunks = batched(undecided, EVENT_LINES)
    for i, chunk in enumerate(chain([next(chunks, ())], chunks)):
        yield ActionsInferred(
            ts=ts,
            file=file,
            method=method,  # type: ignore[arg-type]
            inferred=lines if i == 0 else 0,
            undecided=list(chunk),
            resets_known=known,
        )


def _open_or_reopen(
    existing: Existing | None, card_id: str, tags: list[str], first: Observation | None, baselines: Baselines
) -> tuple[list[AnyEvent], Any, int]:
    if existing is None:
        assert first is not None  # a new card is made only of lines that have observations
        card, opened, _ = baselines.new_card(first.ts, card_id, tags)
        return [opened, *_first_play(card, first)], card, 0
    card = existing.card
    if not card.closed:
        return [], card, card.events
    reopened = CardReopened(ts=first.ts if first is not None else card.last_ts or datetime.now(UTC))
    apply(card, reopened)
    return [reopened], card, card.events - 1


def _first_play(card: Any, o: Observation) -> list[AnyEvent]:
    """The first play of a new card of a recording: that of ``Arcade.make``'s unrecorded RESET."""
    return translate(card, Observation(o.ts, o.game_id, o.guid, 0, "NOT_FINISHED", 0, True, False))
