"""The background sha256 of ``ledger import`` equals hashlib's, and its thread always ends."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from ledger.formats.recordings import BackgroundHash, read_recording

CORPUS = Path(__file__).resolve().parent / "recordings_corpus" / "good"


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


def _hash_threads() -> set[int | None]:
    return {t.ident for t in threading.enumerate() if t.name == "ledger-hash"}


def test_a_read_returns_before_its_hash_is_asked_for_and_the_hash_covers_what_it_consumed(tmp_path: Path) -> None:
    # The parse of the next file does not wait for this one's hash: it is finished when asked for, and it is the
    # sha256 of exactly the bytes consumed (a last line still being written is left out).
    src = next(CORPUS.rglob("*.jsonl")).read_bytes()
    f = tmp_path / "c" / "g-0f0e0d0c-0000-4000-8000-000000000001.jsonl"
    f.parent.mkdir()
    f.write_bytes(src + b'{"timestamp": "2025-')
    before = _hash_threads()
    r = read_recording(f)
    assert r.end == len(src)
    assert r.prefix_sha256 == hashlib.sha256(src).hexdigest()
    assert _hash_threads() <= before


def test_the_hash_thread_ends_when_the_parse_fails(tmp_path: Path) -> None:
    f = next(CORPUS.rglob("*.jsonl"))
    before = _hash_threads()

    def fail(n: int) -> None:
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        read_recording(f, progress=fail)
    for _ in range(100):
        if _hash_threads() <= before:
            break
        time.sleep(0.01)
    assert _hash_threads() <= before
