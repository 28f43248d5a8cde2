"""A harness recording's frame lines as the import holds them (:mod:`ledger.toolkit.harness` reads them)."""

from __future__ import annotations

import zlib
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, overload

import msgspec


def pack(frame: bytes) -> bytes:
    """A frame's JSON as a :class:`FrameLine` holds it (level 1: the fastest, and a grid's runs compress well)."""
    return zlib.compress(frame, 1)


_EMPTY = pack(b"[]")


@dataclass(frozen=True, slots=True)
class FrameLine:
    """One frame line of a harness recording (``lineno`` is 1-based)."""

    lineno: int
    ts: datetime
    game_id: str
    guid: str | None
    state: str
    levels_completed: int
    win_levels: int | None
    full_reset: bool
    #: The frame's JSON, zlib-compressed: the frames are nearly all of a recording and every line of it is held
    #: (a 64x64 grid is about 12 kB of JSON, a few hundred bytes compressed). Equal frames compress equally, and the
    #: lines of one read share one copy of each (an agent's moves into a wall, its GAME_OVERs, repeat frames).
    packed: bytes
    available_actions: tuple[int, ...]

    @property
    def frame(self) -> bytes:
        """The frame's JSON as recorded (animation grids of rows of colours)."""
        return zlib.decompress(self.packed)

    @property
    def empty(self) -> bool:
        """The toolkit's ``len(frame) == 0``: an action answered after GAME_OVER or WIN."""
        return self.packed == _EMPTY

    def grids(self) -> Any:
        """The frame as a numpy array (animation frames x rows x columns)."""
        import numpy as np

        return np.asarray(msgspec.json.decode(self.frame), dtype=np.int16)

    def last_grid_key(self) -> bytes:
        """A key for the frame's last grid (the one a level starts from), formatting aside."""
        grids = msgspec.json.decode(self.frame)
        return msgspec.json.encode(grids[-1]) if grids else b""


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NONE = -(1 << 31)  # win_levels not recorded


class FrameLines(Sequence[FrameLine]):
    """A recording's frame lines, in file order, held as columns: a long recording's lines are all held (it is
    re-simulated from its start), and a :class:`FrameLine` object for each would cost several times its numbers.
    Each line is made again when it is read; the values lines repeat (game id, guid, state, available actions,
    packed frame, time zone) are held once."""

    def __init__(self) -> None:
        self._ints = {k: array("q") for k in ("lineno", "us", "levels", "win")}
        self._refs = {k: array("l") for k in ("game_id", "guid", "state", "packed", "actions", "tz")}
        self._full = bytearray()
        self._ids: dict[Any, int] = {}
        self._values: list[Any] = []

    def _ref(self, value: Any) -> int:
        i = self._ids.get((type(value), value))
        if i is None:
            i = self._ids[(type(value), value)] = len(self._values)
            self._values.append(value)
        return i

    def append(self, line: FrameLine) -> None:
        ints, refs, ref = self._ints, self._refs, self._ref
        delta = line.ts - _EPOCH
        ints["lineno"].append(line.lineno)
        ints["us"].append((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
        ints["levels"].append(line.levels_completed)
        ints["win"].append(_NONE if line.win_levels is None else line.win_levels)
        for k in ("game_id", "guid", "state", "packed"):
            refs[k].append(ref(getattr(line, k)))
        refs["actions"].append(ref(line.available_actions))
        refs["tz"].append(ref(line.ts.tzinfo))
        self._full.append(line.full_reset)

    def __len__(self) -> int:
        return len(self._full)

    @overload
    def __getitem__(self, i: int) -> FrameLine: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[FrameLine]: ...
    def __getitem__(self, i: int | slice) -> FrameLine | Sequence[FrameLine]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._line(*(column[i] for column in self._columns()))

    def __iter__(self) -> Iterator[FrameLine]:
        # The columns side by side: a search walks every line, several times.
        line = self._line
        for values in zip(*self._columns(), strict=True):
            yield line(*values)

    def _columns(self) -> tuple[Any, ...]:
        ints, refs = self._ints, self._refs
        return (
            ints["lineno"],
            ints["us"],
            refs["tz"],
            refs["game_id"],
            refs["guid"],
            refs["state"],
            ints["levels"],
            ints["win"],
            self._full,
            refs["packed"],
            refs["actions"],
        )

    def _line(
        self,
        lineno: int,
        us: int,
        tz: int,
        game_id: int,
        guid: int,
        state: int,
        levels: int,
        win: int,
        full: int,
        packed: int,
        actions: int,
    ) -> FrameLine:
        """The line of these column values."""
        v = self._values
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
    """line number -> value, set in increasing line order (setting the last line again replaces its value), held as
    columns with each distinct value once: what an import finds for each line of a long recording (its action, its
    candidates) is held until the card is written. ``key`` makes an unhashable value's identity (a list: ``tuple``).
    """

    def __init__(self, key: Callable[[V], Any] | None = None) -> None:
        self._lines = array("q")
        self._refs = array("l")
        self._values: list[V] = []
        self._ids: dict[Any, int] = {}
        self._key = key

    def __setitem__(self, line: int, value: V) -> None:
        k = value if self._key is None else self._key(value)
        ref = self._ids.get(k)
        if ref is None:
            ref = self._ids[k] = len(self._values)
            self._values.append(value)
        if self._lines and line <= self._lines[-1]:
            if line < self._lines[-1]:
                raise ValueError(f"line {line} set after line {self._lines[-1]}")
            self._refs[-1] = ref
            return
        self._lines.append(line)
        self._refs.append(ref)

    def drop_from(self, line: int) -> None:
        """Forget the lines from ``line`` on (a path searched again from there)."""
        del self._lines[bisect_left(self._lines, line) :]
        del self._refs[len(self._lines) :]

    def __getitem__(self, line: int) -> V:
        i = bisect_left(self._lines, line)
        if i < len(self._lines) and self._lines[i] == line:
            return self._values[self._refs[i]]
        raise KeyError(line)

    def get(self, line: int, default: Any = None) -> Any:  # every line asks: no KeyError raised for those not set
        i = bisect_left(self._lines, line)
        return self._values[self._refs[i]] if i < len(self._lines) and self._lines[i] == line else default

    def __iter__(self) -> Iterator[int]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)
