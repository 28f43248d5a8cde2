"""``check_link``: the one per-row chain check that verify, audit and copy share."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.core.chain import GENESIS, check_link, event_hash


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
