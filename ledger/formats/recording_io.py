"""The bytes of a recording: reading whole lines block by block (a line too long to hold is streamed, keeping its
head), and checking that a file still holds what an earlier import read from it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from ledger.domain.events import RecordingImported
from ledger.formats.hashing import BackgroundHash, hash_range, tail_hash

#: Bytes read at a time: small enough that a block is still in the CPU cache when its lines are scanned.
BLOCK = 1 << 18
#: A line longer than this is streamed (only its first MAX_HEAD bytes are kept).
MAX_LINE = 1 << 24
MAX_HEAD = 1 << 20
FRAME_KEY = b', "frame": '
#: Bytes before a file's import offset whose hash tells a rewritten file from a grown one.
TAIL = 4096


class _Reader(Protocol):
    def line(self, buf: bytes, s: int, e: int) -> None: ...

    def long_line(self, ll: LongLine) -> None: ...


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
        hash_range(f, 0, start, digest, BLOCK)
        if digest.hexdigest() != since.prefix_sha256:
            raise RewrittenError(f"changed in the {start} bytes already imported")
    elif tail_hash(f, start, TAIL) != since.tail_sha256:
        raise RewrittenError(f"changed in the {min(start, TAIL)} bytes before byte {start} already imported")
    else:
        # Imported before whole-prefix hashes were kept: from now on the whole prefix is hashed.
        hash_range(f, 0, start, digest, BLOCK)


def feed_lines(
    f: Any, reader: _Reader, hasher: BackgroundHash, progress: Callable[[int], None] | None
) -> tuple[int, bytes, LongLine | None]:
    """Hand every whole line from ``f``'s position to ``reader``; the bytes read and the last line if unended."""
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
