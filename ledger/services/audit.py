"""The audit of one card: the checks that back a disputed score, in order.

1. integrity: the card's stored events form an unbroken hash chain (versions 1..n, each ``prev_hash`` the previous
   event's hash, each hash recomputed from the stored bytes), nothing missing or reordered; optionally the log must
   still end at a head hash the user kept elsewhere (``expect_head``).
2. consistency: the scorecard rebuilt from the events hashes to the document recorded at each close
   (``CardClosed.document_sha256``), nothing but a ``card_reopened`` (a resumed import) follows a close, and the
   cached projection (if any) equals a replay of the events it covers.
3. re-simulation (with a folder of game files): see :mod:`ledger.resimulate`.
4. lifecycle: where the toolkit's idle (STALE_MINUTES) and open-time (MAX_OPEN_FOR_MINUTES) limits would have
   closed the card under the agent. A warning, never a failure.

Integrity, consistency and lifecycle are pure (events in, :class:`Check` out); re-simulation runs the game code;
:func:`audit_card` reads the ledger and runs them all.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec

from ledger.core import chain, document
from ledger.core.events import (
    ActionIgnored,
    ActionTaken,
    BaselineEntry,
    CardClosed,
    CardOpened,
    CardReopened,
    GameOver,
    LevelCompleted,
    LevelReset,
    PlayStarted,
    Win,
    card_stream,
    decode,
    type_of,
)
from ledger.core.projection import CardState, fold, new_card
from ledger.core.scoring import score_card
from ledger.storage.store import StoredEvent
from ledger.toolkit.resimulate import Numbered, resimulate

Status = Literal["PASS", "FAIL", "WARN", "SKIP"]

#: The toolkit's defaults and clamping windows (``arc_agi/scorecard.py``).
DEFAULT_STALE_MINUTES = 15
DEFAULT_MAX_OPEN_FOR_MINUTES = 4320
STALE_RANGE = (1, 60)
MAX_OPEN_RANGE = (60, 60 * 24 * 7)

#: Event types that belong to other streams (a baseline set, the labels), never to a card's.
_NOT_CARD_TYPES = frozenset({"baselines_recorded", "label_set"})


@dataclass(frozen=True, slots=True)
class Check:
    """One line of the audit: ``status`` and a one-line ``message``; ``details`` for ``--json``."""

    name: str
    status: Status
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong with one stored event."""

    version: int
    seq: int
    problem: str


# -- the toolkit's limits ---------------------------------------------------------------------------------------


