"""arc-scorecard-ledger: ARC-AGI-3 scorecards as an append-only event log.

>>> from ledger import Ledger
>>> with Ledger.open("ledger.sqlite") as led:
...     led.attach(arcade)          # every scorecard fact of this Arcade is now committed as it happens
...     ...                         # play
...     print(led.export(card_id))  # == arcade.get_scorecard(card_id).model_dump_json()
"""

from ledger.errors import (
    AmbiguousCard,
    CaptureError,
    HistoryConflict,
    InputError,
    LedgerError,
    StoreError,
    UnknownBaselines,
    UnknownCard,
    VersionConflict,
)
from ledger.version import __version__ as __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ledger.ledger import Ledger
    from ledger.store.summary import CardSummary


def __getattr__(name: str) -> object:
    # Loaded on first use: `ledger --help` and `--version` must not pay for the facade and its imports.
    if name == "Ledger":
        from ledger.ledger import Ledger

        return Ledger
    if name == "CardSummary":
        from ledger.store.summary import CardSummary

        return CardSummary
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")


__all__ = [
    "AmbiguousCard",
    "CaptureError",
    "CardSummary",
    "HistoryConflict",
    "InputError",
    "Ledger",
    "LedgerError",
    "StoreError",
    "UnknownBaselines",
    "UnknownCard",
    "VersionConflict",
]
