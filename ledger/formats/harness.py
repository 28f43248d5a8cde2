"""Reading the ARC-AGI-3-Agents harness's recordings (see docs/import.md, 'The harnesses' recordings').

On Ctrl-C the harness appends its final scorecard line from another thread, which can land inside a long frame
line; :func:`find_cut` recovers both records only when exactly one split leaves two whole records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ledger.domain.events import SkippedLine
from ledger.formats.builtin_readers import ACTION_NAMES, STATES, HarnessName, any_json, decodes
from ledger.formats.frame_lines import FrameLine, FrameLines, LineMap, pack

_scan = json.JSONDecoder()
#: Objects tried per line: a record has a handful of ``{`` before its frame (which holds none); a line of junk
#: made of braces must not cost time quadratic in its length.
MAX_TRIES = 256


@dataclass(frozen=True, slots=True)
class Cut:
    """A line cut by another write, taken apart: the record that was cut, the object written into it."""

    outer: bytes
    inner: bytes
    at: int
    #: Whether the cut record's rest is the next line (the inserted object ended this one with its newline).
    joins_next: bool

    def describe(self, lineno: int) -> str:
        where = f"at byte {self.at}"
        rest = f"; its rest is line {lineno + 1}" if self.joins_next else " and the rest of the line after it"
        return (
            f"a record cut by another write: {len(self.inner)} bytes of another record written into it {where}"
            f"{rest}; both recovered ({len(self.outer)} + {len(self.inner)} bytes)"
        )


def find_cut(body: bytes, nxt: bytes | None) -> Cut | None:
    """``body`` (a line that is not JSON) taken apart, or None when the bytes do not decide one way."""
    nxt = nxt.rstrip(b"\r\n") if nxt is not None else None
    if nxt is not None and (not nxt.strip() or decodes(any_json, nxt)):
        nxt = None  # a line of its own: not the rest of this one
    try:
        text = body.decode("utf-8")
        rest = nxt.decode("utf-8") if nxt is not None else None
    except UnicodeDecodeError:
        return None
    found: list[Cut] = []
    k = text.find("{", 1)
    tried = 0
    while k > 0 and tried < MAX_TRIES:
        tried += 1
        try:
            _, end = _scan.raw_decode(text, k)
        except (ValueError, RecursionError):
            end = -1
        if end > k:
            joins = end == len(text.rstrip())
            if joins and rest is not None:
                outer = (text[:k] + rest).encode("utf-8")
            elif not joins:
                outer = (text[:k] + text[end:]).encode("utf-8")
            else:
                outer = b""
            if outer and decodes(_line, outer):
                inner = text[k:end].encode("utf-8")
                found.append(Cut(outer, inner, len(text[:k].encode("utf-8")), joins))
        k = text.find("{", k + 1)
    distinct = {(c.outer, c.inner, c.joins_next) for c in found}
    return found[0] if len(distinct) == 1 else None


@dataclass(slots=True)
class HarnessRead:
    """A harness recording read from its start to ``end`` (complete lines only)."""

    path: Path
    name: HarnessName
    frames: FrameLines = field(default_factory=FrameLines)
    side_lines: int = 0
    blank_lines: int = 0
    skipped: list[SkippedLine] = field(default_factory=list)
    #: The last line's data when it is the final ``scorecard.get(game_id)`` ({} or a run's dump).
    final: dict[str, Any] | None = None
    final_lineno: int | None = None
    lines: int = 0
    end: int = 0
    truncated_tail: int = 0
    impossible: list[tuple[int, str]] = field(default_factory=list)
    prefix_sha256: str = ""
    #: Skipped lines that look like frame lines (an action the game saw, its answer unreadable).
    lost_frames: list[int] = field(default_factory=list)
    order: list[tuple[int, str, str]] = field(default_factory=list)
    #: Whether the first non-blank line was not a ``{"timestamp", "data"}`` record (then it is no recording).
    first_bad: bool = False
    cuts: list[tuple[int, str]] = field(default_factory=list)
    #: (time, tokens) of the side lines LLM agents write before each action (``{"tokens": N, ...}``).
    tokens: LineMap[tuple[datetime, int]] = field(default_factory=LineMap)
    #: lineno -> (action, x, y) the line's ``action_input`` names; only with ``acts`` set does the file name them.
    actions: LineMap[tuple[int, int | None, int | None]] = field(default_factory=LineMap)
    acts: bool = False
    #: Frame lines after the final scorecard line: answered after the card's close, never counted on it.
    after_close: list[SkippedLine] = field(default_factory=list)


class _Action(msgspec.Struct):
    id: int | str = 0
    data: dict[str, Any] | None = None


class _Data(msgspec.Struct):
    frame: msgspec.Raw
    state: str
    game_id: str = ""
    levels_completed: int | None = None
    score: int | None = None
    win_levels: int | None = None
    win_score: int | None = None
    action_input: _Action | None = None
    guid: str | None = None
    full_reset: bool = False
    available_actions: list[int] = []


class _Line(msgspec.Struct):
    timestamp: datetime
    data: msgspec.Raw


_line = msgspec.json.Decoder(_Line)
_data = msgspec.json.Decoder(_Data)


def _skip(read: HarnessRead, lineno: int, raw: bytes, reason: str) -> None:
    read.skipped.append(SkippedLine(lineno, reason, hashlib.sha256(raw).hexdigest(), len(raw)))
    if b'"frame"' in raw or b'"game_id"' in raw:
        read.lost_frames.append(lineno)


def _is_scorecard(data: Any) -> bool:
    return isinstance(data, dict) and (not data or ("actions" in data and "levels_completed" in data))


def read_harness(path: str | Path, name: HarnessName) -> HarnessRead:
    """Read a whole harness recording; a last line without a newline waits unless it is a complete record."""
    p = Path(path)
    read = HarnessRead(p, name)
    digest = hashlib.sha256()
    lines = _Lines(read)

    def consume(raw: bytes) -> int:
        digest.update(raw)
        read.end += len(raw)
        read.lines += 1
        return read.lines

    with open(p, "rb") as f:
        it = iter(f)
        held: bytes | None = None
        while (raw := held if held is not None else next(it, None)) is not None:
            held = None
            complete = raw.endswith(b"\n")
            body = raw.rstrip(b"\r\n")
            if not complete and not decodes(_line, body):
                read.truncated_tail = len(raw)
                break
            decoded = _decode_line(body) if body.strip() else None
            if decoded == "not JSON":
                nxt = next(it, None)
                cut = find_cut(body, nxt)
                if cut is not None and cut.joins_next and nxt is not None and not nxt.endswith(b"\n"):
                    read.truncated_tail = len(raw) + len(nxt)  # its rest is still being written
                    break
                if cut is not None:
                    lineno = consume(raw)
                    read.cuts.append((lineno, cut.describe(lineno)))
                    lines.take(lineno, cut.outer, _decode_line(cut.outer))
                    lines.take(lineno + 1 if cut.joins_next else lineno, cut.inner, _decode_line(cut.inner))
                    if cut.joins_next and nxt is not None:
                        consume(nxt)
                    else:
                        held = nxt
                    continue
                held = nxt
            lineno = consume(raw)
            if not body.strip():
                read.blank_lines += 1
                continue
            lines.take(lineno, body, decoded)
    lines.finish()
    read.prefix_sha256 = digest.hexdigest()
    return read


def _decode_line(body: bytes) -> _Line | str:
    try:
        return _line.decode(body)
    except msgspec.ValidationError:
        return "wrong types"
    except (msgspec.DecodeError, RecursionError):
        return "not JSON"


class _Lines:
    def __init__(self, read: HarnessRead) -> None:
        self.read = read
        self.last_ts: datetime | None = None
        self.pending_final: tuple[int, dict[str, Any]] | None = None
        #: The scorecard line that closed the card, once one came (it stays the final line whatever follows).
        self.closed: tuple[int, dict[str, Any]] | None = None
        self.same_ts: set[tuple[Any, ...]] = set()
        self.records = 0

    def take(self, lineno: int, body: bytes, rec: _Line | str | None) -> None:
        read = self.read
        self.records += 1
        if self.records == 1:
            read.first_bad = isinstance(rec, str) or not decodes(_line, body)
        if self.pending_final is not None and self.closed is None:
            # A scorecard-shaped line that was not the last: a side line, unless it closed the card (below).
            if _closes(self.pending_final[1]):
                self.closed = self.pending_final
            self.pending_final = None
            read.side_lines += 1
        if not isinstance(rec, _Line):
            _skip(read, lineno, body, rec or "not JSON")
            return
        ts = rec.timestamp if rec.timestamp.tzinfo is not None else rec.timestamp.replace(tzinfo=UTC)
        try:
            d = _data.decode(rec.data)
        except (msgspec.DecodeError, RecursionError):
            whole = any_json.decode(rec.data) if decodes(any_json, rec.data) else None
            if isinstance(whole, dict) and "frame" in whole:
                _skip(read, lineno, body, "wrong types")
            elif _is_scorecard(whole) and self.closed is None:
                self.pending_final = (lineno, whole)  # type: ignore[assignment]
            else:
                read.side_lines += 1
                n = whole.get("tokens") if isinstance(whole, dict) else None
                if isinstance(n, int) and not isinstance(n, bool):
                    read.tokens[len(read.tokens)] = (ts, n)
            return
        line = _frame_line(read, lineno, ts, d, body)
        if line is None:
            return
        if self.closed is not None and (not read.frames or line.guid == read.frames[-1].guid):
            # The same play after the close (another play's lines are recordings put together: refused as such).
            if not read.after_close:
                # The scorecard line was the close, not a side line.
                read.side_lines -= 1
                read.final_lineno, read.final = self.closed
            why = f"after the final scorecard line {self.closed[0]}: answered after the card's close, not counted"
            read.after_close.append(SkippedLine(lineno, why, hashlib.sha256(body).hexdigest(), len(body)))
            return
        if self.last_ts is not None and ts < self.last_ts:
            msg = f"timestamp {ts.isoformat()} is before the previous line's {self.last_ts.isoformat()}"
            read.order.append((lineno, "out_of_order", msg))
        elif ts != self.last_ts:
            self.last_ts = ts
            self.same_ts.clear()
        # Timestamps never go back, so a repeat of an earlier line is among the lines of the same timestamp.
        key = (line.guid, line.packed, line.state, line.levels_completed, line.full_reset)
        if key in self.same_ts:
            read.order.append((lineno, "repeated", "repeats an earlier line (same guid, frame and timestamp)"))
        self.same_ts.add(key)
        read.frames.append(line)

    def finish(self) -> None:
        if self.pending_final is not None and not self.read.after_close:
            self.read.final_lineno, self.read.final = self.pending_final


def _closes(data: dict[str, Any]) -> bool:
    """Whether a scorecard-shaped line is the close's ``scorecard.get(game_id)`` (``{}`` locally, a run online)."""
    return not data or isinstance(data.get("guid"), str) or isinstance(data.get("runs"), list)


