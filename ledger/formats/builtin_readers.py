"""The ledger's own readers behind the plugin interface (:mod:`ledger.formats.readers`), asked before the
installed ones."""

from __future__ import annotations

from ledger.formats.arcagi3 import Arcagi3Files
from ledger.formats.readers import Reader


def builtin() -> list[Reader]:
    """A reader of each format the ledger reads through the interface, in the order they are asked."""
    return [Arcagi3Files()]
