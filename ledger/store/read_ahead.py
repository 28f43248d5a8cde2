"""Items made by a second thread while the caller uses the ones before: a bounded queue between two threads.

Both drivers (sqlite3, psycopg) let go of the GIL while they wait on a statement, so reading the next chunk of a
long stream, or the next batch of a copy, overlaps with decoding or writing the last one. The producer stops when
the consumer stops (``close``, or leaving the ``with`` block); an exception in the producer is raised in the
consumer, where the caller can see it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import cast

#: What ``produce`` is given: hand over one item; False once the consumer has stopped (return then).
type Put[T] = Callable[[T], bool]

_DONE = object()


class ReadAhead[T]:
    """Iterate the items ``produce(put)`` hands over in a thread of its own, at most ``ahead`` waiting.

    ``translate`` turns a producer's exception into the one the consumer raises (e.g. a driver error into a
    :class:`~ledger.errors.StoreError`). Close it (or use it as a context manager) if not read to the end.
    """

    def __init__(
        self,
        produce: Callable[[Put[T]], None],
        *,
        name: str,
        ahead: int = 2,
        translate: Callable[[BaseException], BaseException] | None = None,
    ) -> None:
        self._produce = produce
        self._translate = translate
        self._q: queue.Queue[object] = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._started = False

    def start(self) -> ReadAhead[T]:
        """Start the producer (once)."""
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def __enter__(self) -> Iterator[T]:
        return iter(self.start())

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            self._produce(self._put)
            self._put(_DONE)
        except BaseException as e:  # handed to the consuming thread, which raises it
            self._put(e)

    def __iter__(self) -> Iterator[T]:
        self.start()
        try:
            while True:
                item = self._q.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    told = self._translate(item) if self._translate else item
                    if told is item:
                        raise item
                    raise told from item
                yield cast(T, item)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the producer and wait for it (idempotent)."""
        self._stop.set()
        while True:  # a producer waiting to hand over an item sees the stop at once
            try:
                self._q.get_nowait()
            except queue.Empty:
                break
        if self._started and self._thread is not threading.current_thread():
            self._thread.join()

    def __del__(self) -> None:
        self._stop.set()
