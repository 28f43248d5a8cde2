"""The background sha256 of ``ledger import`` equals hashlib's, and its thread always ends."""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from ledger.formats.recordings import BackgroundHash


def test_same_digest_as_hashing_in_line() -> None:
    blocks = [os.urandom(n) for n in (0, 1, 1 << 18, 12345, 1 << 20, 7)] * 20
    start = hashlib.sha256(b"already imported prefix")
    expected = start.copy()
    for b in blocks:
        expected.update(b)
    with BackgroundHash(start) as h:
        for b in blocks:
            h.update(b)
    assert h.finish().hexdigest() == expected.hexdigest()


def test_the_thread_ends_when_reading_fails() -> None:
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(OSError), BackgroundHash(hashlib.sha256()) as h:
        h.update(b"x" * 100)
        raise OSError("the disk went away")
    assert {t.ident for t in threading.enumerate() if t.name == "ledger-hash"} <= before
