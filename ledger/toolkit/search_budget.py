"""How much a search over what a record leaves open may spend before it gives up.

Where many actions give the same frames and leave different states (a click game's clicks on nothing that still
count, its undo history), the paths to search multiply with every line. The allowance grows with the record, so the
cost stays linear in the lines. It is counted in game steps, so the same record gets the same answer on any machine,
and, for games whose every step is slow (tens of milliseconds), in CPU seconds too. An import that spends it reads
the actions from the frames alone; an audit says UNKNOWN, never FAIL (``--decide`` searches without it).
"""

from __future__ import annotations

import time
from typing import Any

#: Game steps any search may take, and game steps more per input (line) of the record.
BASE_STEPS = 20_000
STEPS_PER_INPUT = 500
#: CPU seconds the searches of one import or audit may take, and seconds more per input of the record.
BASE_SECONDS = 60.0
SECONDS_PER_INPUT = 0.05


#: Bytes of game states a search keeps at once (the states of one line, or of one input): beyond them the first
#: ones are kept, as beyond their number. A game whose state holds its history (an undo stack) has states of
#: hundreds of kB, and hundreds of them fit one line.
STATE_BYTES = 64 << 20


class Room:
    """Room for the states of one line (or input), taken in priority order: at most ``count`` of them and
    :data:`STATE_BYTES` (the first always fits); once one does not fit, no later one does (the first ones are kept).
    A state not kept as a snapshot (a game copied the slow way) is not counted in bytes."""

    __slots__ = ("bytes", "count", "full")

    def __init__(self, count: int) -> None:
        self.count = count
        self.bytes = 0
        self.full = False

    def admit(self, snap: Any) -> bool:
        """Whether ``snap`` is kept (else its line's states were cut)."""
        size = snap.size() if hasattr(snap, "size") else 0
        if self.full or self.count == 0 or (self.bytes and self.bytes + size > STATE_BYTES):
            self.full = True
            return False
        self.count -= 1
        self.bytes += size
        return True


class SearchSpent(Exception):
    """The search's allowance is spent (:attr:`ledger.toolkit.game_states.Engine.stop_at` or ``deadline``)."""


def step_limit(inputs: int) -> int:
    """The game steps a search over a record of ``inputs`` inputs may take."""
    return BASE_STEPS + STEPS_PER_INPUT * inputs


def deadline(inputs: int) -> float:
    """The CPU time (``time.process_time``) by which searches over a record of ``inputs`` inputs, started now,
    give up."""
    return time.process_time() + BASE_SECONDS + SECONDS_PER_INPUT * inputs


def allowance() -> str:
    """What is allowed, for a message."""
    return (
        f"{BASE_STEPS:,} game steps and {STEPS_PER_INPUT:,} an input, {BASE_SECONDS:.0f} CPU seconds and "
        f"{SECONDS_PER_INPUT:g} an input"
    )
