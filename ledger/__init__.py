"""arc-scorecard-ledger: ARC-AGI-3 scorecards as an append-only event log.

>>> from ledger import Ledger
>>> with Ledger.open("ledger.sqlite") as led:
...     led.attach(arcade)          # every scorecard fact of this Arcade is now committed as it happens
...     ...                         # play
...     print(led.export(card_id))  # == arcade.get_scorecard(card_id).model_dump_json()
"""

from .api import CardSummary, Ledger, UnknownCard
from .capture import CaptureError
from .store import StoreError, VersionConflict

__all__ = ["CaptureError", "CardSummary", "Ledger", "StoreError", "UnknownCard", "VersionConflict"]
__version__ = "0.1.0"
