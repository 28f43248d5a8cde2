"""``check_link``: the one per-row chain check that verify, audit and copy share; ``first_unhashed``, the same
hash rule over many rows (copy)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.domain.chain import GENESIS, check_link, event_hash, first_unhashed


@dataclass(frozen=True)
class Row:
    version: int
    seq: int
    type: str
    ts: str
    body: bytes
    prev_hash: str
    hash: str


def _row(version: int, prev: str, body: bytes = b"{}", seq: int | None = None) -> Row:
    h = event_hash(prev, "card:x", version, "t", body)
    return Row(version, seq if seq is not None else version, "t", "", body, prev, h)


def test_every_kind_of_broken_link() -> None:
    first = _row(1, GENESIS)
    second = _row(2, first.hash)
    assert check_link("card:x", first, 0, GENESIS) is None
    assert check_link("card:x", second, 1, first.hash, prev_seq=1) is None
    gap = check_link("card:x", _row(4, first.hash), 1, first.hash)
    assert gap is not None and gap.kind == "gap" and gap.message == "version 4 follows version 1: 2 event(s) missing"
    order = check_link("card:x", _row(2, first.hash, seq=1), 1, first.hash, prev_seq=5)
    assert order is not None and order.kind == "order"
    relinked = check_link("card:x", second, 1, "f" * 64)
    assert relinked is not None and relinked.kind == "prev_hash"
    changed = check_link("card:x", replace(second, body=b'{"x":1}'), 1, first.hash)
    assert changed is not None and changed.kind == "hash"
    # The stream is hashed too: the same row does not link in another stream.
    moved = check_link("card:y", first, 0, GENESIS)
    assert moved is not None and moved.kind == "hash"


@dataclass(frozen=True)
class StreamRow(Row):
    stream: str


def test_first_unhashed_agrees_with_event_hash_row_by_row() -> None:
    rows, prev = [], GENESIS
    for version, (stream, type_, body) in enumerate(
        [("card:x", "t", b"{}"), ("card:x", "longer_type", b'{"a":"\xc3\xa9"}'), ("stream \u00e9", "t", b"x" * 5000)], 1
    ):
        h = event_hash(prev, stream, version, type_, body)
        rows.append(StreamRow(version, version, type_, "ts", body, prev, h, stream))
        prev = h
    assert first_unhashed(rows) is None and first_unhashed([]) is None
    changed = [rows[0], replace(rows[1], body=rows[1].body + b" "), rows[2]]
    assert first_unhashed(changed) == 1
    assert first_unhashed([rows[0], replace(rows[1], stream="card:y")]) == 1
    assert first_unhashed([rows[0], replace(rows[1], version=3)]) == 1
    assert first_unhashed([rows[0], replace(rows[1], type="t")]) == 1
    assert first_unhashed([rows[0], rows[1], replace(rows[2], prev_hash=rows[0].hash)]) == 2
    # A column of another type or shape is the row's problem before any hashing (check_link names it).
    assert first_unhashed([replace(rows[0], body="{}")]) == 0  # type: ignore[arg-type]
    assert first_unhashed([replace(rows[0], version="1")]) == 0  # type: ignore[arg-type]
    assert first_unhashed([replace(rows[0], prev_hash=GENESIS[:63])]) == 0
    assert first_unhashed([replace(rows[0], hash=rows[0].hash.upper())]) == 0
    assert first_unhashed([replace(rows[0], ts=None)]) == 0  # type: ignore[arg-type]
