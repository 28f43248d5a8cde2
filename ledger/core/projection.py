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
    BaselinesAttached,
    BaselinesReported,
    CaptureContext,
    CardClosed,
    CardOnServer,
    CardOpened,
    CardReopened,
    CardRetracted,
    GameOver,
    LevelCompleted,
    LevelReset,
    ObservationReapplied,
    PlayStarted,
    RequestFailed,
    ServerDocument,
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
    #: Competition cards: the server's games, in its order (each is made at close if never played).
    environments: list[str] | None = None
    #: Requests to the ARC server without a usable answer (ONLINE/COMPETITION capture): none of them counted.
    requests_failed: int = 0
    #: The document the ARC server returned at close, as received.
    server_document: dict[str, Any] | None = None
    #: ``ledger serve`` / ``ledger record``, and the tags given to it.
    captured_via: str | None = None
    capture_tags: list[str] | None = None
    #: Set by a CardRetracted event: the card is left out of lists and leaderboards, its record kept.
    retracted_at: datetime | None = None
    retract_reason: str | None = None
    #: The ARC server the card lives on (ONLINE/COMPETITION capture); None for a card of the toolkit's own.
    server: str | None = None
    #: When and in which answer (``close``/``scorecard``) the server last revealed baselines (BaselinesReported).
    baselines_reported_at: datetime | None = None
    baselines_reported_in: str | None = None
    #: The games whose baselines are known on a server card: from local game files at open, or revealed by the
    #: server since (none of them is "not known yet").
    baselines_known_games: list[str] | None = None
    #: When a set was attached to an imported card (BaselinesAttached).
    baselines_attached_at: datetime | None = None

    @property
    def all_tags(self) -> list[str]:
        """The card's own tags, then those given to ``ledger serve``/``record``, once each: what filters match.

        The exported document keeps only the card's own tags (as the toolkit does); a filter by tag must also find
        a card tagged at capture time.
        """
        return list(dict.fromkeys([*(self.tags or ()), *(self.capture_tags or ())]))

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
    # Dispatched on the exact type (fast on long cards), which a type checker cannot follow: ``ev`` is untyped.
    ev: Any = e
    card.events += 1
    card.last_ts = ev.ts
    t = type(e)
    if t is ActionTaken:
        p = card.play_for(ev.game_id, ev.guid)
        if p is not None:
            p.actions += 1
    elif t is PlayStarted:
        play = Play(guid=ev.guid, seed=ev.seed, started_at=ev.ts)
        card.games.setdefault(ev.game_id, []).append(play)
    elif t is LevelCompleted:
        p = card.play_for(ev.game_id, ev.guid)
        if p is not None:
            p.marks.append((ev.levels_completed, p.actions))
            p.levels_completed = ev.levels_completed
    elif t is LevelReset:
        p = card.play_for(ev.game_id, ev.guid)
        if p is not None:
            p.resets += 1
            p.actions += 1
    elif t is GameOver:
        p = card.play_for(ev.game_id, ev.guid)
        if p is not None:
            p.state = "GAME_OVER"
    elif t is Win:
        p = card.play_for(ev.game_id, ev.guid)
        if p is not None:
            p.state = "WIN"
    elif t is ActionIgnored:
        p = card.play_for(ev.game_id, ev.guid)
        if p is not None:
            p.actions_after_end += 1
    elif t is CardOpened:
        card.card_id = ev.card_id
        card.source_url = ev.source_url
        card.tags = ev.tags
        card.opaque = ev.opaque
        card.competition_mode = ev.competition_mode
        card.baselines_id = ev.baselines_id
        card.environments = ev.environments
        card.opened_at = ev.ts
    elif t is CardClosed:
        card.closed_at = ev.ts
        card.close_reason = ev.reason
        card.close_document_sha256 = ev.document_sha256
    elif t is ObservationReapplied:
        # The server counted its last observation again: one action, and one reset if it was a RESET.
        p = card.play_for(ev.game_id, ev.guid)
        if p is not None:
            p.actions += 1
            if ev.action == 0:
                p.resets += 1
    elif t is RequestFailed:
        card.requests_failed += 1
    elif t is ServerDocument:
        card.server_document = ev.document
    elif t is CaptureContext:
        card.captured_via = ev.via
        card.capture_tags = ev.tags
    elif t is BaselinesAttached:
        card.baselines_id = ev.baselines_id
        card.baselines_attached_at = ev.ts
    elif t is BaselinesReported:
        card.baselines_id = ev.baselines_id
        card.baselines_reported_at = ev.ts
        card.baselines_reported_in = ev.answer
        card.baselines_known_games = list(dict.fromkeys([*(card.baselines_known_games or ()), *ev.games]))
    elif t is CardOnServer:
        card.server = ev.server
        card.baselines_known_games = list(ev.local_games) or None
    elif t is CardRetracted:
        card.retracted_at = ev.ts
        card.retract_reason = ev.reason
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
