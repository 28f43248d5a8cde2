"""The published calculators: each arc-agi release's scoring, as data. See docs/scoring.md, 'Calculators'."""

from __future__ import annotations

from typing import Literal

import msgspec

from ledger.errors import InputError

Arithmetic = Literal["linear", "squared", "capped"]

#: Where a card's calculator came from (``assumed``: an import nothing told, the newest was taken).
Source = Literal["capture", "user", "file", "assumed"]


class Calculator(msgspec.Struct, frozen=True, kw_only=True):
    version: str
    arithmetic: Arithmetic
    level_cap: float
    competition_field: bool
    #: ``from_scorecard(do_private_tags=...)`` exists (the competition server pools private and level tags).
    private_tags: bool
    #: The release's bookkeeping, not its arithmetic: before 0.9.6 the toolkit updated the card with every answer,
    #: so an action answered with an empty frame (after GAME_OVER or WIN) counts one action and its zeroed
    #: ``levels_completed`` is a level change (``EnvironmentWrapper._set_last_response``).
    empty_frames_count: bool = False

    @property
    def weighted(self) -> bool:
        return self.arithmetic != "linear"

    @property
    def squared(self) -> bool:
        return self.arithmetic != "linear"

    @property
    def completion_cap(self) -> bool:
        return self.arithmetic == "capped"

    @property
    def era(self) -> str:
        """The releases that share this arithmetic and document shape, e.g. ``0.9.7-0.9.9``."""
        same = [c.version for c in PUBLISHED if c.arithmetic == self.arithmetic]
        return same[0] if len(same) == 1 else f"{same[0]}-{same[-1]}"


def _make(version: str, arithmetic: Arithmetic) -> Calculator:
    return Calculator(
        version=version,
        arithmetic=arithmetic,
        level_cap=115.0 if arithmetic == "capped" else 100.0,
        competition_field=arithmetic != "linear",
        private_tags=arithmetic != "linear",
        empty_frames_count=version in ("0.9.1", "0.9.2", "0.9.3", "0.9.4", "0.9.5"),
    )


PUBLISHED: tuple[Calculator, ...] = (
    _make("0.9.1", "linear"),
    _make("0.9.2", "linear"),
    _make("0.9.3", "squared"),
    _make("0.9.4", "squared"),
    _make("0.9.5", "squared"),
    _make("0.9.6", "squared"),
    _make("0.9.7", "capped"),
    _make("0.9.8", "capped"),
    _make("0.9.9", "capped"),
)
_BY_VERSION = {c.version: c for c in PUBLISHED}
VERSIONS: tuple[str, ...] = tuple(_BY_VERSION)
NEWEST = PUBLISHED[-1]
#: The calculator of a card that records none: every card the ledger captured before it recorded the toolkit's
#: release was played under arc-agi 0.9.8 or later (capture refused anything older).
UNRECORDED = _BY_VERSION["0.9.9"]


class UnknownCalculator(InputError):
    def __init__(self, version: str) -> None:
        super().__init__(f"no calculator {version!r}: the published ones are {', '.join(VERSIONS)}")
        self.version = version


def get(version: str) -> Calculator:
    c = _BY_VERSION.get(version.strip().removeprefix("v"))
    if c is None:
        raise UnknownCalculator(version)
    return c


def resolve(recorded: str | None) -> tuple[Calculator, str | None]:
    """The calculator of a card that recorded ``recorded``, and a note when it is not exactly that release's."""
    if recorded is None:
        return UNRECORDED, None
    c = _BY_VERSION.get(recorded)
    if c is not None:
        return c, None
    return NEWEST, (
        f"the card was played with arc-agi {recorded}, not a published calculator the ledger knows: scored under "
        f"{NEWEST.version}"
    )


def card_note(recorded: str | None, source: str | None) -> str | None:
    """What ``export`` and ``replay`` say about a card's own calculator, when there is something to say."""
    calc, note = resolve(recorded)
    if note is not None:
        return note
    if source == "assumed":
        return (
            f"the recording does not say which arc-agi played it: scored under {calc.version}, the newest "
            "calculator (`ledger import --calculator VERSION` states it)"
        )
    return None


def label(calc: Calculator) -> str:
    return f"arc-agi {calc.version} ({calc.arithmetic}, {calc.era})"
