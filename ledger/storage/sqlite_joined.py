"""Reading a long stream's bodies as joined chunks, the next chunk read by a second thread while the caller decodes.

SQLite releases the GIL while it steps a statement, so on a million-event card the read (SQLite's half of a cold
replay) and the decoding (msgspec's half) overlap. The reader has its own connection (a connection is never
shared between threads at the same time) and reads only versions up to the head read beforehand: the log is
append-only, so those never change, whichever transaction reads them.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ledger.errors import StoreError

_DONE = object()


class ChunkReader:
    """An iterator of ``(JSON lines, count)`` chunks, read one ahead; :meth:`close` it if not read to the end."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], joined: str, args: tuple[Any, ...]) -> None:
        # args: the separator, the stream, then the where's args after its version (lo and hi are per chunk).
        self._connect = connect
        self._joined = joined
        self._args = args
        self._q: queue.Queue[Any] = queue.Queue(maxsize=2)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ranges: list[tuple[int, int]] = []

    def start(self, ranges: list[tuple[int, int]]) -> ChunkReader:
        self._ranges = ranges
        self._thread = threading.Thread(target=self._run, name="ledger-read-ahead", daemon=True)
        self._thread.start()
        return self

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            con = self._connect()
        except BaseException as e:  # handed to the reading thread, which raises it
            self._put(e)
            return
        try:
            con.execute("BEGIN")
            sep, stream, *extra = self._args
            for lo, hi in self._ranges:
                if self._stop.is_set():
                    return
                body, count = con.execute(self._joined, (sep, stream, lo, *extra, hi)).fetchone()
                if count and not self._put((body, count)):
                    return
            con.execute("COMMIT")
            self._put(_DONE)
        except BaseException as e:
            self._put(e)
        finally:
            con.close()

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        try:
            while True:
                item = self._q.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    if isinstance(item, sqlite3.Error):
                        raise StoreError(f"cannot read the ledger: {item}") from item
                    raise item
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading ahead and wait for the reader (idempotent)."""
        self._stop.set()
        while True:  # a reader waiting to hand over a chunk sees the stop at once
            try:
                self._q.get_nowait()
            except queue.Empty:
                break
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __del__(self) -> None:
        self._stop.set()