def _frame_line(read: HarnessRead, lineno: int, ts: datetime, d: _Data, body: bytes) -> FrameLine | None:
    levels = d.levels_completed if d.levels_completed is not None else d.score
    win = d.win_levels if d.win_levels is not None else d.win_score
    frame = bytes(d.frame)
    if levels is None or d.state not in STATES or not frame.startswith(b"["):
        _skip(read, lineno, body, "wrong types")
        return None
    if levels < 0 or (win is not None and levels > win):
        read.impossible.append((lineno, f"levels_completed {levels} outside 0..win_levels {win}"))
    act = _action_of(d.action_input)
    if act is not None:
        read.actions[lineno] = act
        read.acts = read.acts or act[0] != 0
    return FrameLine(
        lineno=lineno,
        ts=ts,
        game_id=d.game_id,
        guid=d.guid or None,
        state=d.state,
        levels_completed=levels,
        win_levels=win,
        full_reset=d.full_reset,
        packed=pack(frame),
        available_actions=tuple(d.available_actions),
    )


def _action_of(ai: _Action | None) -> tuple[int, int | None, int | None] | None:
    if ai is None:
        return None
    a = ai.id if isinstance(ai.id, int) else ACTION_NAMES.get(ai.id.strip().upper())
    if a is None or isinstance(a, bool) or not 0 <= a <= 7:
        return None
    data = ai.data or {}
    x, y = data.get("x"), data.get("y")
    return a, x if type(x) is int else None, y if type(y) is int else None
