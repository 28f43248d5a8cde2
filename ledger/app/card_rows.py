"""A card's stored rows in version order, a page at a time (a long card holds more than a command may hold)."""

from __future__ import annotations

import copy
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from ledger.domain.events import Numbered, card_stream, decode
from ledger.errors import StoreError, UnknownCard

PAGE = 5_000


class StoredRows:
    """The rows of ``stream``, iterated once; ``first`` is the first page (empty: no such stream)."""

    def __init__(self, store: Any, stream: str) -> None:
        self.store, self.stream, self.page = store, stream, PAGE
        self.first = store.read_stream(stream, page=(0, self.page))
        self.read = 0
        self.last: Any = None

    @property
    def last_hash(self) -> str:
        return self.last.hash if self.last is not None else ""

    def __iter__(self) -> Iterator[Any]:
        rows, self.first = self.first, []
        while rows:
            self.read += len(rows)
            self.last = rows[-1]
            yield from rows
            if len(rows) < self.page:
                return
            rows = self.store.read_stream(self.stream, page=(self.read, self.page))


def card_rows(ledger: Any, card_id: str) -> StoredRows:
    rows = StoredRows(ledger.store, card_stream(card_id))
    if not rows.first:
        raise UnknownCard(card_id)
    return rows


def event_log(ledger: Any, card_id: str, *, as_json: bool) -> Iterator[str]:
    """`ledger events`: the card's events a page at a time (a long session's card has hundreds of thousands), as a
    table or one JSON object; a card the toolkit would have closed meanwhile ends with a line saying when."""
    import itertools

    from ledger.app.card_read import shown_close

    rows = card_rows(ledger, card_id)
    try:
        card = ledger.load_card(card_id)
    except StoreError:  # an event that does not decode: still list them all (each says what it is)
        card = None
    shown = shown_close(card) if card is not None else None
    lapsed = shown if shown is not None and shown[2] else None
    if as_json:
        return _json_parts(card_id, rows, {"closed": lapsed[0].isoformat(), "reason": lapsed[1]} if lapsed else None)
    vw, sw, tw = len("version"), len("seq"), 0
    for r in rows:
        vw, sw, tw = max(vw, len(str(r.version))), max(sw, len(str(r.seq))), max(tw, len(r.type))
    head = f"{'version':>{vw}}  {'seq':>{sw}}  {'type':<{tw}}  {'time':<26}  what\n"
    lines = (
        f"{r.version:>{vw}}  {r.seq:>{sw}}  {r.type:<{tw}}  {r.ts[:26]:<26}  {_summary(_decoded(r.body), r.type)}\n"
        for r in itertools.islice(card_rows(ledger, card_id), rows.read)
    )
    tail = (
        [
            f"(no close event: the toolkit would have closed the card at {lapsed[0].isoformat()} ({lapsed[1]}); "
            f"`ledger close {card_id}` records a close)\n"
        ]
        if lapsed
        else []
    )
    return itertools.chain([head], lines, tail)


def _json_parts(card_id: str, rows: Iterable[Any], lapsed: dict[str, str] | None) -> Iterator[str]:
    import json

    import msgspec

    yield '{\n  "card_id": ' + json.dumps(card_id) + ',\n  "events": ['
    sep = "\n"
    for r in rows:
        ev = _decoded(r.body)
        item = {
            "version": r.version,
            "seq": r.seq,
            "type": r.type,
            "ts": r.ts,
            "summary": _summary(ev, r.type),
            "hash": r.hash,
            "event": msgspec.to_builtins(ev) if ev is not None else None,
        }
        yield sep + "    " + json.dumps(item, indent=2).replace("\n", "\n    ")
        sep = ",\n"
    yield '\n  ],\n  "lapsed": ' + json.dumps(lapsed, indent=2).replace("\n", "\n  ") + "\n}\n"


def _decoded(body: bytes) -> Any:
    try:
        return decode(body)
    except Exception:
        return None


def _summary(ev: Any, type_: str) -> str:
    if ev is None:
        return f"(body does not decode as {type_}: see `ledger audit`)"
    from ledger.rules.timeline import summary

    return summary(ev)


class CardEvents(Sequence[Numbered]):
    """A card's decoded events, read again a page at a time whenever a check walks them. ``missing``: the places
    (0-based, ascending) of rows whose body did not decode; the events are the others."""

    def __init__(self, store: Any, stream: str, rows: int, missing: list[int], page: int | None = None) -> None:
        self.store, self.stream, self.rows, self.missing = store, stream, rows, missing
        self.page = page or PAGE
        self._pages: OrderedDict[int, list[Numbered | None]] = OrderedDict()
        #: The events this holds, by place among the card's: a slice is one, sharing the pages read.
        self.start, self.stop = 0, rows - len(missing)

    def _place(self, i: int) -> int:
        """The row place of event ``i``: the smallest place with ``i`` decoded rows before it that decoded."""
        missing = self.missing
        p = i
        while True:
            k = bisect_right(missing, p)
            if p - k == i and (k == 0 or missing[k - 1] != p):
                return p
            p = i + k

    def _read(self, n: int) -> list[Numbered | None]:
        got = self._pages.get(n)
        if got is not None:
            self._pages.move_to_end(n)
            return got
        start = n * self.page
        want = min(self.page, self.rows - start)
        rows = self.store.read_stream(self.stream, page=(start, want)) if want > 0 else []
        if len(rows) != want:
            # The log is append-only: rows read once are there again, unless something outside the ledger removed them.
            raise StoreError(f"{self.stream}: rows {start + 1}..{start + max(want, 1)} changed while they were read")
        missing = set(self.missing[bisect_left(self.missing, start) : bisect_left(self.missing, start + self.page)])
        got = [None if start + j in missing else Numbered(r.version, r.seq, decode(r.body)) for j, r in enumerate(rows)]
        self._pages[n] = got
        if len(self._pages) > _PAGES_KEPT:
            self._pages.popitem(last=False)
        return got

    def __len__(self) -> int:
        return self.stop - self.start

    @overload
    def __getitem__(self, i: int) -> Numbered: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Numbered]: ...
    def __getitem__(self, i: int | slice) -> Numbered | Sequence[Numbered]:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                return [self[j] for j in range(start, stop, step)]
            part = copy.copy(self)  # the same pages, read when walked
            part.start, part.stop = self.start + start, self.start + max(stop, start)
            return part
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        p = self._place(self.start + i % n)
        got = self._read(p // self.page)[p % self.page]
        assert got is not None  # a place that decoded
        return got

    def __iter__(self) -> Iterator[Numbered]:
        if self.start >= self.stop:
            return
        p = self._place(self.start)
        left = self.stop - self.start
        while left > 0:
            page = self._read(p // self.page)
            for got in page[p % self.page :]:
                if got is not None:
                    yield got
                    left -= 1
                    if not left:
                        return
            p = (p // self.page + 1) * self.page


#: Decoded pages a :class:`CardEvents` keeps: a check that looks back a little (the inputs before a play) reads no
#: page twice.
_PAGES_KEPT = 2
