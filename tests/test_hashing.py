"""The background read of ``ledger import`` hands over every block in order, its sha256 equals hashlib's, a read error
reaches the reading thread, and its thread always ends."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from ledger.formats.recordings import BLOCK, BackgroundRead


def _threads() -> set[int | None]:
    return {t.ident for t in threading.enumerate() if t.name == "ledger-read"}


def test_same_blocks_and_digest_as_reading_in_line(tmp_path: Path) -> None:
    data = os.urandom(40 * BLOCK + 12345)
    path = tmp_path / "f"
    path.write_bytes(data)
    start = hashlib.sha256(b"already imported prefix")
    expected = start.copy()
    expected.update(data[777:])
    with open(path, "rb") as f:
        f.seek(777)
        with BackgroundRead(f, start) as blocks:
            got = b"".join(blocks)
        assert got == data[777:]
        assert blocks.close().hexdigest() == expected.hexdigest()
    assert not _threads()


def test_the_thread_ends_when_parsing_stops_early(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * (100 * BLOCK))
    with pytest.raises(ValueError), open(path, "rb") as f, BackgroundRead(f, hashlib.sha256()) as blocks:
        for _ in blocks:
            raise ValueError("a line the parser cannot take")
    assert not _threads()


class _FailingFile:
    def __init__(self) -> None:
        self.reads = 0

    def read(self, n: int) -> bytes:
        self.reads += 1
        if self.reads > 3:
            raise OSError("the disk went away")
        return b"y" * n


def test_a_read_error_is_raised_in_the_reading_thread() -> None:
    seen = 0
    with pytest.raises(OSError, match="the disk went away"), BackgroundRead(_FailingFile(), hashlib.sha256()) as blocks:
        for block in blocks:
            seen += len(block)
    assert seen == 3 * BLOCK
    assert not _threads()
