"""One adapter per API era of the published arc-agi releases 0.9.1 to 0.9.9 (:data:`ERAS`). An era is a run of releases
whose internals capture touches are the same; scoring is not the adapter's business."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any


@dataclass(frozen=True, slots=True)
class Era:
    """The capture-relevant API of a run of arc-agi releases (``first`` to ``last``, both included)."""

    first: tuple[int, int, int]
    last: tuple[int, int, int]
    #: ``Arcade.listen_and_serve`` and ``arc_agi.server`` exist.
    rest_server: bool
    #: ``OperationMode.COMPETITION`` and ``Scorecard.competition_mode`` exist.
    competition: bool
    #: The idle limit is ``ScorecardManager.idle_for`` (else the module's fixed ``STALE_MINUTES``).
    idle_for: bool
    #: ``ScorecardManager.max_open_for`` exists, and closes a card open that long.
    max_open_for: bool
    #: The wrapper keeps a response with an empty frame from the scorecard (before, the manager's hook sees it).
    wrapper_skips_empty_frames: bool

    @property
    def name(self) -> str:
        return _span(self.first, self.last)

    def manager_fields(self) -> tuple[str, ...]:
        return (
            ("guids", "scorecards")
            + (("idle_for",) if self.idle_for else ())
            + (("max_open_for",) if self.max_open_for else ())
        )

    def remote_mode_names(self) -> tuple[str, ...]:
        return ("ONLINE", "COMPETITION") if self.competition else ("ONLINE",)

    def limits(self, mgr: Any) -> tuple[timedelta, timedelta | None]:
        if self.idle_for:
            idle = mgr.idle_for
        else:
            from arc_agi import scorecard

            idle = timedelta(minutes=scorecard.STALE_MINUTES)
        return idle, (mgr.max_open_for if self.max_open_for else None)

    def competition_mode(self, sc: Any) -> bool | None:
        return sc.competition_mode if self.competition else None


def _era(first: tuple[int, int, int], last: tuple[int, int, int], *has: str) -> Era:
    fields = ("rest_server", "competition", "idle_for", "max_open_for", "wrapper_skips_empty_frames")
    assert set(has) <= set(fields)
    return Era(first, last, **{f: f in has for f in fields})


ERAS = (
    _era((0, 9, 1), (0, 9, 1)),
    _era((0, 9, 2), (0, 9, 2), "rest_server", "idle_for"),
    _era((0, 9, 3), (0, 9, 5), "rest_server", "idle_for", "competition"),
    _era((0, 9, 6), (0, 9, 6), "rest_server", "idle_for", "competition", "wrapper_skips_empty_frames"),
    _era((0, 9, 7), (0, 9, 9), "rest_server", "idle_for", "competition", "wrapper_skips_empty_frames", "max_open_for"),
)
#: The adapter used for a release outside the tested ones (:data:`ERAS`) when the override is set: the newest era's.
NEWEST = ERAS[-1]


def parse(version: str) -> tuple[int, ...]:
    """The leading numeric parts of a version (``0.9.6rc1`` -> (0, 9, 6)); () when there are none."""
    out = []
    for part in version.split("."):
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        out.append(int(digits))
        if not part.isdigit():
            break
    return tuple(out)


def era_of(version: str | None) -> Era | None:
    """The era of an arc-agi release, None outside :data:`ERAS` (or for a version that cannot be read)."""
    v = parse(version) if version else ()
    if len(v) < 3:
        return None
    for era in ERAS:
        if era.first <= v[:3] <= era.last:
            return era
    return None


def _span(first: tuple[int, ...], last: tuple[int, ...]) -> str:
    lo, hi = (".".join(map(str, v)) for v in (first, last))
    return lo if lo == hi else f"{lo}-{hi}"


def tested_range() -> str:
    """The releases capture is tested against, both included."""
    return _span(ERAS[0].first, NEWEST.last)
