"""What a re-simulation (:mod:`ledger.resim.resimulate`) found: the first divergence, the counts, the cost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first point where the game and the recording disagree.

    ``version``/``seq`` name the recorded event (for a missing event: the last recorded event before the point).
    ``expected`` is what the game produced, ``recorded`` what the log holds (``None`` when one side has no event).
    """

    version: int
    seq: int
    game_id: str | None
    guid: str | None
    action: str | None
    field: str
    expected: Any
    recorded: Any
    message: str


@dataclass(slots=True)
class ResimResult:
    """What the re-simulation replayed, and the first divergence (None when everything matched)."""

    guids: int = 0
    plays: int = 0
    inputs: int = 0
    default_seed_plays: int = 0
    divergence: Divergence | None = None
    #: Problems that stopped the re-simulation before it could compare.
    error: str | None = None
    games: list[str] = field(default_factory=list)
    #: game_id -> why its plays were not checked (not in the folder, code that does not start).
    skipped: dict[str, str] = field(default_factory=dict)
    skipped_plays: int = 0
    #: Why a mismatch does not prove the record wrong (a seed not recorded, too many open states); else None.
    unknown: str | None = None
    #: Inputs the record leaves open (actions with candidates), those the game decided, those still open.
    open_actions: int = 0
    decided: int = 0
    still_open: int = 0
    #: guid -> the seed that reproduced a play whose seed was not recorded (the default seed's plays not listed).
    seeds_found: dict[str, int] = field(default_factory=dict)
    #: version -> (action, x, y) the game took for an undecided action (the first that fits where several do).
    #: The instances' own maps, not a copy: a long card's open actions are many.
    choices: Mapping[int, tuple[int, int | None, int | None]] = field(default_factory=dict)
    #: Whether every candidate of the open inputs was tried (``decided`` and ``still_open`` then count), or the
    #: first path the game agreed on was taken (``reproduced`` counts the open inputs it took an action for).
    searched: bool = True
    reproduced: int = 0
    #: Where the one path broke and a search from a state kept a little before carried it on.
    repairs: int = 0
    #: Game steps run and game states copied (the cost, whatever the machine); whether a search was given up, its
    #: allowance spent (:mod:`ledger.toolkit.search_budget`).
    steps: int = 0
    copies: int = 0
    spent: bool = False

    @property
    def ok(self) -> bool:
        """True when every recorded event that could be checked was reproduced."""
        return self.divergence is None and self.error is None
