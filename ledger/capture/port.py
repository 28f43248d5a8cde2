"""What live capture needs of the ledger, as a port below it: the facade hands itself over as one.

Capture (``capture_base``, ``capture``, ``remote``, ``batching``, ``rest``) appends a card's events, reads a card
back, scores it, records baseline sets and is told when the ledger closes. It names only this protocol, never the
facade's class, so the import graph has no loop between the facade and the toolkit (``tests/test_layout.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ledger.domain.document import ScorecardDoc
from ledger.domain.events import AnyEvent, BaselineEntry
from ledger.domain.projection import CardState


class LedgerPort(Protocol):
    """The ledger as capture uses it (:class:`ledger.Ledger` is one)."""

    @property
    def durability(self) -> str:
        """``normal``, ``full`` or ``batched`` (then capture queues its appends: ``capture/batching.py``)."""
        ...

    def append(self, stream: str, events: Sequence[AnyEvent], expected_version: int | None) -> Sequence[Any]:
        """Append events to a stream, hash-chained, in one transaction."""
        ...

    # Ledger.append_card's signature: capture (toolkit) may not import the facade, so the port names it again.
    def append_card(
        self,
        card_id: str,
        events: Sequence[AnyEvent],
        expected_version: int,
        *,
        state: CardState | None = None,
        cached_version: int = 0,
    ) -> Any:
        """Append to a card's stream, then apply the snapshot policy."""
        ...

    def load_card(self, card_id: str, *, until: int | None = None, use_cache: bool = True) -> CardState:
        """The card as its events describe it."""
        ...

    def document(
        self,
        card_id: str,
        *,
        until: int | None = None,
        baselines: Mapping[str, BaselineEntry] | None = None,
        card: CardState | None = None,
    ) -> ScorecardDoc:
        """The card's scorecard document."""
        ...

    def card_baselines(self, card: CardState) -> dict[str, BaselineEntry]:
        """The baseline set the card is scored under."""
        ...

    def record_baselines(self, entries: Iterable[BaselineEntry], *, ts: datetime | None = None) -> str:
        """Store a baseline set (content-addressed); returns its id."""
        ...

    def on_close(self, hook: Callable[[], Any]) -> None:
        """Call ``hook`` when the ledger closes (before its database is released)."""
        ...

    def attach(self, arcade: Any, *, record_reasoning: bool = False, **options: Any) -> Any:
        """Capture every scorecard fact of ``arcade`` into this ledger."""
        ...
