"""How much a search over what a record leaves open may spend before it gives up.

Where many actions give the same frames and leave different states (a click game's clicks on nothing that still
count, its undo history), the paths to search multiply with every line. The allowance grows with the record, so the
cost stays linear in the lines. It is counted in game steps, so the same record gets the same answer on any machine,
and, for games whose every step is slow (tens of milliseconds), in CPU seconds too. An import that spends it reads
the actions from the frames alone; an audit says UNKNOWN, never FAIL (``--decide`` searches without it).
"""

from __future__ import annotations

import time

#: Game steps any search may take, and game steps more per input (line) of the record.
BASE_STEPS = 20_000
STEPS_PER_INPUT = 500
#: CPU seconds the searches of one import or audit may take, and seconds more per input of the record.
BASE_SECONDS = 60.0
SECONDS_PER_INPUT = 0.05


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
