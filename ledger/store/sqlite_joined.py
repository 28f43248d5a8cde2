"""Reading a long stream's bodies as joined chunks, the next chunk read by a second thread while the caller decodes.

SQLite releases the GIL while it steps a statement, so on a million-event card the read (SQLite's half of a cold
replay) and the decoding (msgspec's half) overlap. The reader has its own connection (a connection is never
shared between threads at the same time) and reads only versions up to the head read beforehand: the log is
append-only, so those never change, whichever transaction reads them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ledger.errors import StoreError
from ledger.store.read_ahead import Put, ReadAhead


def chunk_reader(
    connect: Callable[[], sqlite3.Connection], joined: str, args: tuple[Any, ...], ranges: list[tuple[int, int]]
) -> ReadAhead[tuple[bytes, int]]:
    """``(JSON lines, count)`` chunks of ``ranges`` (version ranges), read one ahead; close it if not read to the end.

    ``args``: the separator, the stream, then the where's args after its version (lo and hi are per chunk).
    """

    def produce(put: Put[tuple[bytes, int]]) -> None:
        con = connect()
        try:
            con.execute("BEGIN")
            sep, stream, *extra = args
            for lo, hi in ranges:
                body, count = con.execute(joined, (sep, stream, lo, *extra, hi)).fetchone()
                if count and not put((body, count)):
                    return
            con.execute("COMMIT")
        finally:
            con.close()

    return ReadAhead(produce, name="ledger-read-ahead", translate=_store_error).start()


def _store_error(e: BaseException) -> BaseException:
    return StoreError(f"cannot read the ledger: {e}") if isinstance(e, sqlite3.Error) else e
