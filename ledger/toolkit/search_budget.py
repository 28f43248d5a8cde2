"""How much a search over what a record leaves open may spend (see docs/audit.md, 'What a search is allowed'). Counted
in game steps, so a record gets the same answer on any machine, and in CPU seconds for slow games."""

from __future__ import annotations

import time
from typing import Any

#: Game steps any search may take, and game steps more per input (line) of the record.
BASE_STEPS = 20_000
STEPS_PER_INPUT = 500
#: CPU seconds the searches of one import or audit may take, and seconds more per input of the record.
BASE_SECONDS = 60.0
SECONDS_PER_INPUT = 0.05


#: Bytes of game states a search keeps for one line (beyond them the first ones are kept, as beyond their number).
STATE_BYTES = 64 << 20


class Room:
    """Room for one line's states in priority order: at most ``count``, :data:`STATE_BYTES` (the first always fits)."""

    __slots__ = ("bytes", "count", "full")

    def __init__(self, count: int) -> None:
        self.count = count
        self.bytes = 0
        self.full = False

    def admit(self, snap: Any) -> bool:
        size = snap.size() if hasattr(snap, "size") else 0
        if self.full or self.count == 0 or (self.bytes and self.bytes + size > STATE_BYTES):
            self.full = True
            return False
        self.count -= 1
        self.bytes += size
        return True


class SearchSpent(Exception):
    """The search's allowance is spent."""


def step_limit(inputs: int) -> int:
    return BASE_STEPS + STEPS_PER_INPUT * inputs


def deadline(inputs: int) -> float:
    """The CPU time (``time.process_time``) by which searches over ``inputs`` inputs, started now, give up."""
    return time.process_time() + BASE_SECONDS + SECONDS_PER_INPUT * inputs


def allowance() -> str:
    return (
        f"{BASE_STEPS:,} game steps and {STEPS_PER_INPUT:,} an input, {BASE_SECONDS:.0f} CPU seconds and "
        f"{SECONDS_PER_INPUT:g} an input"
    )
