"""Importing what a :class:`ledger.formats.readers.Decided` reader decides of a file (a new card, or compared)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ledger.app.usage import card_usage, same_run
from ledger.domain.events import AnyEvent, RecordingImported, RunUsage, State
from ledger.domain.translator import Observation, translate
from ledger.formats.builtin_readers import STATES
from ledger.formats.import_problems import Problem
from ledger.formats.readers import Decided, Reader
from ledger.imports.import_cards import (
    CardResult,
    ImportOptions,
    close_import,
    compare_with_held,
    load_existing,
    with_retries,
)
from ledger.imports.import_runs import attach_usage

if TYPE_CHECKING:
    from ledger.formats.readers import Answer
    from ledger.ledger import Ledger


def import_read(opts: ImportOptions, reader: Reader, path: Path, problems: list[Problem]) -> list[CardResult]:
    try:
        decided = reader.read(path)
    except Exception as e:  # a plugin's code: anything may go wrong in it
        error = f"{path}: the reader {reader.name} failed: {type(e).__name__}: {e}: nothing of it imported"
        return [CardResult(path.name, "not imported", 1, error=error, exit_code=2)]
    out = []
    for d in decided:
        problems.extend(Problem(str(path), None, "reader", f"card {d.card_id}: {n}") for n in d.notes)
        why = _refused(d)
        if why is not None:
            error = f"{path}: {why}: nothing of it imported"
            out.append(CardResult(d.card_id, "not imported", 1, error=error, exit_code=2))
            continue
        out.append(with_retries(d.card_id, 1, partial(_one, opts, reader, path, d), problems)[0])
    return out


def _refused(d: Decided) -> str | None:
    for i, a in enumerate(d.answers, 1):
        if not 0 <= a.action <= 7 or a.state not in STATES or a.levels_completed < 0:
            return f"card {d.card_id}: answer {i} has action {a.action}, state {a.state}, levels {a.levels_completed}"
    first: set[str] = set()
    for i, a in enumerate(d.answers, 1):
        if a.guid not in first:
            first.add(a.guid)
            if not (a.action == 0 and a.full_reset):
                return f"card {d.card_id}: answer {i}, the first of play {a.guid}, is not a full reset (its start)"
    return None


def _usage(reader: Reader, path: Path, d: Decided) -> RunUsage | None:
    u = d.usage
    if u is None:
        return None
    return RunUsage(
        ts=datetime.now(UTC),
        folder=f"{reader.name}:{path.name}",
        run_id=u.run_id,
        model=u.model,
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        total_tokens=u.total_tokens,
        cost=u.cost,
        reasoning_tokens=u.reasoning_tokens,
        usage_other=u.other,
    )


def _observations(answers: list[Answer]) -> Iterator[Observation]:
    for a in answers:
        state = cast(State, a.state)  # checked against the toolkit's states (_refused)
        yield Observation(
            a.ts, a.game_id, a.guid, a.action, state, a.levels_completed, a.full_reset, a.frame_empty, a.x, a.y
        )


def _one(
    opts: ImportOptions, reader: Reader, path: Path, d: Decided, problems: list[Problem]
) -> tuple[CardResult, int]:
    ledger = opts.ledger
    result = CardResult(d.card_id, "nothing to import", 1, format=f"reader:{reader.name}")
    usage = _usage(reader, path, d)
    existing = load_existing(ledger, d.card_id)
    held = opts.index.held_elsewhere({d.answers[0].guid}, d.card_id) if d.answers else None
    if held is None and existing is not None and not existing.imported and d.answers:
        held = d.card_id  # captured live under the id the file names: compared with it
    target = held or (d.card_id if existing is not None else None)
    if target is not None:
        if held is not None:
            obs = ((None, o) for o in _observations(d.answers))
            compare_with_held(ledger, held, obs, where=str(path), result=result, problems=problems)
        else:
            result.status = "already imported"
        if usage is not None and result.status != "differs":
            _give_usage(ledger, target, usage, d, path, result, problems, strict=opts.strict)
        return result, 0
    if not d.answers:
        result.refuse(1, f"{path}: card {d.card_id} is not in the ledger: its usage has no card to go with")
        return result, 0
    card, opened, bmap = opts.baselines.new_card(d.answers[0].ts, d.card_id, [f"reader:{reader.name}", *d.tags])
    events: list[AnyEvent] = [opened]
    for o in _observations(d.answers):
        events += translate(card, o)
    raw = path.read_bytes()
    told: list[AnyEvent] = [] if usage is None else [usage]
    told.append(
        RecordingImported(
            ts=d.answers[-1].ts,
            file=path.name,
            offset=len(raw),
            lines=len(d.answers),
            skipped=0,
            tail_sha256=hashlib.sha256(raw[-4096:]).hexdigest(),
            prefix_sha256=hashlib.sha256(raw).hexdigest(),
        )
    )
    close_import(card, bmap, max(a.ts for a in d.answers), told, events)
    ledger.append_card(d.card_id, events, 0, state=card, hand_over=True)
    result.status, result.events, result.lines = "imported", len(events), len(d.answers)
    result.plays = len({a.guid for a in d.answers})
    return result, 0


def _give_usage(
    ledger: Ledger,
    card_id: str,
    usage: RunUsage,
    d: Decided,
    path: Path,
    result: CardResult,
    problems: list[Problem],
    *,
    strict: bool,
) -> None:
    """Add the file's usage to the card once (only a card that played its games; of a run held, a later snapshot)."""
    where = str(path)
    if d.game_ids and not d.answers:
        played = set(ledger.load_card(card_id).games)
        missing = [g for g in d.game_ids if g not in played]
        if missing:
            said = f"{path}: says card {card_id} played {', '.join(missing)}, which the card did not"
            result.refuse(1, f"{said}: its usage is not this card's, nothing written")
            return
    before = same_run(card_usage(ledger, card_id), usage)
    if before is not None:
        if _figures(before) == _figures(usage):
            msg = f"its usage is on card {card_id} already (from {before.folder}): nothing added"
            problems.append(Problem(where, None, "reader", msg))
            return
        if not all(
            b is None or (n is not None and n >= b) for b, n in zip(_figures(before), _figures(usage), strict=True)
        ):
            msg = (
                f"an earlier snapshot of run {usage.run_id} than the one card {card_id} holds ({_said(before)}, from "
                f"{before.folder}): this file's {_said(usage)} not used"
            )
            if strict:
                result.refuse(2, f"{path}: {msg} (--strict)")
            else:
                problems.append(Problem(where, None, "reader_unused", msg))
            return
        msg = f"a later snapshot of run {usage.run_id}: it replaces the one from {before.folder} ({_said(before)})"
        problems.append(Problem(where, None, "reader", msg))
    held_before = result.status
    attach_usage(ledger, card_id, usage, where, problems, check_held=before is None)
    if held_before == "already imported" and not d.answers:
        result.status, result.events, result.files = "updated", 1, 1


def _figures(u: RunUsage) -> tuple[int | float | None, ...]:
    return (u.input_tokens, u.output_tokens, u.total_tokens, u.reasoning_tokens, u.cost)


def _said(u: RunUsage) -> str:
    return f"{u.total_tokens} tokens, cost {u.cost!r}"