def _env_minutes(environ: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    # Exactly the toolkit's parsing: int() of the raw string (a non-int falls back to the default), then clamp.
    raw = environ.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        value = default
    return max(lo, min(hi, value))


def stale_minutes(environ: Mapping[str, str] | None = None) -> int:
    """STALE_MINUTES as the toolkit reads it: default 15, clamped to 1..60."""
    return _env_minutes(
        os.environ if environ is None else environ, "STALE_MINUTES", DEFAULT_STALE_MINUTES, *STALE_RANGE
    )


def max_open_minutes(environ: Mapping[str, str] | None = None) -> int:
    """MAX_OPEN_FOR_MINUTES as the toolkit reads it: default 4320 (3 days), clamped to 60..10080."""
    return _env_minutes(
        os.environ if environ is None else environ,
        "MAX_OPEN_FOR_MINUTES",
        DEFAULT_MAX_OPEN_FOR_MINUTES,
        *MAX_OPEN_RANGE,
    )


# -- 1. integrity --------------------------------------------------------------------------------------------------


def check_integrity(
    card_id: str, rows: Sequence[StoredEvent], expect_head: str | None = None
) -> tuple[Check, list[Numbered]]:
    """Walk the card's stored rows (in version order) and return the check and the events that decoded."""
    stream = card_stream(card_id)
    problems: list[Problem] = []
    decoded: list[Numbered] = []
    prev_version, prev_seq, prev_hash = 0, 0, chain.GENESIS
    event_hash, fromiso = chain.event_hash, datetime.fromisoformat
    for r in rows:
        # The fast path (nearly every row): linked, hashed, decoded, of its stated type and timestamp.
        ev = None
        if (
            r.version == prev_version + 1
            and r.seq > prev_seq
            and r.prev_hash == prev_hash
            and event_hash(prev_hash, stream, r.version, r.type, r.body) == r.hash
        ):
            try:
                ev = decode(r.body)
            except (msgspec.DecodeError, msgspec.ValidationError):
                ev = None
        if (
            ev is not None
            and r.version > 1
            and type_of(ev) == r.type
            and r.type not in _NOT_CARD_TYPES
            and r.type != "card_opened"
            and _same_ts(fromiso, r.ts, ev.ts)
        ):
            decoded.append(Numbered(r.version, r.seq, ev))
        else:
            p = _row_problem(stream, card_id, r, prev_version, prev_seq, prev_hash, decoded)
            if p is not None:
                problems.append(Problem(r.version, r.seq, p))
        prev_version, prev_seq, prev_hash = r.version, r.seq, r.hash
    head = rows[-1].hash if rows else chain.GENESIS
    n = len(rows)
    details: dict[str, Any] = {
        "events": n,
        "last_version": rows[-1].version if rows else 0,
        "head": head,
        "expected_head": expect_head,
        "expected_head_version": next((r.version for r in rows if r.hash == expect_head), None)
        if expect_head is not None
        else None,
        "problems": [{"version": p.version, "seq": p.seq, "problem": p.problem} for p in problems],
    }
    head_msg = None
    if expect_head is not None and expect_head != head:
        at = details["expected_head_version"]
        if at is not None:
            head_msg = (
                f"the log no longer ends at the expected head: that is version {at}'s hash and "
                f"{n - at} event(s) follow it (head now {head})"
            )
        else:
            head_msg = (
                f"the log no longer ends at the expected head {expect_head}: no event of this card has that hash "
                f"(events changed or removed; head now {head})"
            )
    if problems:
        first = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        msg = f"version {first.version} (seq {first.seq}): {first.problem}{more}"
        if head_msg:
            msg += f"; {head_msg}"
        return Check("integrity", "FAIL", msg, details), decoded
    if head_msg:
        return Check("integrity", "FAIL", head_msg, details), decoded
    tail = ", matches the expected head" if expect_head is not None else ""
    msg = f"{n} events, versions 1..{n}, hash chain unbroken; head {head}{tail}"
    return Check("integrity", "PASS", msg, details), decoded


def _same_ts(fromiso: Any, column: str, ts: datetime) -> bool:
    try:
        return fromiso(column) == ts
    except ValueError:
        return False


def _row_problem(
    stream: str,
    card_id: str,
    r: StoredEvent,
    prev_version: int,
    prev_seq: int,
    prev_hash: str,
    decoded: list[Numbered],
) -> str | None:
    """The first thing wrong with one row given the row before it (None if nothing); decodes it into ``decoded``."""
    problem = None
    if r.version != prev_version + 1:
        missing = r.version - prev_version - 1
        problem = (
            f"version {r.version} follows version {prev_version}: {missing} event(s) missing"
            if missing > 0
            else f"version {r.version} follows version {prev_version}"
        )
    elif r.seq <= prev_seq:
        problem = f"stored before version {prev_version} (seq {r.seq} < {prev_seq}): events reordered"
    elif r.prev_hash != prev_hash:
        problem = f"prev_hash does not link to version {prev_version}'s hash (an event before it was replaced)"
    elif chain.event_hash(r.prev_hash, stream, r.version, r.type, r.body) != r.hash:
        problem = "the stored bytes do not match the event's hash (the event was changed)"
    try:
        ev = decode(r.body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        return problem or f"body does not decode: {e}"
    decoded.append(Numbered(r.version, r.seq, ev))
    if problem:
        return problem
    t = type_of(ev)
    if t != r.type:
        return f"type column {r.type!r} but the body is {t!r}"
    if t in _NOT_CARD_TYPES:
        return f"a {t!r} event does not belong in a card's stream"
    if (r.version == 1) != (t == "card_opened"):
        return "the first event is not card_opened" if r.version == 1 else "card_opened again after version 1"
    if t == "card_opened" and ev.card_id != card_id:  # type: ignore[union-attr]
        return f"card_opened names card {ev.card_id!r}"  # type: ignore[union-attr]
    try:
        col_ts = datetime.fromisoformat(r.ts)
    except ValueError:
        return f"ts column {r.ts!r} is not a timestamp"
    if col_ts != ev.ts:
        return f"ts column {r.ts} differs from the event's own ts {ev.ts.isoformat()}"
    return None


# -- 2. consistency -----------------------------------------------------------------------------------------------


def check_consistency(
    card_id: str,
    events: Sequence[Numbered],
    baselines: Mapping[str, BaselineEntry] | None,
    *,
    cached: tuple[int, CardState] | None = None,
    complete: bool = True,
    baselines_problem: str | None = None,
    folded: CardState | None = None,
) -> Check:
    """Rebuild the card and compare it with the document recorded at close and with the cached projection.

    ``baselines`` is the set the card was played under (``None`` when it is missing: ``baselines_problem`` says
    why); ``complete`` is False when some stored events did not decode (the rebuild cannot be trusted);
    ``folded`` is ``fold`` of all ``events`` if the caller has it already (it is not modified).
    """
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
    closes = _check_closes(card_id, events, baselines, folded, failures, notes)
    details["closes"] = closes
    if closes and closes[-1]["open_after"] is False:
        last = closes[-1]
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
        version, state = cached
        covered = sum(1 for n in events if n.version <= version)
        entry: dict[str, Any] = {"version": version, "matches": False}
        details["cached_projection"] = entry
        if covered != version or (covered and events[covered - 1].version != version):
            failures.append(f"cached projection covers version {version}, the log does not hold versions 1..{version}")
        else:
            diff = _state_diff(fold_prefix(covered), state)
            if diff:
                failures.append(f"cached projection (version {version}) differs from a replay of the events: {diff}")
            else:
                entry["matches"] = True
                notes.append(f"cached projection (version {version}) equals a replay")
    if failures:
        return Check("consistency", "FAIL", "; ".join(failures), details)
    return Check("consistency", "PASS", "; ".join(notes), details)


def _check_closes(
    card_id: str,
    events: Sequence[Numbered],
    baselines: Mapping[str, BaselineEntry],
    folded: CardState | None,
    failures: list[str],
    notes: list[str],
) -> list[dict[str, Any]]:
    """Every CardClosed: its recorded document hash against the card rebuilt up to it, and what follows it.

    Only a CardReopened (an import that resumed) may follow a close; anything else landed on a closed card.
    """
    out: list[dict[str, Any]] = []
    running = new_card(card_id)
    done = 0
    idx = [i for i, n in enumerate(events) if type(n.event) is CardClosed]
    for k, i in enumerate(idx):
        if i + 1 == len(events) and folded is not None:
            state = folded  # the usual case: one close, at the end, and the caller folded everything already
        else:
            fold(card_id, (n.event for n in events[done : i + 1]), running)
            done, state = i + 1, running
        doc = score_card(state, baselines)
        rebuilt = document.sha256(doc)
        closed = events[i]
        recorded = closed.event.document_sha256  # type: ignore[union-attr]
        stop = idx[k + 1] if k + 1 < len(idx) else len(events)
        reopened = i + 1 < len(events) and type(events[i + 1].event) is CardReopened
        after = 0 if reopened else stop - i - 1
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
        if after:
            nxt = events[i + 1]
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
        notes.insert(0, f"rebuilt scorecard equals the document recorded {which} (sha256 {matched[-1]['rebuilt']})")
    return out


def _state_diff(a: CardState, b: CardState) -> str | None:
    """The first field where two projections differ, in words (None if equal)."""
    if a == b:
        return None
    for f in fields(CardState):
        if f.name == "games":
            continue
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if va != vb:
            return f"{f.name} {va!r} vs cached {vb!r}"
    if list(a.games) != list(b.games):
        return f"games {list(a.games)} vs cached {list(b.games)}"
    for gid, plays in a.games.items():
        other = b.games[gid]
        if len(plays) != len(other):
            return f"{gid}: {len(plays)} plays vs cached {len(other)}"
        for i, (p, q) in enumerate(zip(plays, other, strict=True)):
            for f in fields(p):
                if getattr(p, f.name) != getattr(q, f.name):
                    return f"{gid} play {i + 1} {f.name} {getattr(p, f.name)!r} vs cached {getattr(q, f.name)!r}"
    return "the projections differ"


# -- 3. re-simulation -------------------------------------------------------------------------------------------


def check_resimulation(events: Sequence[Numbered], environments_dir: str | os.PathLike[str] | None) -> Check:
    """Replay the card's plays against the real game code (SKIP without a folder of games)."""
    if environments_dir is None:
        return Check(
            "resimulation",
            "SKIP",
            "not run: give --environments DIR (the game files) to replay every action against the game code",
            {
                "environments": None,
                "games": [],
                "guids": 0,
                "plays": 0,
                "inputs": 0,
                "default_seed_plays": 0,
                "error": None,
                "divergence": None,
            },
        )
    res = resimulate(events, environments_dir)
    div = res.divergence
    details: dict[str, Any] = {
        "environments": os.fspath(environments_dir),
        "games": res.games,
        "guids": res.guids,
        "plays": res.plays,
        "inputs": res.inputs,
        "default_seed_plays": res.default_seed_plays,
        "error": res.error,
        "divergence": None
        if div is None
        else {
            "version": div.version,
            "seq": div.seq,
            "game_id": div.game_id,
            "guid": div.guid,
            "action": div.action,
            "field": div.field,
            "expected": div.expected,
            "recorded": div.recorded,
            "message": div.message,
        },
    }
    if res.error:
        return Check("resimulation", "FAIL", res.error, details)
    if div is not None:
        return Check("resimulation", "FAIL", f"first divergence at {div.message}", details)
    seeds = (
        f"; {res.default_seed_plays} play(s) had no recorded seed and used the game's default"
        if res.default_seed_plays
        else ""
    )
    msg = (
        f"{res.plays} play(s) on {res.guids} guid(s), {res.inputs} inputs replayed against the game code: "
        f"every state, levels_completed and derived event matches{seeds}"
    )
    return Check("resimulation", "PASS", msg, details)


# -- 4. lifecycle -----------------------------------------------------------------------------------------------

#: Events that mean the toolkit's scorecard was touched (opened, or ``update_scorecard`` refreshed ``last_update``).
#: An ignored action's empty frame never reaches the scorecard; closes and import bookkeeping are not updates.
_ACTIVITY = (CardOpened, PlayStarted, ActionTaken, LevelReset, LevelCompleted, GameOver, Win)


def check_lifecycle(events: Sequence[Numbered], stale: int, max_open: int) -> Check:
    """Where the toolkit would have closed the card: idle for ``stale`` minutes, open for ``max_open`` minutes.

    The toolkit closes a card once ``now - last_update >= idle_for`` or ``now - open_at >= max_open_for``;
    an event that arrives past such a point would have landed on a new card. Pure.
    """
    idle_for = timedelta(minutes=stale)
    max_for = timedelta(minutes=max_open)
    gaps: list[dict[str, Any]] = []
    over: dict[str, Any] | None = None
    first_close_index: int | None = None
    opened_at = next((n.event.ts for n in events if isinstance(n.event, CardOpened)), None)
    if opened_at is None and events:
        opened_at = events[0].event.ts
    last: Numbered | None = None
    longest = (timedelta(0), None, None)
    for i, n in enumerate(events):
        ev = n.event
        if not isinstance(ev, _ACTIVITY):
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
        rest = [n.event for n in events[first_close_index:]]
        after_events = sum(1 for e in rest if isinstance(e, (*_ACTIVITY, ActionIgnored)))
        after_actions = sum(1 for e in rest if isinstance(e, ActionTaken | LevelReset))
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


# -- the whole audit ----------------------------------------------------------------------------------------------


@dataclass
class AuditReport:
    """Every check of one card, in order, and what the post-mortem needs."""

    card_id: str
    head: str
    events: int
    checks: list[Check]
    card: CardState | None = None
    doc: document.ScorecardDoc | None = None

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings and skipped checks do not fail an audit)."""
        return all(c.status != "FAIL" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """The stable ``--json`` shape (documented in the README)."""
        from ledger.core.postmortem import postmortem

        pm = postmortem(self.card, self.doc) if self.card is not None and self.doc is not None else None
        return {
            "card_id": self.card_id,
            "ok": self.ok,
            "head": self.head,
            "events": self.events,
            "checks": [{"name": c.name, "status": c.status, "message": c.message, **c.details} for c in self.checks],
            "postmortem": msgspec.to_builtins(pm) if pm is not None else None,
        }


def audit_card(
    ledger: Any,
    card_id: str,
    *,
    environments: str | os.PathLike[str] | None = None,
    expect_head: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> AuditReport:
    """Run every check on ``card_id`` of an open :class:`ledger.api.Ledger` (raises UnknownCard)."""
    from ledger.errors import UnknownBaselines, UnknownCard

    rows = ledger.store.read_stream(card_stream(card_id))
    if not rows:
        raise UnknownCard(card_id)
    integrity, events = check_integrity(card_id, rows, expect_head)
    complete = len(events) == len(rows)
    card = fold(card_id, (n.event for n in events))
    baselines: Mapping[str, BaselineEntry] | None
    problem = None
    try:
        baselines = ledger.card_baselines(card)
    except UnknownBaselines as e:
        baselines, problem = None, str(e)
    consistency = check_consistency(
        card_id,
        events,
        baselines,
        cached=ledger.cached_card(card_id),
        complete=complete,
        baselines_problem=problem,
        folded=card,
    )
    resim = check_resimulation(events, environments)
    lifecycle = check_lifecycle(events, stale_minutes(environ), max_open_minutes(environ))
    doc = score_card(card, baselines) if baselines is not None else None
    return AuditReport(
        card_id=card_id,
        head=rows[-1].hash,
        events=len(rows),
        checks=[integrity, consistency, resim, lifecycle],
        card=card,
        doc=doc,
    )
