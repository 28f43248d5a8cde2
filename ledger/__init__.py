"""arc-scorecard-ledger: ARC-AGI-3 scorecards as an append-only event log.

>>> from ledger import Ledger
>>> with Ledger.open("ledger.sqlite") as led:
...     led.attach(arcade)          # every scorecard fact of this Arcade is now committed as it happens
...     ...                         # play
...     print(led.export(card_id))  # == arcade.get_scorecard(card_id).model_dump_json()
"""

from ledger.errors import (
    CaptureError,
    HistoryConflict,
    InputError,
    LedgerError,
    StoreError,
    UnknownBaselines,
    UnknownCard,
    VersionConflict,
)
from ledger.ledger import CardSummary, Ledger

__all__ = [
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
__version__ = "0.1.0"
