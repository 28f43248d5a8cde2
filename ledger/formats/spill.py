"""Chunks of what an import finds for each line of a recording, kept in a temporary file once they are full.

A recording is re-simulated from its start and its card written once it is read, so what is found for each line (the
line itself, its action, its candidates) is kept until then. Kept in memory it grows with the recording; kept here,
memory holds the chunk being filled and the last chunks read, whatever the length, and the rest waits on disk
(about what the recording's frames take compressed). A recording shorter than one chunk never touches the disk.
"""

from __future__ import annotations

import pickle
import tempfile
from array import array
from typing import IO, Any

from ledger.errors import SpillError

#: Lines a chunk holds: a few hundred kB of columns and the distinct frames of that many lines.
CHUNK = 4096


class Spill:
    """Full chunks, each written once to a temporary file (gone with the spill, or the process) and read back when
    asked; the last two read are kept. A chunk is any picklable value."""

    __slots__ = ("_at", "_cache", "_file")

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        #: Where each chunk starts in the file, and where the last one ends.
        self._at = array("q", [0])
        self._cache: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._at) - 1

    def put(self, chunk: Any) -> None:
        """Write ``chunk`` after the others."""
        blob = pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            if self._file is None:
                # Unlinked at once (nothing is left on a crash); closed with this spill.
                self._file = tempfile.TemporaryFile(prefix="ledger-spill-")  # noqa: SIM115
            self._file.seek(self._at[-1])
            self._file.write(blob)
            self._file.flush()
        except OSError as e:
            raise _failed("write", e) from e
        self._at.append(self._at[-1] + len(blob))

    def get(self, k: int) -> Any:
        """Chunk ``k``, as it was put."""
        hit = self._cache.get(k)
        if hit is not None:
            return hit
        assert self._file is not None
        try:
            self._file.seek(self._at[k])
            blob = self._file.read(self._at[k + 1] - self._at[k])
        except OSError as e:
            raise _failed("read", e) from e
        chunk = pickle.loads(blob)
        if len(self._cache) >= 2:
            del self._cache[next(iter(self._cache))]
        self._cache[k] = chunk
        return chunk

    def take_back(self, k: int) -> Any:
        """Chunk ``k``, forgotten with every chunk after it (they are filled again)."""
        chunk = self.get(k)
        del self._at[k + 1 :]
        self._cache.clear()
        if self._file is not None:
            self._file.truncate(self._at[-1])
        return chunk


def _failed(what: str, e: OSError) -> SpillError:
    return SpillError(
        f"cannot {what} the lines of a long recording kept in the temporary directory {tempfile.gettempdir()}: "
        f"{e.strerror or e} (TMPDIR names another)"
    )
