"""A JSONL line cut by another write: one complete JSON object written into the middle of another line.

The ARC-AGI-3-Agents harness (and arc-agi-3-benchmarking, which vendors it) writes each record with ``json.dump``
through a buffered file: a long frame line reaches the file in several writes. On Ctrl-C its signal handler, in
another thread, opens the same file and appends the final scorecard line whole (``{"timestamp": ..., "data": {}}``
and its newline). When that lands between two writes of a frame line, the file holds::

    {"timestamp": "T1", "data": {"game_id": ..., "frame": [[[0, 5, {"timestamp": "T2", "data": {}}
    5, 0]]], "state": ...}}

the first part of the frame line with the whole scorecard line after it, then the rest of the frame line on the
next line. A writer that adds no newline leaves both on one line, the inserted object inside the other.

:func:`find_cut` recovers both records only when the bytes decide it: the inserted part is one complete JSON object
and the line without it (joined with the next line when the inserted part ends the line) is a whole record, and
exactly one such split exists. Anything else (the rest of the line never written, two ways to split it) is left a
line that is not JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

_scan = json.JSONDecoder()
#: Objects tried per line: a record has a handful of ``{`` before its frame (which holds none); a line of junk
#: made of braces must not cost time quadratic in its length.
MAX_TRIES = 256


@dataclass(frozen=True, slots=True)
class Cut:
    """A line cut by another write, taken apart: the record that was cut, the object written into it."""

    outer: bytes
    inner: bytes
    #: Byte offset of the inserted object in the line.
    at: int
    #: Whether the cut record's rest is the next line (the inserted object ended this one with its newline).
    joins_next: bool

    def describe(self, lineno: int) -> str:
        """What was recovered, for the import's report."""
        where = f"at byte {self.at}"
        rest = f"; its rest is line {lineno + 1}" if self.joins_next else " and the rest of the line after it"
        return (
            f"a record cut by another write: {len(self.inner)} bytes of another record written into it {where}"
            f"{rest}; both recovered ({len(self.outer)} + {len(self.inner)} bytes)"
        )


def find_cut(body: bytes, nxt: bytes | None, is_record: Callable[[bytes], bool]) -> Cut | None:
    """``body`` (a line that is not JSON) taken apart, or None when the bytes do not decide one way.

    ``nxt`` is the next line (without its newline) when there is one that is not JSON by itself; ``is_record``
    says whether bytes are one whole record of the file.
    """
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
            if outer and is_record(outer):
                inner = text[k:end].encode("utf-8")
                found.append(Cut(outer, inner, len(text[:k].encode("utf-8")), joins))
        k = text.find("{", k + 1)
    distinct = {(c.outer, c.inner, c.joins_next) for c in found}
    return found[0] if len(distinct) == 1 else None
