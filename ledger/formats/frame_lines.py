"""A harness recording's frame lines and what an import finds for each, kept until the card is written, in chunks
(:class:`Spill`) of which only the newest and last read stay in memory, the rest in a temporary file."""

from __future__ import annotations

import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO, Any, overload

import msgspec

from ledger.errors import SpillError

#: Lines a chunk holds: a few hundred kB of columns and the distinct frames of that many lines.
CHUNK = 4096


class Spill:
    """Full chunks, each pickled once to a temporary file and read back when asked; the last two read are kept."""

    __slots__ = ("_at", "_cache", "_file")

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        #: Where each chunk starts in the file, and where the last one ends.
        self._at = array("q", [0])
        self._cache: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._at) - 1

    def put(self, chunk: Any) -> None:
        import pickle  # here and below: only a long recording spills, and most imports read none
        import tempfile

        blob = pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            if self._file is None:
                # Unlinked at once (nothing is left on a crash); closed with this spill.
                self._file = tempfile.TemporaryFile(prefix="ledger-spill-")  # noqa: SIM115
            self._file.seek(self._at[-1])
            self._file.write(blob)
            self._file.flush()
        except OSError as e:
            raise _failed("write", e) from e
        self._at.append(self._at[-1] + len(blob))

    def get(self, k: int) -> Any:
        hit = self._cache.get(k)
        if hit is not None:
            return hit
        assert self._file is not None
        try:
            self._file.seek(self._at[k])
            blob = self._file.read(self._at[k + 1] - self._at[k])
        except OSError as e:
            raise _failed("read", e) from e
        import pickle

        chunk = pickle.loads(blob)
        if len(self._cache) >= 2:
            del self._cache[next(iter(self._cache))]
        self._cache[k] = chunk
        return chunk

    def take_back(self, k: int) -> Any:
        """Chunk ``k``, forgotten with every chunk after it (they are filled again)."""
        chunk = self.get(k)
        del self._at[k + 1 :]
        self._cache.clear()
        if self._file is not None:
            self._file.truncate(self._at[-1])
        return chunk


def _failed(what: str, e: OSError) -> SpillError:
    import tempfile

    return SpillError(
        f"cannot {what} the lines of a long recording kept in the temporary directory {tempfile.gettempdir()}: "
        f"{e.strerror or e} (TMPDIR names another)"
    )


def pack(frame: bytes) -> bytes:
    """A frame's JSON as a :class:`FrameLine` holds it (level 1: the fastest, and a grid's runs compress well)."""
    return zlib.compress(frame, 1)


_EMPTY = pack(b"[]")


@dataclass(frozen=True, slots=True)
class FrameLine:
    lineno: int
    ts: datetime
    game_id: str
    guid: str | None
    state: str
    levels_completed: int
    win_levels: int | None
    full_reset: bool
    #: The frame's JSON, zlib-compressed (about 12 kB of JSON to a few hundred bytes); lines share equal frames.
    packed: bytes
    available_actions: tuple[int, ...]

    @property
    def frame(self) -> bytes:
        return zlib.decompress(self.packed)

    @property
    def empty(self) -> bool:
        """The toolkit's ``len(frame) == 0``: an action answered after GAME_OVER or WIN."""
        return self.packed == _EMPTY

    def grids(self) -> Any:
        import numpy as np

        return np.asarray(msgspec.json.decode(self.frame), dtype=np.int16)

    def last_grid_key(self) -> bytes:
        """A key for the frame's last grid (the one a level starts from), formatting aside."""
        grids = msgspec.json.decode(self.frame)
        return msgspec.json.encode(grids[-1]) if grids else b""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NONE = -(1 << 31)  # win_levels not recorded


