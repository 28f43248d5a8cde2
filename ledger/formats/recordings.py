"""Reading the toolkit's JSONL recordings (``<recordings_dir>/<card_id>/<game_id>-<guid>.jsonl``), line by line. The
frame is the last key the toolkit writes, so the fast path decodes only the bytes before ``, "frame": ``; any other line
is decoded whole, with the same result. sha256 costs as much as the parse and ``hashlib`` releases the GIL, so
:class:`BackgroundHash` hashes on another core."""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ledger.domain.events import RecordingImported, SkippedLine, State
from ledger.domain.translator import Observation
from ledger.formats.builtin_readers import ACTION_NAMES
from ledger.formats.import_problems import SKIP_REASONS, Problem, ProblemKind
from ledger.toolkit.observation import click_xy

#: Bytes read at a time: small enough that a block is still in the CPU cache when its lines are scanned.
BLOCK = 1 << 18
#: A line longer than this is streamed (only its first MAX_HEAD bytes are kept).
MAX_LINE = 1 << 24
MAX_HEAD = 1 << 20
FRAME_KEY = b', "frame": '
#: Bytes before a file's import offset whose hash tells a rewritten file from a grown one.
TAIL = 4096
#: Blocks waiting to be hashed at most (memory stays at a few MB if hashing falls behind).
_PENDING = 32


class BackgroundHash:
    """Feeds ``digest`` in a thread, in order, until :meth:`end` (the thread then hashes what it holds and ends) and
    :meth:`finish` (which waits for that; also the context manager's exit)."""

    def __init__(self, digest: Any) -> None:
        self.digest = digest
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_PENDING)
        self._thread: threading.Thread | None = threading.Thread(target=self._run, name="ledger-hash", daemon=True)
        self._ended = False
        self._thread.start()

    def _run(self) -> None:
        while (block := self._queue.get()) is not None:
            self.digest.update(block)

    def update(self, block: bytes) -> None:
        self._queue.put(block)

    def __enter__(self) -> BackgroundHash:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self._queue.put(None)

    def finish(self) -> Any:
        self.end()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self.digest


def hash_prefix(f: Any, end: int, digest: Any) -> None:
    f.seek(0)
    left = end
    while left > 0:
        chunk = f.read(min(left, BLOCK))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)


def tail_hash(f: Any, end: int) -> str:
    start = max(0, end - TAIL)
    f.seek(start)
    return hashlib.sha256(f.read(end - start)).hexdigest()


class LongLine:
    """A line too long to hold: its head, whether its frame part holds a quote, its last bytes, its length."""

    __slots__ = ("head", "k", "length", "quote", "tail")

    def __init__(self, first: bytes) -> None:
        self.head = first[:MAX_HEAD]
        self.k = self.head.find(FRAME_KEY, 0, MAX_HEAD - 16)
        self.quote = self.k < 0 or first.find(b'"', self.k + len(FRAME_KEY)) >= 0
        self.tail = first[-3:]
        self.length = len(first)

    def feed(self, buf: bytes, s: int, e: int) -> None:
        if not self.quote and buf.find(b'"', s, e) >= 0:
            self.quote = True
        self.tail = (self.tail + buf[max(s, e - 3) : e])[-3:]
        self.length += e - s


class RewrittenError(Exception):
    """A recording no longer continues the bytes already imported from it."""


def check_continues(f: Any, since: RecordingImported, digest: Any) -> None:
    """Raise :class:`RewrittenError` unless the file still holds what ``since`` imported; ``digest`` then holds it."""
    start = since.offset
    size = os.fstat(f.fileno()).st_size
    if size < start:
        raise RewrittenError(f"is {size} bytes, shorter than the {start} bytes already imported")
    if since.prefix_sha256 is not None:
        # Every imported byte is compared, not only the last ones: one action changed on line 9 is found.
        hash_prefix(f, start, digest)
        if digest.hexdigest() != since.prefix_sha256:
            raise RewrittenError(f"changed in the {start} bytes already imported")
    elif tail_hash(f, start) != since.tail_sha256:
        raise RewrittenError(f"changed in the {min(start, TAIL)} bytes before byte {start} already imported")
    else:
        # Imported before whole-prefix hashes were kept: from now on the whole prefix is hashed.
        hash_prefix(f, start, digest)


