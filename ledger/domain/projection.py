"""The projection: fold a card's events into its plays, mirroring ``arc_agi.scorecard.Card``/``Scorecard``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, assert_never

import msgspec

from ledger.domain.events import (
    ActionIgnored,
    ActionsInferred,
    ActionTaken,
    AnyEvent,
    BaselinesAttached,
    BaselinesRecorded,
    BaselinesReported,
    CaptureContext,
    CardClosed,
    CardOnServer,
    CardOpened,
    CardReopened,
    CardRetracted,
    FramesNoted,
    GameOver,
    LabelSet,
    LevelCompleted,
    LevelReset,
    LinesSkipped,
    ObservationReapplied,
    PlayStarted,
    RecordingImported,
    RequestFailed,
    RunUsage,
    ServerDocument,
    State,
    Win,
)


class Play(msgspec.Struct):
    guid: str
    levels_completed: int = 0
    state: State = "NOT_FINISHED"
    actions: int = 0
    resets: int = 0
    #: The toolkit's ``actions_by_level`` for this play: (levels_completed, action count when it changed).
    marks: list[tuple[int, int]] = msgspec.field(default_factory=list)
    seed: int | None = None
    #: Actions sent after GAME_OVER/WIN (empty frames): the toolkit counts none; the post-mortem reports them.
    actions_after_end: int = 0
    started_at: datetime | None = None


# CardOpened's fields come first: the state keeps what the event said, and the two stay two types (log vs fold).
class CardState(msgspec.Struct):
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
    #: In the order games were first played (the toolkit's dict order).
    games: dict[str, list[Play]] = msgspec.field(default_factory=dict)
    events: int = 0
    #: Competition cards: the server's games, in its order (each is made at close if never played).
    environments: list[str] | None = None
    requests_failed: int = 0
    server_document: dict[str, Any] | None = None
    captured_via: str | None = None
    capture_tags: list[str] | None = None
    retracted_at: datetime | None = None
    retract_reason: str | None = None
    #: The ARC server the card lives on (ONLINE/COMPETITION capture); None for a card of the toolkit's own.
    server: str | None = None
    #: When and in which answer (``close``/``scorecard``) the server last revealed baselines (BaselinesReported).
    baselines_reported_at: datetime | None = None
    baselines_reported_in: str | None = None
    #: Games with baselines known on a server card: from local game files at open, or revealed since.
    baselines_known_games: list[str] | None = None
    baselines_attached_at: datetime | None = None
    calculator: str | None = None
    calculator_source: str | None = None

    @property
    def all_tags(self) -> list[str]:
        """The card's own tags, then those given to ``serve``/``record``, once each (what filters match)."""
        return list(dict.fromkeys([*(self.tags or ()), *(self.capture_tags or ())]))

    @property
    def closed(self) -> bool:
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
        return sum(p.actions for plays in self.games.values() for p in plays)


def new_card(card_id: str) -> CardState:
    return CardState(card_id=card_id)


def _action_taken(play: Play | None) -> None:
    if play is not None:
        play.actions += 1


def apply(card: CardState, e: AnyEvent) -> None:
    """Fold one event into ``card`` (in place); exhaustive (``assert_never``) over every event type."""
    card.events += 1
    card.last_ts = e.ts
    match e:
        case ActionTaken():
            _action_taken(card.play_for(e.game_id, e.guid))
        case PlayStarted():
            card.games.setdefault(e.game_id, []).append(Play(guid=e.guid, seed=e.seed, started_at=e.ts))
        case LevelCompleted():
            if (p := card.play_for(e.game_id, e.guid)) is not None:
                p.marks.append((e.levels_completed, p.actions))
                p.levels_completed = e.levels_completed
        case LevelReset():
            if (p := card.play_for(e.game_id, e.guid)) is not None:
                p.resets += 1
                p.actions += 1
        case GameOver():
            if (p := card.play_for(e.game_id, e.guid)) is not None:
                p.state = "GAME_OVER"
        case Win():
            if (p := card.play_for(e.game_id, e.guid)) is not None:
                p.state = "WIN"
        case ActionIgnored():
            if (p := card.play_for(e.game_id, e.guid)) is not None:
                p.actions_after_end += 1
        case CardOpened():
            card.card_id = e.card_id
            card.source_url = e.source_url
            card.tags = e.tags
            card.opaque = e.opaque
            card.competition_mode = e.competition_mode
            card.baselines_id = e.baselines_id
            card.environments = e.environments
            card.opened_at = e.ts
            card.calculator = e.calculator
            card.calculator_source = e.calculator_source
        case CardClosed():
            card.closed_at = e.ts
            card.close_reason = e.reason
            card.close_document_sha256 = e.document_sha256
        case ObservationReapplied():
            # The server counted its last observation again: one action, and one reset if it was a RESET.
            if (p := card.play_for(e.game_id, e.guid)) is not None:
                p.actions += 1
                if e.action == 0:
                    p.resets += 1
        case RequestFailed():
            card.requests_failed += 1
        case ServerDocument():
            card.server_document = e.document
        case CaptureContext():
            card.captured_via = e.via
            card.capture_tags = e.tags
        case BaselinesAttached():
            card.baselines_id = e.baselines_id
            card.baselines_attached_at = e.ts
        # Each event sets the fields of its own kind; alike in shape only (attached by hand vs revealed by a server).
        case BaselinesReported():
            card.baselines_id = e.baselines_id
            card.baselines_reported_at = e.ts
            card.baselines_reported_in = e.answer
            card.baselines_known_games = list(dict.fromkeys([*(card.baselines_known_games or ()), *e.games]))
        case CardOnServer():
            card.server = e.server
            card.baselines_known_games = list(e.local_games) or None
        case CardRetracted():
            card.retracted_at = e.ts
            card.retract_reason = e.reason
        case CardReopened():
            card.closed_at = None
            card.close_reason = None
            card.close_document_sha256 = None
        case (
            BaselinesRecorded()
            | LabelSet()
            | RecordingImported()
            | LinesSkipped()
            | ActionsInferred()
            | FramesNoted()
            | RunUsage()
        ):
            # Facts beside the card's counts (baseline sets, labels, import progress and provenance, usage): read
            # where they are used, nothing of the card's state changes.
            pass
        case _:
            assert_never(e)


def fold(card_id: str, events: Iterable[AnyEvent], card: CardState | None = None) -> CardState:
    """Fold ``events`` onto ``card`` or a new card; runs of actions on one play skip the play lookup."""
    c = card if card is not None else new_card(card_id)
    last_key: tuple[str, str] | None = None
    last_play: Play | None = None
    n = 0
    for e in events:
        if type(e) is ActionTaken:
            key = (e.game_id, e.guid)
            if key != last_key:
                last_key, last_play = key, c.play_for(e.game_id, e.guid)
            _action_taken(last_play)
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
