"""A card's stored rows in version order, read a page at a time.

A command that walks a whole card (its audit, its event listing) holds one page of rows at a time, not the card:
a long session's card has hundreds of thousands of events.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ledger.core.events import card_stream
from ledger.errors import UnknownCard

#: Stored rows read at a time.
PAGE = 5_000


class StoredRows:
    """The rows of ``stream``, iterated once, a page at a time; what was read: how many, the last one's hash.
    ``first`` is the first page (empty: no such stream)."""

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
    """The stored rows of ``card_id`` of an open :class:`ledger.ledger.Ledger`; raises UnknownCard."""
    rows = StoredRows(ledger.store, card_stream(card_id))
    if not rows.first:
        raise UnknownCard(card_id)
    return rows