def feed_lines(
    f: Any, reader: _FileReader, hasher: BackgroundHash, progress: Callable[[int], None] | None
) -> tuple[int, bytes, LongLine | None]:
    """Hand every whole line from ``f``'s position to ``reader``; returns the bytes read and an unended last line."""
    line = reader.line
    carry = b""
    long: LongLine | None = None
    read = 0
    while True:
        chunk = f.read(BLOCK)
        if not chunk:
            break
        read += len(chunk)
        hasher.update(chunk)
        if progress is not None:
            progress(len(chunk))
        pos = 0
        if long is not None or carry:
            nl = chunk.find(b"\n")
            if nl < 0:
                if long is not None:
                    long.feed(chunk, 0, len(chunk))
                elif len(carry) + len(chunk) > MAX_LINE:
                    long, carry = LongLine(carry + chunk), b""
                else:
                    carry += chunk
                continue
            if long is not None:
                long.feed(chunk, 0, nl)
                reader.long_line(long)
                long = None
            else:
                whole = carry + chunk[:nl]
                line(whole, 0, len(whole))
                carry = b""
            pos = nl + 1
        find = chunk.find
        while True:
            nl = find(b"\n", pos)
            if nl < 0:
                break
            line(chunk, pos, nl)
            pos = nl + 1
        carry = chunk[pos:]
    return read, carry, long


#: Bad lines listed per file (the rest are counted).
MAX_LISTED = 10

#: msgspec.Raw cannot be optional: an absent value reads as JSON null.
_NULL = msgspec.Raw(b"null")


class _Action(msgspec.Struct):
    id: str | int
    data: msgspec.Raw = _NULL


class _HeadData(msgspec.Struct):
    # Every scoring field is required: a line whose fields come after its frame falls back to the whole decode.
    game_id: str
    state: State
    levels_completed: int
    action_input: _Action | None
    guid: str | None
    full_reset: bool
    win_levels: int | None = None


class _Head(msgspec.Struct):
    timestamp: datetime
    data: _HeadData


class _Data(msgspec.Struct):
    game_id: str
    state: State
    levels_completed: int
    action_input: _Action | None = None
    guid: str | None = None
    full_reset: bool = False
    frame: msgspec.Raw = _NULL
    win_levels: int | None = None


class _Line(msgspec.Struct):
    timestamp: datetime
    data: _Data


_head_decoder = msgspec.json.Decoder(_Head)
_line_decoder = msgspec.json.Decoder(_Line)
_any_decoder = msgspec.json.Decoder()


def _frame_is_empty(raw: msgspec.Raw) -> bool | None:
    if len(raw) > 16:
        return False
    value = _any_decoder.decode(raw)
    if value is None:
        return None
    return isinstance(value, list) and len(value) == 0


@dataclass(slots=True)
class FileRead:
    path: Path
    start: int
    end: int
    lines: int
    new_lines: int
    skipped: int
    observations: list[Observation]
    problems: list[Problem]
    skip_reasons: Counter[str]
    game_state: str | None
    last_ts: datetime | None
    tail_sha256: str
    bytes_read: int
    #: The sha256 of the file's bytes up to ``end``, possibly still being hashed (:attr:`prefix_sha256`).
    hashing: BackgroundHash
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    first_bad: bool = False
    #: Every play guid the lines carry (the toolkit writes one per file).
    guids: set[str] = field(default_factory=set)

    @property
    def prefix_sha256(self) -> str:
        """Waited for only when asked (when the card's lines have been translated): the next file's parse does not
        wait for the hash of this one's last blocks."""
        return str(self.hashing.finish().hexdigest())