class FrameLines(Sequence[FrameLine]):
    """A recording's frame lines in file order, held as columns (objects would cost several times their numbers)."""

    def __init__(self) -> None:
        self._spill = Spill()
        self._fresh()

    def _fresh(self) -> None:
        # As _line takes them: line number, microseconds since the epoch, levels, win levels, full reset, then the
        # values' places in _values: time zone, game id, guid, state, packed frame, available actions.
        self._columns: tuple[Any, ...] = (*(array("q") for _ in range(4)), bytearray(), *(array("l") for _ in range(6)))
        self._ids: dict[Any, int] = {}
        self._values: list[Any] = []

    def _ref(self, value: Any) -> int:
        i = self._ids.get((type(value), value))
        if i is None:
            i = self._ids[(type(value), value)] = len(self._values)
            self._values.append(value)
        return i

    def append(self, line: FrameLine) -> None:
        if len(self._columns[0]) == CHUNK:
            self._spill.put((self._columns, self._values))
            self._fresh()
        lineno, us, levels, win, full, *refs = self._columns
        delta = line.ts - _EPOCH
        lineno.append(line.lineno)
        us.append((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
        levels.append(line.levels_completed)
        win.append(_NONE if line.win_levels is None else line.win_levels)
        full.append(line.full_reset)
        values = (line.ts.tzinfo, line.game_id, line.guid, line.state, line.packed, line.available_actions)
        for column, value in zip(refs, values, strict=True):
            column.append(self._ref(value))

    def __len__(self) -> int:
        return len(self._spill) * CHUNK + len(self._columns[0])

    @overload
    def __getitem__(self, i: int) -> FrameLine: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[FrameLine]: ...
    def __getitem__(self, i: int | slice) -> FrameLine | Sequence[FrameLine]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("frame line out of range")
        k, j = divmod(i, CHUNK)
        columns, values = self._chunk(k)
        return _line(values, [column[j] for column in columns])

    def __iter__(self) -> Iterator[FrameLine]:
        # The columns side by side, a chunk at a time: a search walks every line, several times.
        for k in range(len(self._spill) + 1):
            columns, values = self._chunk(k)
            for row in zip(*columns, strict=True):
                yield _line(values, row)

    def _chunk(self, k: int) -> tuple[tuple[Any, ...], list[Any]]:
        return (self._columns, self._values) if k == len(self._spill) else self._spill.get(k)


def _line(v: list[Any], row: Sequence[int]) -> FrameLine:
    """The line of a row of the columns (see :meth:`FrameLines._fresh`), its values' places in ``v``."""
    lineno, us, levels, win, full, tz, game_id, guid, state, packed, actions = row
    ts = _EPOCH + timedelta(microseconds=us)
    zone = v[tz]
    return FrameLine(
        lineno,
        ts if zone is UTC else ts.astimezone(zone),
        v[game_id],
        v[guid],
        v[state],
        levels,
        None if win == _NONE else win,
        bool(full),
        v[packed],
        v[actions],
    )


class LineMap[V](Mapping[int, V]):
    """line number -> value, set in line order, held as columns, each distinct value once a chunk (``key``: its id)."""

    def __init__(self, key: Callable[[V], Any] | None = None) -> None:
        self._key = key
        self._spill = Spill()
        self._firsts = array("q")
        self._fresh()

    def _fresh(self, lines: array[int] | None = None, refs: array[int] | None = None, values: Sequence[V] = ()) -> None:
        self._lines = array("q") if lines is None else lines
        self._refs = array("l") if refs is None else refs
        self._values: list[V] = list(values)
        key = self._key
        self._ids: dict[Any, int] = {(v if key is None else key(v)): i for i, v in enumerate(values)}

    def __setitem__(self, line: int, value: V) -> None:
        lines = self._lines
        if lines and line <= lines[-1]:
            if line < lines[-1]:
                raise ValueError(f"line {line} set after line {lines[-1]}")
            self._refs[-1] = self._ref(value)
            return
        if len(lines) == CHUNK:
            self._spill.put((lines, self._refs, self._values))
            self._firsts.append(lines[0])
            self._fresh()
        self._lines.append(line)
        self._refs.append(self._ref(value))

    def _ref(self, value: V) -> int:
        k = value if self._key is None else self._key(value)
        ref = self._ids.get(k)
        if ref is None:
            ref = self._ids[k] = len(self._values)
            self._values.append(value)
        return ref

    def drop_from(self, line: int) -> None:
        """Forget the lines from ``line`` on (a path searched again from there)."""
        if self._firsts and (not self._lines or line <= self._lines[0]):
            k = max(bisect_left(self._firsts, line) - 1, 0)
            self._fresh(*self._spill.take_back(k))
            del self._firsts[k:]
        del self._lines[bisect_left(self._lines, line) :]
        del self._refs[len(self._lines) :]

    def _chunk_of(self, line: int) -> tuple[array[int], array[int], list[V]]:
        if not self._firsts or (self._lines and line >= self._lines[0]):
            return self._lines, self._refs, self._values
        k = bisect_right(self._firsts, line) - 1
        return self._spill.get(k) if k >= 0 else (self._lines[:0], self._refs[:0], [])

    def __getitem__(self, line: int) -> V:
        lines, refs, values = self._chunk_of(line)
        i = bisect_left(lines, line)
        if i < len(lines) and lines[i] == line:
            return values[refs[i]]
        raise KeyError(line)

    def get(self, line: int, default: Any = None) -> Any:  # every line asks: no KeyError raised for those not set
        lines, refs, values = self._chunk_of(line)
        i = bisect_left(lines, line)
        return values[refs[i]] if i < len(lines) and lines[i] == line else default

    def __iter__(self) -> Iterator[int]:
        for k in range(len(self._spill)):
            yield from self._spill.get(k)[0]
        yield from self._lines

    def __len__(self) -> int:
        return len(self._spill) * CHUNK + len(self._lines)


class LineSet(Set[int]):
    """Line numbers, added in increasing order, kept as a :class:`LineMap` keeps its lines."""

    def __init__(self, lines: Iterable[int] = ()) -> None:
        self._lines: LineMap[bool] = LineMap()
        for line in lines:
            self.add(line)

    def add(self, line: int) -> None:
        self._lines[line] = True

    def __contains__(self, line: object) -> bool:
        return isinstance(line, int) and self._lines.get(line) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)
