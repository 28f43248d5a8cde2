"""The audit's pure checks of one card (integrity, consistency, lifecycle, import): rows or events in, a :class:`Check`
out. Re-simulation is :mod:`ledger.app.audit`'s; see docs/audit.md."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec

from ledger.domain import chain, document
from ledger.domain.chain import Link
from ledger.domain.events import (
    ActionIgnored,
    ActionsInferred,
    ActionTaken,
    AnyEvent,
    BaselineEntry,
    CardClosed,
    CardOpened,
    CardReopened,
    CardRetracted,
    LevelReset,
    LinesSkipped,
    Numbered,
    RecordingImported,
    RunUsage,
    card_stream,
    decode,
    type_of,
)
from ledger.domain.projection import CardState, fold, new_card
from ledger.domain.scoring import score_card
from ledger.rules.timeline import ACTIVITY

#: FAIL: the record and what it is checked against disagree. UNKNOWN: the record leaves open what the check needs
#: (it can neither pass nor fail). SKIP: the check was not run (nothing to check against).
Status = Literal["PASS", "FAIL", "WARN", "SKIP", "UNKNOWN"]

#: Event types that belong to other streams (a baseline set, the labels), never to a card's.
_NOT_CARD_TYPES = frozenset({"baselines_recorded", "label_set"})
#: Events a closed card may gain: they change none of its numbers.
_BESIDE = (CardRetracted, RunUsage)


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the audit: ``status`` and a one-line ``message``; ``details`` for ``--json``."""

    name: str
    status: Status
    message: str
    details: dict[str, Any] = field(default_factory=dict)


# -- 1. integrity --------------------------------------------------------------------------------------------------


def check_integrity(card_id: str, rows: Iterable[Link], expect_head: str | None = None) -> tuple[Check, list[int]]:
    """The check of the card's stored rows (version order, read once, a page at a time) and the places (0-based) of
    rows whose event did not decode; the events are not held (a long card's would not fit)."""
    stream = card_stream(card_id)
    problems: list[dict[str, Any]] = []
    missing: list[int] = []
    prev_version, prev_seq, prev_hash = 0, 0, chain.GENESIS
    event_hash, fromiso = chain.event_hash, datetime.fromisoformat
    n, expected_at = 0, None
    for r in rows:
        n += 1
        if expected_at is None and expect_head is not None and r.hash == expect_head:
            expected_at = r.version
        # The fast path (nearly every row): linked, hashed, decoded, of its stated type and timestamp.
        try:
            ev = _fast_path(stream, r, prev_version, prev_seq, prev_hash, fromiso, event_hash)
        except (TypeError, AttributeError):  # a column of the wrong type: the slow path names it
            ev = None
        if ev is None:
            shape = chain.column_problem(r)
            if shape is not None:
                # Reported at the place the event holds; the chain goes on from its hash if that is one.
                prev_version += 1
                seq = r.seq if isinstance(r.seq, int) else prev_seq
                problems.append({"version": prev_version, "seq": seq, "problem": shape})
                prev_hash = r.hash if chain.column_problem_of_hash(r.hash) is None else prev_hash
                missing.append(n - 1)
                continue
            # The first thing wrong with the row: its link, else its body.
            broken = chain.check_link(stream, r, prev_version, prev_hash, prev_seq)
            p: str | None
            try:
                ev = decode(r.body)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                p = f"body does not decode: {e}"
                missing.append(n - 1)
            else:
                p = _event_problem(card_id, r, ev) if broken is None else None
            if broken is not None:
                p = broken.message
            if p is not None:
                problems.append({"version": r.version, "seq": r.seq, "problem": p})
        prev_version, prev_seq, prev_hash = r.version, r.seq, r.hash
    head = prev_hash
    details: dict[str, Any] = {
        "events": n,
        "last_version": prev_version,
        "head": head,
        "expected_head": expect_head,
        "expected_head_version": expected_at,
        "problems": problems,
    }
    head_msg = _head_moved(expect_head, head, n, details["expected_head_version"])
    if problems:
        first = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        msg = f"version {first['version']} (seq {first['seq']}): {first['problem']}{more}"
        if head_msg:
            msg += f"; {head_msg}"
        return Check("integrity", "FAIL", msg, details), missing
    if head_msg:
        return Check("integrity", "FAIL", head_msg, details), missing
    tail = ", matches the expected head" if expect_head is not None else ""
    msg = f"{n} events, versions 1..{n}, hash chain unbroken; head {head}{tail}"
    return Check("integrity", "PASS", msg, details), missing


