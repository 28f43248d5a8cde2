"""SQLite WAL checkpoints off the appending thread.

With SQLite's default, the commit that takes the write-ahead log past 1,000 pages also copies it into the database
file and syncs both (two fsyncs): live capture commits one or two pages per toolkit step, so every few hundred
steps one step pays for a checkpoint, and on a busy disk that averages out to more than the commits themselves.
SQLite's documentation suggests the remedy used here: the writers' automatic checkpoint is raised to a backstop
(:data:`BACKSTOP_PAGES`, reached only if this thread falls behind), and a background thread runs a PASSIVE
checkpoint (which never blocks a writer or a reader) every :data:`EVERY_COMMITS` commits of this process.
Durability is unchanged: a commit is in the WAL, synced as ``synchronous`` says, before ``append`` returns;
checkpointing only moves committed pages into the main file.

Only with ``--durability normal``: under ``full`` every commit syncs the WAL itself, and a checkpoint syncing the
same files from another thread then slows those commits down more than running it inline does (measured side by
side), so ``full`` keeps SQLite's own checkpointing.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable

#: The writers' ``wal_autocheckpoint``: only if the background checkpoints fall behind (about 40 MB of WAL).
BACKSTOP_PAGES = 10_000
#: Commits between two background checkpoints (each commit of a captured step writes one or two pages).
EVERY_COMMITS = 250


class Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` on its own connection, in a daemon thread, when told enough
    commits happened. A forked child starts its own thread on its first commits."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], every: int = EVERY_COMMITS) -> None:
        #: 0: never (SQLite checkpoints inline, as by default).
        self._connect = connect
        self._every = every
        self._commits = 0
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._closed = False

    def committed(self) -> None:
        """Count one commit (called by the appending thread right after COMMIT; costs an increment)."""
        self._commits += 1
        if self._commits < self._every or not self._every:
            return
        self._commits = 0
        if self._pid != os.getpid() or self._thread is None:
            self._start()
        self._wake.set()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-wal-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            con = self._connect()
        except Exception:
            return
        wake = self._wake
        try:
            while True:
                wake.wait()
                wake.clear()
                if self._closed:
                    return
                # Failing is harmless: the pages stay in the WAL and the next checkpoint (or the backstop) moves them.
                with contextlib.suppress(sqlite3.Error):
                    con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            con.close()

    def close(self) -> None:
        """Stop the thread (it finishes a checkpoint in progress first)."""
        self._closed = True
        thread = self._thread
        if thread is not None and self._pid == os.getpid():
            self._wake.set()
            thread.join(timeout=30)
        self._thread = None