class _FileReader:
    def __init__(self, path: Path, first_line: int, game_state: str | None) -> None:
        self.path = path
        self.lineno = first_line
        self.game_state = game_state
        self.obs: list[Observation] = []
        self.problems: list[Problem] = []
        self.reasons: Counter[str] = Counter()
        self.bad = 0
        self.listed = 0
        self.skipped_lines: list[SkippedLine] = []
        #: Lines no toolkit writes, listed MAX_LISTED times at most: "impossible", "order" (repeats count here too).
        self.cannot: Counter[str] = Counter()
        self.last_ts: datetime | None = None
        self.stem = path.name.removesuffix(".jsonl")
        self._add = self.obs.append
        # The (game_id, guid) last found to make the file name: most lines need no check.
        self._ok_game: str | None = None
        self._ok_guid: str | None = None
        self._mismatch: dict[str, list[int]] = {}
        self.guids: set[str] = set()
        self._same_ts: set[tuple[object, ...]] = set()
        self._prev: tuple[Observation, bool | None, int] | None = None
        self.good = 0
        self.first_bad = False

    # The hot path: one call per line of the file.
    def line(self, buf: bytes, s: int, e: int) -> None:
        self.lineno += 1
        if e > s and buf[e - 1] == 13:
            e -= 1
        k = buf.find(FRAME_KEY, s, e)
        if k >= 0 and buf.endswith(b"}}", s, e) and buf.find(b'"', k + 11, e) < 0:
            try:
                head = _head_decoder.decode(buf[s:k] + b"}}")
            except (msgspec.DecodeError, RecursionError):
                pass
            else:
                self._observe(head.timestamp, head.data, buf.startswith(b"[]", k + 11), e - k)
                return
        if e - s < 2 and not buf[s:e].strip():
            self.reasons["blank"] += 1
            return
        self._full(buf[s:e])

    def long_line(self, ll: LongLine) -> None:
        self.lineno += 1
        tail = ll.tail[:-1] if ll.tail.endswith(b"\r") else ll.tail
        if ll.k >= 0 and not ll.quote and tail.endswith(b"}}"):
            try:
                head = _head_decoder.decode(ll.head[: ll.k] + b"}}")
            except (msgspec.DecodeError, RecursionError):
                pass
            else:
                self._observe(head.timestamp, head.data, ll.head.startswith(b"[]", ll.k + 11), ll.length - ll.k)
                return
        self._bad(
            "too_long",
            f"line of {ll.length / 1e6:.1f} MB that does not end with its frame (limit {MAX_LINE >> 20} MiB): skipped",
            ll.head,
            ll.length,
        )

    def fragment(self, data: bytes) -> bool:
        """The last line of the file, with no newline: True if it is a whole record (consumed)."""
        if not data.strip():
            return False
        try:
            rec = _line_decoder.decode(data)
        except (msgspec.DecodeError, RecursionError):
            if data.lstrip().startswith(b"{"):
                self.truncated(len(data))
            else:
                msg = "not JSON (last line, no newline)"
                self.problems.append(Problem(str(self.path), self.lineno + 1, "not_json", msg))
                self.reasons["not_json"] += 1
            return False
        self.lineno += 1
        self._record(rec)
        return True

    def truncated(self, size: int) -> None:
        msg = f"truncated last line ({size} bytes, no newline): skipped"
        self.problems.append(Problem(str(self.path), self.lineno + 1, "truncated", msg))
        self.reasons["truncated"] += 1

    def _full(self, data: bytes) -> None:
        try:
            rec = _line_decoder.decode(data)
        except msgspec.ValidationError as ex:
            self._bad("wrong_type", f"wrong type: {ex}", data)
            return
        except msgspec.DecodeError as ex:
            self._bad("not_json", f"not JSON: {ex}", data)
            return
        except RecursionError:
            self._bad("not_json", "not JSON: nested too deeply", data)
            return
        self._record(rec)

    def _record(self, rec: _Line) -> None:
        self._observe(rec.timestamp, rec.data, _frame_is_empty(rec.data.frame), len(rec.data.frame))

    def _bad(self, kind: ProblemKind, message: str, data: bytes = b"", size: int | None = None) -> None:
        if self.bad == 0 and self.good == 0:
            self.first_bad = True
        self.bad += 1
        self.reasons[kind] += 1
        size = len(data) if size is None else size
        # Recorded with the card (LinesSkipped): the hash says which bytes were left out.
        self.skipped_lines.append(SkippedLine(self.lineno, SKIP_REASONS[kind], hashlib.sha256(data).hexdigest(), size))
        if self.listed < MAX_LISTED:
            self.listed += 1
            self.problems.append(Problem(str(self.path), self.lineno, kind, message))

    def _observe(self, ts: datetime, d: _HeadData | _Data, frame_empty: bool | None, size: int = 0) -> None:
        """One record; ``size`` tells frames apart cheaply (its byte length) when a repeat is looked for."""
        ai = d.action_input
        action: int | None
        if ai is None:
            action = -1
        else:
            action = ACTION_NAMES.get(ai.id)  # type: ignore[arg-type]
            if action is None:
                aid = ai.id
                if type(aid) is not int or not 0 <= aid <= 7:
                    self._bad(
                        "wrong_type",
                        f"wrong type: unknown action id {aid!r} - at `$.data.action_input.id`",
                        msgspec.json.encode(aid),
                    )
                    return
                action = aid
        self.good += 1
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=UTC)
        levels, win = d.levels_completed, d.win_levels
        if levels < 0 or (win is not None and levels > win):
            self._cannot("impossible", f"levels_completed {levels} outside 0..win_levels {win}")
        last = self.last_ts
        same = False
        if last is not None and ts < last:
            self._cannot("out_of_order", f"timestamp {ts.isoformat()} is before the previous line's {last.isoformat()}")
        elif ts != last:
            self.last_ts = ts
            if self._same_ts:
                self._same_ts.clear()
        else:
            same = True
        prev = self.game_state
        state = self.game_state = d.state
        said = frame_empty  # what the line says (the inferred value depends on the line before)
        if frame_empty is None:
            frame_empty = action != 0 and (prev == "GAME_OVER" or prev == "WIN")
        guid = d.guid
        if not guid:
            self.reasons["no_guid"] += 1
            return
        game_id = d.game_id
        if guid != self._ok_guid or game_id != self._ok_game:
            self.guids.add(guid)
            self._check_name(game_id, guid)
        if action == 6:
            x, y = click_xy(_any_decoder.decode(ai.data))  # type: ignore[union-attr]
            obs = Observation(ts, game_id, guid, 6, state, d.levels_completed, d.full_reset, frame_empty, x, y)
        else:
            obs = Observation(ts, game_id, guid, action, state, d.levels_completed, d.full_reset, frame_empty)
        # Timestamps never go back, so a repeat of an earlier line is among the lines of the same timestamp: keys are
        # made only for those (nearly every line has a timestamp of its own).
        if same:
            seen = self._same_ts
            if not seen and self._prev is not None:
                seen.add(_repeat_key(*self._prev))
            key = _repeat_key(obs, said, size)
            if key in seen:
                self._cannot("repeated", "repeats an earlier line (same guid, action, answer and timestamp)")
            seen.add(key)
        self._prev = (obs, said, size)
        self._add(obs)

    def _cannot(self, kind: ProblemKind, what: str) -> None:
        sort = "impossible" if kind == "impossible" else "order"
        self.cannot[sort] += 1
        if self.cannot[sort] <= MAX_LISTED:
            self.problems.append(Problem(str(self.path), self.lineno, kind, f"{what}: the toolkit cannot write it"))

    def _check_name(self, game_id: str, guid: str) -> None:
        if self.stem == f"{game_id}-{guid}":
            self._ok_game, self._ok_guid = game_id, guid
            return
        if self.stem.endswith("-" + guid):
            what = f"game_id {game_id!r} differs from the file name's {self.stem[: -len(guid) - 1]!r}"
        elif self.stem.startswith(game_id + "-"):
            what = f"guid {guid!r} differs from the file name's {self.stem[len(game_id) + 1 :]!r}"
        else:
            what = f"game_id {game_id!r} and guid {guid!r} do not make the file name ({self.stem!r})"
        self._mismatch.setdefault(what, []).append(self.lineno)

    def finish(self) -> None:
        for what, lines in self._mismatch.items():
            more = f" (lines {lines[0]}, +{len(lines) - 1} more)" if len(lines) > 1 else ""
            msg = f"{what}{more}: imported as the lines say"
            self.problems.append(Problem(str(self.path), lines[0], "name_mismatch", msg))
        if self.bad > self.listed:
            msg = f"{self.bad - self.listed} more bad lines not listed"
            self.problems.append(Problem(str(self.path), None, "unlisted", msg))


