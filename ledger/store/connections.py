"""A store's database connections, bounded whatever the number of threads: one writer and a few readers.

Threads come and go in a long-lived process (``ledger serve`` answers every HTTP connection on a thread of its
own, an agent runs a thread pool), and the process's open files must not follow them. So a store holds:

- one **writer** connection, used by one thread at a time (a lock). Appends serialise on the database's write lock
  anyway (SQLite ``BEGIN IMMEDIATE``, PostgreSQL's advisory lock), so a process loses no parallelism; threads of one
  process queue on the lock instead of polling SQLite's busy handler. A thread waits for it at most the store's busy
  timeout, as it would for another process's write lock.
- at most ``size`` **reader** connections, checked out for one call and put back (most recently used first, so a
  quiet process keeps using one). A thread that finds them all in use waits for one, at most the busy timeout. An
  idle one the store finds no longer ``usable`` (a PostgreSQL session the server closed) is replaced at checkout.

Both belong to the process that opened them: a forked child opens its own on first use, and never uses, closes or
garbage-collects its parent's (their sockets and file locks are the parent's); they stay referenced, untouched.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypedDict, Unpack

from ledger.errors import StoreError

#: Reader connections per store: enough for a server's concurrent reads, few enough that open files stay flat.
READERS = 4

# This process's id, kept current across fork (os.getpid() is a system call, and the append path asks every time).
_pid = os.getpid()


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork)


class _ProcessState:
    """What one process holds of a writer or a pool (a forked child starts its own)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid


class _Waits(TypedDict):
    """How long a thread waits for a connection (the store's busy timeout), and where the store is (for messages)."""

    timeout: float
    where: Callable[[], str]


class _PerProcess[C, S: _ProcessState]:
    """What a writer and a reader pool share: how connections are opened, closed, checked (``usable``) and
    described, and one state per process (a parent's, inherited by a fork, stays referenced and untouched)."""

    _new_state: Callable[[int], S]

    def __init__(
        self,
        connect: Callable[[], C],
        close: Callable[[C], None],
        usable: Callable[[C], bool] = lambda con: True,
        **waits: Unpack[_Waits],
    ) -> None:
        self._connect = connect
        self._close = close
        self._usable = usable
        self.timeout = waits["timeout"]
        self._where = waits["where"]
        self._state = self._new_state(_pid)
        self._inherited: list[S] = []

    def _current(self) -> S:
        st = self._state
        if st.pid != _pid:
            self._inherited.append(st)  # the parent's: kept referenced so that nothing closes it from here
            st = self._state = self._new_state(_pid)
        return st

    def _quietly_close(self, con: C) -> None:
        with contextlib.suppress(Exception):  # a connection that cannot even close is being dropped anyway
            self._close(con)


class _WriterState[C](_ProcessState):
    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.lock = threading.RLock()
        self.con: C | None = None


class Writer[C](_PerProcess[C, _WriterState[C]]):
    """The one connection a process writes through (see the module's docstring)."""

    _new_state = _WriterState

    def locked(self) -> _Held[C]:
        """Hold the writer for this thread (re-entrant); raises StoreError after waiting ``timeout`` seconds."""
        return _Held(self, False)

    def connection(self) -> _Held[C]:
        """Hold the writer (:meth:`locked`) and use its connection."""
        return _Held(self, True)

    def _acquire(self) -> threading.RLock:
        st = self._current()
        if not st.lock.acquire(timeout=self.timeout):
            raise StoreError(
                f"cannot write to the ledger at {self._where()}: another thread of this process kept writing for "
                f"{self.timeout:g} s (the busy timeout)"
            )
        return st.lock

    def get(self) -> C:
        """The writer connection, opened on first use; hold :meth:`locked` to use it. One that is no longer
        ``usable`` (closed by the server, left inside a transaction a rollback could not end) is replaced."""
        st = self._current()
        con = st.con
        if con is None or not self._usable(con):
            if con is not None:
                self._quietly_close(con)
            con = st.con = self._connect()
        return con

    def discard(self) -> None:
        """Close the writer connection (broken, or in an unknown state); the next :meth:`get` opens a new one."""
        st = self._current()
        con, st.con = st.con, None
        if con is not None:
            self._quietly_close(con)

    def close(self) -> None:
        """Close this process's writer connection (never a parent's)."""
        st = self._current()
        with st.lock:
            self.discard()


class _Held[C]:
    """``with writer.locked()`` / ``with writer.connection() as con``: a plain class, not a generator context
    manager, because every captured step goes through one (a generator costs a few microseconds each time)."""

    __slots__ = ("_lock", "_with_con", "_writer")

    def __init__(self, writer: Writer[C], with_con: bool) -> None:
        self._writer = writer
        self._with_con = with_con

    def __enter__(self) -> C:
        lock = self._lock = self._writer._acquire()
        if not self._with_con:
            return None  # type: ignore[return-value]
        try:
            return self._writer.get()
        except BaseException:
            lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class _PoolState[C](_ProcessState):
    def __init__(self, pid: int) -> None:
        super().__init__(pid)
        self.cond = threading.Condition()
        self.idle: list[C] = []
        self.opened = 0
        #: Set by ``close()``: a connection put back here is closed instead.
        self.closed = False


class ReadPool[C](_PerProcess[C, _PoolState[C]]):
    """At most ``size`` reader connections, each used by one thread at a time (see the module's docstring)."""

    _new_state = _PoolState
    size = READERS

    @contextmanager
    def connection(self) -> Iterator[C]:
        """A reader connection for the duration of the block (an error in it closes the connection, to be safe)."""
        st = self._current()
        con = self._checkout(st)
        try:
            yield con
        except BaseException:
            self._drop(st, con)
            raise
        self._checkin(st, con)

    def _checkout(self, st: _PoolState[C]) -> C:
        con = self._take(st)
        if con is not None:
            if self._usable(con):
                return con
            # Closed by the server while it was idle (a restart, an idle timeout): a new one takes its place.
            self._quietly_close(con)
        try:
            return self._connect()
        except BaseException:
            with st.cond:
                st.opened -= 1
                st.cond.notify()
            raise

    def _take(self, st: _PoolState[C]) -> C | None:
        """An idle connection, or None once a slot for a new one is counted (waits while all are in use)."""
        deadline = time.monotonic() + self.timeout
        with st.cond:
            while not st.idle and st.opened >= self.size:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreError(
                        f"cannot read the ledger at {self._where()}: all {self.size} read connections of this "
                        f"process stayed busy for {self.timeout:g} s (the busy timeout)"
                    )
                st.cond.wait(left)
            if st.idle:
                return st.idle.pop()
            st.opened += 1  # counted before connecting, so that concurrent callers cannot pass the bound
            return None

    def _checkin(self, st: _PoolState[C], con: C) -> None:
        with st.cond:
            if not st.closed:
                st.idle.append(con)
                st.cond.notify()
                return
        self._drop(st, con)

    def _drop(self, st: _PoolState[C], con: C) -> None:
        self._quietly_close(con)
        with st.cond:
            st.opened -= 1
            st.cond.notify()

    def close(self) -> None:
        """Close this process's reader connections (never a parent's): idle ones now, one in use when put back.

        The pool stays usable: a later call opens connections again.
        """
        st = self._current()
        self._state = _PoolState(st.pid)
        with st.cond:
            st.closed = True
            idle, st.idle = st.idle, []
        for con in idle:
            self._drop(st, con)