def _fast_path(
    stream: str, r: Link, prev_version: int, prev_seq: int, prev_hash: str, fromiso: Any, event_hash: Any
) -> Any:
    if not (
        r.version == prev_version + 1
        and r.seq > prev_seq
        and r.prev_hash == prev_hash
        and event_hash(prev_hash, stream, r.version, r.type, r.body) == r.hash
    ):
        return None
    try:
        ev = decode(r.body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if (
        r.version > 1
        and type_of(ev) == r.type
        and r.type not in _NOT_CARD_TYPES
        and r.type != "card_opened"
        and _same_ts(fromiso, r.ts, ev.ts)
    ):
        return ev
    return None


def _head_moved(expect_head: str | None, head: str, n: int, at: int | None) -> str | None:
    if expect_head is None or expect_head == head:
        return None
    if at is not None:
        return (
            f"the log no longer ends at the expected head: that is version {at}'s hash and "
            f"{n - at} event(s) follow it (head now {head})"
        )
    return (
        f"the log no longer ends at the expected head {expect_head}: no event of this card has that hash "
        f"(events changed or removed; head now {head})"
    )


def _same_ts(fromiso: Any, column: str, ts: datetime) -> bool:
    try:
        return fromiso(column) == ts
    except ValueError:
        return False


def _event_problem(card_id: str, r: Link, ev: Any) -> str | None:
    t = type_of(ev)
    if t != r.type:
        return f"type column {r.type!r} but the body is {t!r}"
    if t in _NOT_CARD_TYPES:
        return f"a {t!r} event does not belong in a card's stream"
    if (r.version == 1) != (t == "card_opened"):
        return "the first event is not card_opened" if r.version == 1 else "card_opened again after version 1"
    if isinstance(ev, CardOpened) and ev.card_id != card_id:
        return f"card_opened names card {ev.card_id!r}"
    try:
        col_ts = datetime.fromisoformat(r.ts)
    except ValueError:
        return f"ts column {r.ts!r} is not a timestamp"
    if col_ts != ev.ts:
        return f"ts column {r.ts} differs from the event's own ts {ev.ts.isoformat()}"
    return None


# -- 2. consistency ------------------------------------------------------------------------------------------------


def check_consistency(
    card_id: str,
    events: Sequence[Numbered],
    baselines: Mapping[str, BaselineEntry] | None,
    *,
    cached: tuple[int, CardState] | None = None,
    complete: bool = True,
    baselines_problem: str | None = None,
    folded: CardState | None = None,
    rest_answer: bool = False,
) -> Check:
    """Rebuild the card and compare it with the document recorded at close and with the cached projection. ``baselines``
    None: missing (``baselines_problem`` says why); ``complete`` False: some events did not decode; ``folded``: ``fold``
    of ``events`` if the caller has it (not modified); ``rest_answer``: the close answer's hash."""
    prefixes: dict[int, CardState] = {len(events): folded} if folded is not None else {}

    def fold_prefix(n: int) -> CardState:
        # A long card is folded once: the close and the cache normally both cover every event.
        if n not in prefixes:
            prefixes[n] = fold(card_id, (e.event for e in events[:n]))
        return prefixes[n]

    details: dict[str, Any] = {
        "closed": False,
        "close_version": None,
        "recorded_document_sha256": None,
        "rebuilt_document_sha256": None,
        "close_answer_sha256": None,
        "events_after_close": 0,
        "cached_projection": None,
        "score": None,
        "closes": [],
    }
    if not complete:
        return Check("consistency", "FAIL", "cannot rebuild the card: some events do not decode", details)
    if baselines is None:
        return Check("consistency", "FAIL", f"cannot score the card: {baselines_problem}", details)
    failures: list[str] = []
    notes: list[str] = []
    closes, last_doc = _check_closes(card_id, events, baselines, folded, failures, notes)
    details["closes"] = closes
    if closes and closes[-1]["open_after"] is False:
        last = closes[-1]
        # Only a rebuilt document that matches the record is the one the server sent.
        if rest_answer and last_doc is not None and last["matches"]:
            answer = hashlib.sha256(document.rest_answer(last_doc)).hexdigest()
            details["close_answer_sha256"] = answer
            notes.insert(
                1,
                f"the close answer `ledger serve` sent (the same document, keys sorted, compact, a newline at the "
                f"end) hashes to {answer}",
            )
        details.update(
            closed=True,
            close_version=last["version"],
            recorded_document_sha256=last["recorded"],
            rebuilt_document_sha256=last["rebuilt"],
            events_after_close=last["events_after"],
            score=last["score"],
        )
    else:
        doc = score_card(fold_prefix(len(events)), baselines)
        doc_hash = document.sha256(doc)
        details.update(rebuilt_document_sha256=doc_hash, score=doc.score)
        reopened = f" (reopened after the close at version {closes[-1]['version']})" if closes else ""
        notes.insert(0, f"card is open{reopened}: no close document to compare (rebuilt document sha256 {doc_hash})")
    if cached is None:
        notes.append("no cached projection")
    else:
        details["cached_projection"] = _check_cached(events, cached, fold_prefix, failures, notes)
    if failures:
        return Check("consistency", "FAIL", "; ".join(failures), details)
    return Check("consistency", "PASS", "; ".join(notes), details)


def _check_cached(
    events: Sequence[Numbered],
    cached: tuple[int, CardState],
    fold_prefix: Callable[[int], CardState],
    failures: list[str],
    notes: list[str],
) -> dict[str, Any]:
    version, state = cached
    covered = sum(1 for n in events if n.version <= version)
    entry: dict[str, Any] = {"version": version, "matches": False}
    if covered != version or (covered and events[covered - 1].version != version):
        failures.append(f"cached projection covers version {version}, the log does not hold versions 1..{version}")
        return entry
    diff = _state_diff(fold_prefix(covered), state)
    if diff:
        failures.append(f"cached projection (version {version}) differs from a replay of the events: {diff}")
    else:
        entry["matches"] = True
        notes.append(f"cached projection (version {version}) equals a replay")
    return entry


def _check_closes(
    card_id: str,
    events: Sequence[Numbered],
    baselines: Mapping[str, BaselineEntry],
    folded: CardState | None,
    failures: list[str],
    notes: list[str],
) -> tuple[list[dict[str, Any]], document.ScorecardDoc | None]:
    """Every close's document hash against the card rebuilt up to it, what follows it, and the last close's document."""
    out: list[dict[str, Any]] = []
    doc: document.ScorecardDoc | None = None
    running = new_card(card_id)
    done = 0
    idx = [i for i, n in enumerate(events) if type(n.event) is CardClosed]
    for k, i in enumerate(idx):
        if i + 1 == len(events) and folded is not None:
            state = folded  # the usual case: one close, at the end, and the caller folded everything already
        else:
            fold(card_id, (n.event for n in events[done : i + 1]), running)
            done, state = i + 1, running
        # A close before BaselinesAttached scored the card without baselines, as it stood then.
        doc = score_card(state, baselines if state.baselines_id is not None else {})
        rebuilt = document.sha256(doc)
        closed = events[i]
        assert isinstance(closed.event, CardClosed)  # idx holds the closes only
        recorded = closed.event.document_sha256
        stop = idx[k + 1] if k + 1 < len(idx) else len(events)
        reopened = i + 1 < len(events) and type(events[i + 1].event) is CardReopened
        landed = None if reopened else [n for n in events[i + 1 : stop] if type(n.event) not in _BESIDE]
        after = len(landed) if landed else 0
        out.append(
            {
                "version": closed.version,
                "recorded": recorded,
                "rebuilt": rebuilt,
                "matches": recorded == rebuilt if recorded is not None else None,
                "events_after": after,
                "open_after": reopened,
                "score": doc.score,
            }
        )
        if landed:
            nxt = landed[0]
            failures.append(
                f"{after} event(s) after the card was closed at version {closed.version} "
                f"(first: version {nxt.version} {type_of(nxt.event)})"
            )
        if recorded is None:
            notes.append(f"closed at version {closed.version} without a document hash: nothing to compare")
        elif recorded != rebuilt:
            failures.append(
                f"rebuilt scorecard hashes to {rebuilt}, the document recorded at close (version "
                f"{closed.version}) to {recorded}"
            )
    matched = [c for c in out if c["matches"]]
    if matched:
        which = "at close" if len(out) == 1 else f"at each of the {len(matched)} closes"
        notes.insert(
            0,
            f"rebuilt scorecard equals the document recorded {which} (sha256 {matched[-1]['rebuilt']} of the bytes "
            "`ledger export` prints)",
        )
    return out, doc


def _state_diff(a: CardState, b: CardState) -> str | None:
    if a == b:
        return None
    for name in CardState.__struct_fields__:
        if name == "games":
            continue
        va, vb = getattr(a, name), getattr(b, name)
        if va != vb:
            return f"{name} {va!r} vs cached {vb!r}"
    if list(a.games) != list(b.games):
        return f"games {list(a.games)} vs cached {list(b.games)}"
    for gid, plays in a.games.items():
        other = b.games[gid]
        if len(plays) != len(other):
            return f"{gid}: {len(plays)} plays vs cached {len(other)}"
        for i, (p, q) in enumerate(zip(plays, other, strict=True)):
            for name in p.__struct_fields__:
                if getattr(p, name) != getattr(q, name):
                    return f"{gid} play {i + 1} {name} {getattr(p, name)!r} vs cached {getattr(q, name)!r}"
    return "the projections differ"


# -- 4. lifecycle --------------------------------------------------------------------------------------------------


def check_lifecycle(events: Sequence[Numbered], stale: int, max_open: int) -> Check:
    """Where the toolkit's idle or open limit would have closed the card: an event past it would be on a new card."""
    idle_for = timedelta(minutes=stale)
    max_for = timedelta(minutes=max_open)
    gaps: list[dict[str, Any]] = []
    over: dict[str, Any] | None = None
    first_close_index: int | None = None
    opened_at = next((n.event.ts for n in events if isinstance(n.event, CardOpened)), None)
    if opened_at is None and events:
        opened_at = events[0].event.ts
    last: Numbered | None = None
    longest: tuple[timedelta, Numbered | None, Numbered | None] = (timedelta(0), None, None)
    for i, n in enumerate(events):
        ev = n.event
        if not isinstance(ev, ACTIVITY):
            continue
        if last is not None:
            gap = ev.ts - last.event.ts
            if gap > longest[0]:
                longest = (gap, last, n)
            if gap >= idle_for:
                gaps.append(
                    {
                        "previous_version": last.version,
                        "previous_ts": last.event.ts.isoformat(),
                        "version": n.version,
                        "seq": n.seq,
                        "ts": ev.ts.isoformat(),
                        "minutes": round(gap.total_seconds() / 60, 3),
                    }
                )
                if first_close_index is None:
                    first_close_index = i
        if over is None and opened_at is not None and ev.ts - opened_at >= max_for:
            over = {
                "version": n.version,
                "seq": n.seq,
                "ts": ev.ts.isoformat(),
                "opened_at": opened_at.isoformat(),
                "closes_at": (opened_at + max_for).isoformat(),
                "minutes": round((ev.ts - opened_at).total_seconds() / 60, 3),
            }
            if first_close_index is None or i < first_close_index:
                first_close_index = i
        last = n
    after_events = after_actions = 0
    if first_close_index is not None:
        for n in events[first_close_index:]:
            after_events += isinstance(n.event, (*ACTIVITY, ActionIgnored))
            after_actions += isinstance(n.event, ActionTaken | LevelReset)
    open_minutes = (
        round(((last.event.ts if last else opened_at) - opened_at).total_seconds() / 60, 3) if opened_at else 0.0
    )
    details: dict[str, Any] = {
        "stale_minutes": stale,
        "max_open_minutes": max_open,
        "idle_gaps": gaps,
        "max_open": over,
        "open_minutes": open_minutes,
        "events_after_first_close": after_events,
        "actions_after_first_close": after_actions,
    }
    if not gaps and over is None:
        lg, a, b = longest
        lg_txt = (
            f"longest {lg.total_seconds() / 60:.1f} min, between versions {a.version} and {b.version}"
            if a is not None and b is not None
            else "no gaps"
        )
        msg = (
            f"no idle gap of STALE_MINUTES={stale} or more ({lg_txt}); open {open_minutes:.1f} min "
            f"of MAX_OPEN_FOR_MINUTES={max_open}"
        )
        return Check("lifecycle", "PASS", msg, details)
    parts = []
    if gaps:
        shown = "; ".join(
            f"version {g['version']} at {g['ts']} came {g['minutes']:.1f} min after version {g['previous_version']}"
            for g in gaps[:3]
        )
        more = f" (+{len(gaps) - 3} more)" if len(gaps) > 3 else ""
        parts.append(f"{len(gaps)} idle gap(s) of STALE_MINUTES={stale} or more: {shown}{more}")
    if over is not None:
        parts.append(
            f"version {over['version']} at {over['ts']} came {over['minutes']:.1f} min after the card opened "
            f"(MAX_OPEN_FOR_MINUTES={max_open}: closed at {over['closes_at']})"
        )
    msg = (
        "; ".join(parts) + f"; the toolkit would have closed the card there, and the {after_events} later event(s) "
        f"({after_actions} action(s)) would have landed on a new card"
    )
    return Check("lifecycle", "WARN", msg, details)


# -- 5. import -----------------------------------------------------------------------------------------------------


def check_import(events: Iterable[AnyEvent]) -> tuple[str, str, dict[str, Any]] | None:
    """(status, message, details) for an imported card with skipped lines or inferred actions, else None."""
    files: set[str] = set()
    skipped: list[dict[str, Any]] = []
    undecided = 0
    unknown_resets: list[str] = []
    inferred = 0
    for e in events:
        t = type(e)
        if t is RecordingImported:
            files.add(e.file)  # type: ignore[union-attr]
        elif t is LinesSkipped:
            skipped.extend(
                {"file": e.file, "line": s.line, "reason": s.reason, "sha256": s.sha256, "bytes": s.size}  # type: ignore[union-attr]
                for s in e.lines  # type: ignore[union-attr]
            )
        elif t is ActionsInferred:
            inferred += e.inferred  # type: ignore[union-attr]
            undecided += len(e.undecided)  # type: ignore[union-attr]
            if not e.resets_known:  # type: ignore[union-attr]
                unknown_resets.append(e.file)  # type: ignore[union-attr]
    if not files or (not skipped and not inferred and not unknown_resets):
        # A toolkit import that read every line has nothing to add to the four checks.
        return None
    details = {
        "files": len(files),
        "skipped_lines": skipped,
        "inferred_actions": inferred,
        "undecided_lines": undecided,
    }
    parts = []
    if skipped:
        shown = "; ".join(f"{s['file']}:{s['line']} ({s['reason']})" for s in skipped[:3])
        more = f" (+{len(skipped) - 3} more)" if len(skipped) > 3 else ""
        parts.append(f"{len(skipped)} line(s) of its recordings were skipped at import: {shown}{more}")
    if unknown_resets:
        parts.append(
            f"imported without the game's code ({', '.join(sorted(set(unknown_resets)))}): resets are unknown, "
            f"{undecided} line(s) could have been a level RESET"
        )
    elif undecided:
        parts.append(f"{undecided} line(s) could have been a level RESET as well as the action imported")
    if parts:
        return "WARN", "; ".join(parts) + "; scores do not depend on resets", details
    what = f", {inferred} action(s) inferred by re-simulation" if inferred else ""
    return "PASS", f"every line of its {len(files)} recording(s) was imported{what}", details


#: A file is refused when this share of its lines (or more) is not in the recording's shape: one bad line in a
#: long recording is a damaged line, a quarter of them is a file of something else.
BAD_SHARE = 4


def not_a_recording(first_bad: bool, bad: int, good: int) -> str | None:
    """Why a file is no recording, else None (lines not JSON and JSON of another shape count alike)."""
    if first_bad:
        return "its first line is not a recording line"
    if bad and bad * BAD_SHARE >= bad + good:
        return f"{bad} of its {bad + good} lines are not recording lines (one in {BAD_SHARE} or more)"
    return None


def compare_plays(held: CardState, imported: CardState, guids: set[str], *, resets: bool = True) -> list[str]:
    """Where the plays of ``guids`` differ between the card the ledger holds and the one a recording makes."""
    out: list[str] = []
    fields = ("actions", "levels_completed", "state") + (("resets",) if resets else ())
    for game_id in sorted(set(held.games) | set(imported.games)):
        for guid in sorted(guids):
            a = [p for p in held.games.get(game_id, []) if p.guid == guid]
            b = [p for p in imported.games.get(game_id, []) if p.guid == guid]
            if not a and not b:
                continue
            if len(a) != len(b):
                out.append(f"{game_id} {guid}: {len(a)} play(s) on the card, {len(b)} in the recording")
                continue
            for i, (pa, pb) in enumerate(zip(a, b, strict=True), 1):
                for f in fields:
                    va, vb = getattr(pa, f), getattr(pb, f)
                    if va != vb:
                        out.append(f"{game_id} {guid} play {i}: {f} {va!r} on the card, {vb!r} in the recording")
    return out
