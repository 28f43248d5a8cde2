"""What ``ledger import`` reports about its input: :class:`Problem` (where, what) and the kinds of problem."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProblemKind = Literal[
    "truncated",  # last line without a newline: skipped, read again next time
    "not_json",
    "wrong_type",
    "too_long",
    "name_mismatch",
    "unlisted",  # more bad lines of a file than are listed
    "empty",
    "duplicate",
    "unreadable",
    "rewritten",
    "captured_live",
    "environments",
    "bad_name",  # a card folder or file name that is not UTF-8: that card is skipped
    "impossible",  # a value the toolkit cannot produce (levels outside 0..win_levels, time going backwards)
    "unknown_format",  # neither a toolkit recording nor a harness recording: no card
    "unreproduced",  # a harness line no action reproduces: skipped
    "cross_check",  # a harness recording's final scorecard line disagrees with the imported card
    "harness",  # notes on a harness import (resets unknown without the game's code, run folders used)
    "not_a_recording",  # a file whose first line, or one line in four, is not a recording line: no card
    "several_plays",  # a toolkit file holding the lines of several plays (recordings put together): no card
    "unknown_card",  # nothing proves which card the files are (no card folder, no play in the ledger): no card
    "out_of_order",  # a timestamp before the previous line's: no card unless --allow-repeats
    "repeated",  # a line repeating an earlier one (same guid, action, answer, timestamp): likewise
    "not_counted",  # lines after the card's close (captured live): the server did not count them
    "cut_line",  # a line cut by another write (Ctrl-C in the harness): both records recovered
    "run_not_used",  # a benchmarking run folder the user named that its recording's import does not use: no card
    "reader",  # what a reader's file gave (usage attached, held already) or holds that is not used
    "reader_unused",  # a file's usage not used: an earlier snapshot of a run than the one the card holds
]
#: Problems that refuse a card (exit 2) unless the user says they know (``--allow-repeats``).
REPEAT_KINDS = frozenset(("out_of_order", "repeated"))
#: Problems that refuse a card (nothing of it committed, exit 2) whatever the options.
REFUSED_KINDS = frozenset(("unknown_format", "not_a_recording", "several_plays", "unknown_card", "run_not_used"))
#: Problems that make a card fail under ``strict``.
STRICT_KINDS = frozenset(("not_json", "wrong_type", "too_long", "name_mismatch", "unlisted", "impossible"))
#: Problems that make a card fail in any case (nothing of it committed, exit 1).
FATAL_KINDS = frozenset(("unreadable", "rewritten", "captured_live"))

SKIP_REASONS = {
    "truncated": "truncated last line",
    "not_json": "not JSON",
    "wrong_type": "wrong types",
    "too_long": "too long",
    "no_guid": "no guid (not scored by the toolkit)",
    "blank": "blank",
}


@dataclass(frozen=True, slots=True)
class Problem:
    path: str
    line: int | None
    kind: ProblemKind
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.message}"