def _repeat_key(o: Observation, said: bool | None, size: int) -> tuple[object, ...]:
    """What makes two lines of one timestamp the same line: play, action, answer, and the frame as written."""
    return (o.guid, o.game_id, o.action, o.state, o.levels_completed, o.full_reset, said, size, o.x, o.y)


def read_recording(
    path: str | os.PathLike[str],
    *,
    since: RecordingImported | None = None,
    progress: Callable[[int], None] | None = None,
) -> FileRead:
    """Read one recording file from where ``since`` stopped; OSError if unreadable, RewrittenError if rewritten."""
    p = Path(path)
    start, first_line = (since.offset, since.lines) if since is not None else (0, 0)
    with open(p, "rb") as f:
        digest = hashlib.sha256()
        if since is not None:
            check_continues(f, since, digest)
        reader = _FileReader(p, first_line, since.game_state if since is not None else None)
        f.seek(start)
        hasher = BackgroundHash(digest)
        try:
            read, carry, long = feed_lines(f, reader, hasher, progress)
        finally:
            hasher.end()
        consumed = start + read - len(carry) - (long.length if long is not None else 0)
        if long is not None:
            reader.truncated(long.length)
        elif carry and reader.fragment(carry):
            consumed += len(carry)
        reader.finish()
        tail = tail_hash(f, consumed) if consumed != start or since is None else since.tail_sha256
        if consumed != start + read:
            # The last line is left for later: hash exactly what was consumed.
            hasher.finish()
            hasher.digest = hashlib.sha256()
            hash_prefix(f, consumed, hasher.digest)
    return FileRead(
        path=p,
        start=start,
        end=consumed,
        lines=reader.lineno,
        new_lines=reader.lineno - first_line,
        skipped=(since.skipped if since is not None else 0) + reader.bad,
        observations=reader.obs,
        problems=reader.problems,
        skip_reasons=reader.reasons,
        game_state=reader.game_state,
        last_ts=reader.obs[-1].ts if reader.obs else None,
        tail_sha256=tail,
        bytes_read=read,
        hashing=hasher,
        skipped_lines=reader.skipped_lines,
        first_bad=reader.first_bad,
        guids=reader.guids,
    )
