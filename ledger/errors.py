"""Every error the ledger raises on purpose; each carries its exit code (docs/commands.md lists them)."""

from __future__ import annotations

#: The exit code of a command whose standard output was closed by its reader: what a shell reports for a process a
#: closed pipe killed (128 + SIGPIPE), which no verdict uses, so a closed pipe never passes for a FAIL.
CLOSED_PIPE = 141


class LedgerError(Exception):
    """The root: a problem the user can act on; the message says what."""

    exit_code: int = 1


class InputError(LedgerError, ValueError):
    """Bad input or bad usage: nothing was written."""

    exit_code = 2


class StoreError(LedgerError):
    """A problem with the ledger database."""


class SpillError(LedgerError):
    """What an import or an audit keeps of a long recording could not be written to the temporary directory."""


class VersionConflict(StoreError):
    """Another writer appended to the stream first: reload the stream and retry."""

    def __init__(self, stream: str, expected: int | None) -> None:
        super().__init__(f"version conflict on stream {stream!r}: expected last version {expected}")
        self.stream = stream
        self.expected = expected


class HistoryConflict(StoreError):
    """The destination of a copy holds a different event than the source at some stream version."""


class SameLedger(StoreError):
    """The source and the destination of a copy are the same database."""

    exit_code = 2


class UnknownCard(LedgerError, LookupError):
    """No card with that id in this ledger."""

    def __init__(self, card_id: str) -> None:
        super().__init__(f"no card {card_id!r} in this ledger (see `ledger cards`)")
        self.card_id = card_id


class AmbiguousCard(InputError, LookupError):
    """A card id prefix that several cards start with (bad input: the message lists them)."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:10]) + (f" (+{len(candidates) - 10} more)" if len(candidates) > 10 else "")
        super().__init__(f"{prefix!r} is ambiguous: {len(candidates)} cards start with it: {shown}")
        self.prefix = prefix
        self.candidates = candidates


class UnknownBaselines(LedgerError, LookupError):
    """A card refers to a baseline set that is not in the ledger."""


class MissingExtra(LedgerError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class CaptureError(LedgerError, RuntimeError):
    """The ledger could not record what the toolkit just did (the toolkit's own call did complete)."""


class ImportInputError(InputError):
    """The paths given do not name any recording (bad usage)."""


class BaselinesInputError(InputError):
    """The file or folder to import is not a valid baseline source (nothing was written)."""


class LabelConflict(InputError):
    """The label already points at another set (use ``move``)."""

    def __init__(self, label: str, current: str, wanted: str) -> None:
        super().__init__(
            f"label {label!r} already points at baseline set {current[:12]}; "
            f"use --move to point it at {wanted[:12]} instead"
        )
        self.label = label
        self.current = current
        self.wanted = wanted


class BaselinesNotKnown(LedgerError):
    """An open card on an ARC server whose baselines nothing revealed yet: a score now would be a made-up 0."""

    def __init__(self, card_id: str, games: list[str]) -> None:
        shown = ", ".join(games[:5]) + (f" (+{len(games) - 5} more)" if len(games) > 5 else "")
        super().__init__(
            f"card {card_id} is open on the ARC server and the baselines of {shown} are not known yet (the server "
            "reveals them in its scorecard answers, in competition mode only at close): no score to export; "
            f"`ledger replay {card_id}` shows its actions, levels and states, --baselines SET scores it under a set"
        )
        self.card_id = card_id
        self.games = games
