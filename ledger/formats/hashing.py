"""Hashing a recording on another core while this one parses it, and hashing byte ranges of an open file.

``ledger import`` keeps the sha256 of every byte it imported, and at about 1 GB/s sha256 costs as much as a
Python line-by-line read of the file. ``hashlib`` releases the GIL while it hashes a large buffer, so a thread fed
the blocks as they are read computes the same digest in parallel with the parsing.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from typing import Any

#: Blocks waiting to be hashed at most (memory stays at a few MB if hashing falls behind).
_PENDING = 32


class BackgroundHash:
    """Feeds ``digest`` (a ``hashlib`` object) in a thread, in order; :meth:`finish` waits for the last block.

    Use it as a context manager (or call :meth:`finish` on every path): the thread ends only then.
    """

    def __init__(self, digest: Any) -> None:
        self.digest = digest
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=_PENDING)
        self._thread: threading.Thread | None = threading.Thread(target=self._run, name="ledger-hash", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (block := self._queue.get()) is not None:
            self.digest.update(block)

    def update(self, block: bytes) -> None:
        """Hash ``block`` after the ones given before it."""
        self._queue.put(block)

    def __enter__(self) -> BackgroundHash:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def finish(self) -> Any:
        """Wait until every block is hashed; returns the digest (idempotent)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        return self.digest


def hash_range(f: Any, start: int, end: int, digest: Any, block: int) -> None:
    """Feed ``digest`` the bytes ``start..end`` of the open binary file ``f``, ``block`` bytes at a time."""
    f.seek(start)
    left = end - start
    while left > 0:
        chunk = f.read(min(left, block))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)


def tail_hash(f: Any, end: int, tail: int) -> str:
    """The sha256 (hex) of the last ``tail`` bytes before ``end`` of the open binary file ``f``."""
    start = max(0, end - tail)
    f.seek(start)
    return hashlib.sha256(f.read(end - start)).hexdigest()
