"""The projection: fold a card's events into its plays, with the toolkit's bookkeeping rules.

This mirrors ``arc_agi.scorecard.Card``/``Scorecard``: plays are grouped by game (in order of each game's first
play), an update for a guid goes to that guid's most recent play (or, as the toolkit does, to the game's last
play when the guid has none), and a level change records ``(levels_completed, actions so far)``.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger.core.events import (
    ActionIgnored,
    ActionTaken,
    AnyEvent,
    CardClosed,
    CardOpened,
    CardReopened,
    GameOver,
    LevelCompleted,
    LevelReset,
    PlayStarted,
    Win,
)


@dataclass(slots=True)
class Play:
    """One play of one game: the toolkit's per-play lists of ``Card`` taken together."""

    guid: str
    levels_completed: int = 0
    state: str = "NOT_FINISHED"
    actions: int = 0
    resets: int = 0
    #: The toolkit's ``actions_by_level`` for this play: (levels_completed, action count when it changed).
    marks: list[tuple[int, int]] = field(default_factory=list)
    seed: int | None = None
    #: Actions sent after GAME_OVER/WIN (empty frames): the toolkit counts none; the post-mortem reports them.
    actions_after_end: int = 0
    started_at: datetime | None = None


@dataclass(slots=True)
class CardState:
    """A card as its events describe it."""

    card_id: str
    source_url: str | None = None
    tags: list[str] | None = None
    opaque: Any = None
    competition_mode: bool | None = None
    baselines_id: str | None = None
    opened_at: datetime | None = None
    closed_at: datetime | None = None
    close_reason: str | None = None
    close_document_sha256: str | None = None
    last_ts: datetime | None = None
    #: game_id -> plays, in the order games were first played (the toolkit's dict order).
    games: dict[str, list[Play]] = field(default_factory=dict)
    events: int = 0

    @property
    def closed(self) -> bool:
        """True once a CardClosed event was folded."""
        return self.close_reason is not None

    def play_for(self, game_id: str, guid: str) -> Play | None:
        """The play an update for ``guid`` lands on (``Card.index_of_guid``), or None if the game never started."""
        plays = self.games.get(game_id)
        if not plays:
            return None
        for p in reversed(plays):
            if p.guid == guid:
                return p
        return plays[-1]

    @property
    def total_actions(self) -> int:
        """Every action counted on the card, all plays of all games."""
        return sum(p.actions for plays in self.games.values() for p in plays)


def new_card(card_id: str) -> CardState:
    """An empty card, before its first event."""
    return CardState(card_id=card_id)


def apply(card: CardState, e: AnyEvent) -> None:
    """Fold one event into ``card`` (in place)."""
    card.events += 1
    card.last_ts = e.ts
    t = type(e)
    if t is ActionTaken:
        p = card.play_for(e.game_id, e.guid)  # type: ignore[union-attr]
        if p is not None:
            p.actions += 1
    elif t is PlayStarted:
        play = Play(guid=e.guid, seed=e.seed, started_at=e.ts)  # type: ignore[union-attr]
        card.games.setdefault(e.game_id, []).append(play)  # type: ignore[union-attr]
    elif t is LevelCompleted:
        p = card.play_for(e.game_id, e.guid)  # type: ignore[union-attr]
        if p is not None:
            p.marks.append((e.levels_completed, p.actions))  # type: ignore[union-attr]
            p.levels_completed = e.levels_completed  # type: ignore[union-attr]
    elif t is LevelReset:
        p = card.play_for(e.game_id, e.guid)  # type: ignore[union-attr]
        if p is not None:
            p.resets += 1
            p.actions += 1
    elif t is GameOver:
        p = card.play_for(e.game_id, e.guid)  # type: ignore[union-attr]
        if p is not None:
            p.state = "GAME_OVER"
    elif t is Win:
        p = card.play_for(e.game_id, e.guid)  # type: ignore[union-attr]
        if p is not None:
            p.state = "WIN"
    elif t is ActionIgnored:
        p = card.play_for(e.game_id, e.guid)  # type: ignore[union-attr]
        if p is not None:
            p.actions_after_end += 1
    elif t is CardOpened:
        card.card_id = e.card_id  # type: ignore[union-attr]
        card.source_url = e.source_url  # type: ignore[union-attr]
        card.tags = e.tags  # type: ignore[union-attr]
        card.opaque = e.opaque  # type: ignore[union-attr]
        card.competition_mode = e.competition_mode  # type: ignore[union-attr]
        card.baselines_id = e.baselines_id  # type: ignore[union-attr]
        card.opened_at = e.ts
    elif t is CardClosed:
        card.closed_at = e.ts
        card.close_reason = e.reason  # type: ignore[union-attr]
        card.close_document_sha256 = e.document_sha256  # type: ignore[union-attr]
    elif t is CardReopened:
        card.closed_at = None
        card.close_reason = None
        card.close_document_sha256 = None


def fold(card_id: str, events: Iterable[AnyEvent], card: CardState | None = None) -> CardState:
    """Fold ``events`` (in stream order) onto ``card``, or onto a new card.

    Same result as :func:`apply` on each event; runs of actions on one play (nearly all of a long card) skip
    the play lookup, which is what makes replaying a million events fast.
    """
    c = card if card is not None else new_card(card_id)
    last_key: tuple[str, str] | None = None
    last_play: Play | None = None
    n = 0
    for e in events:
        if type(e) is ActionTaken:
            key = (e.game_id, e.guid)
            if key != last_key:
                last_key, last_play = key, c.play_for(e.game_id, e.guid)
            if last_play is not None:
                last_play.actions += 1
            n += 1
            c.last_ts = e.ts
            continue
        if type(e) is PlayStarted:
            last_key = last_play = None  # a new play may now receive this guid's actions
        c.events += n
        n = 0
        apply(c, e)
    c.events += n
    return c
