"""The interface of every format ``ledger import`` reads, and the plugins of the ``ledger.readers`` entry point group
(docs/import.md). The ledger's recordings are :class:`Streamed`: read line by line, never held as a list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

GROUP = "ledger.readers"


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer of the game with the action it answered: 0 RESET (``full_reset``: a new play), 1..7 ACTION1..7;
    ``frame_empty``: the answer had no frame (an action after GAME_OVER or WIN)."""

    ts: datetime
    game_id: str
    guid: str
    action: int
    state: str
    levels_completed: int
    full_reset: bool = False
    frame_empty: bool = False
    x: int | None = None
    y: int | None = None


@dataclass(frozen=True, slots=True)
class Spent:
    """What a run used (None where the file does not say)."""

    total_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    model: str | None = None
    #: Files of one run that each give its running total name the same run: the card keeps the latest, no sum.
    run_id: str | None = None
    reasoning_tokens: int | None = None
    #: The file's other usage and cost figures (a cost breakdown, token details), kept as given.
    other: dict[str, Any] | None = None


@dataclass(slots=True)
class Decided:
    """What a file decides for one card: its answers in order (none when it holds only usage), usage, new tags."""

    card_id: str
    answers: list[Answer] = field(default_factory=list)
    usage: Spent | None = None
    tags: list[str] = field(default_factory=list)
    #: The games the file says the card played: its usage goes only to a card that played them.
    game_ids: list[str] = field(default_factory=list)
    #: What the file holds that the import does not use, a line each (the import says them).
    notes: list[str] = field(default_factory=list)


class Reader(Protocol):
    name: str

    def reads(self, path: Path) -> bool:
        """Whether ``path`` is a file of this format (asked of every file)."""
        ...

    def read(self, path: Path) -> list[Decided]:
        """What the file decides, card by card. Raising refuses the file (its message is shown, nothing written)."""
        ...


#: What a streamed format's file decides: ``answers`` (each line an answer with its action), ``frames`` (answers
#: whose action a line may leave undecided, searched with the game's code), ``usage`` (a run's usage and tags, given
#: to the recording of the same run, never answers).
Decides = Literal["answers", "frames", "usage"]


class Streamed(Protocol):
    """A format the import streams itself (bounded memory, resumable where a file grows)."""

    name: str
    decides: Decides

    def reads(self, path: Path) -> bool:
        """Whether ``path`` is a file of this format, by what it holds (its name only where its bytes cannot tell)."""
        ...

    def card(self, path: Path) -> str | None:
        """The card the file names (None: its folder, or for ``usage`` the recording beside it); ValueError: refused."""
        ...


class ReaderError(Exception):
    """An installed reader that cannot be loaded, or failed on a file."""


def installed() -> list[Reader]:
    """The ``ledger.readers`` plugins by entry point name; ReaderError for one that fails to load (never skipped)."""
    from importlib.metadata import entry_points

    out: list[Reader] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
            reader = obj() if isinstance(obj, type) else obj
        except Exception as e:  # a plugin's code: anything may go wrong in it
            raise ReaderError(f"the reader {ep.name} ({ep.value}) does not load: {type(e).__name__}: {e}") from e
        if not all(hasattr(reader, a) for a in ("name", "reads", "read")):
            raise ReaderError(f"the reader {ep.name} ({ep.value}) has no name, reads() and read()")
        out.append(reader)
    return out


def reader_for(path: Path, readers: Sequence[Reader | Streamed]) -> Reader | Streamed | None:
    for r in readers:
        try:
            if r.reads(path):
                return r
        except Exception as e:  # a plugin's code
            raise ReaderError(f"the reader {r.name} failed on {path}: {type(e).__name__}: {e}") from e
    return None
