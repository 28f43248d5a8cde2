"""The translator: what the toolkit observed -> the events that record it, for live capture and imports alike. It
applies the toolkit's counting rules (see docs/scoring.md, 'From events to the counts'), keeping the card's projection
current so each decision sees the state the toolkit's scorecard would have."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from ledger.domain.calculators import resolve
from ledger.domain.events import (
    ActionIgnored,
    ActionTaken,
    AnyEvent,
    GameOver,
    LevelCompleted,
    LevelReset,
    ObservationReapplied,
    PlayStarted,
    State,
    Win,
)
from ledger.domain.projection import CardState, apply

GAME_ACTIONS = frozenset(range(1, 8))
RESET = 0


class Observation(msgspec.Struct, frozen=True):
    """One response the toolkit produced for a guid, reduced to what scoring needs."""

    # Not a frozen dataclass: built once per toolkit step, and its __init__ (a setattr per field) costs ~15x more.

    ts: datetime
    game_id: str
    guid: str
    action: int
    state: State
    levels_completed: int
    full_reset: bool
    frame_empty: bool
    x: int | None = None
    y: int | None = None
    reasoning: Any = None
    #: The REST server counted this observation again instead of executing the RESET sent (competition mode).
    reapplied: bool = False


def translate(card: CardState, obs: Observation, *, seed: int | None = None) -> list[AnyEvent]:
    """The events for ``obs`` given the card so far; ``card`` is advanced past them."""
    out: list[AnyEvent] = []

    def emit(e: AnyEvent) -> None:
        apply(card, e)
        out.append(e)

    if obs.reapplied and not obs.full_reset:
        return _reapplied(card, obs)
    ts, gid, guid = obs.ts, obs.game_id, obs.guid
    if obs.frame_empty and not resolve(card.calculator)[0].empty_frames_count:
        # Counts nothing on the scorecard; recorded only when there is a play it was wasted on.
        if obs.action in GAME_ACTIONS and card.play_for(gid, guid) is not None:
            emit(ActionIgnored(ts=ts, game_id=gid, guid=guid, action=obs.action, state=obs.state))
        return out
    started = card.play_for(gid, guid) is not None
    if obs.action == RESET:
        if obs.full_reset:
            emit(PlayStarted(ts=ts, game_id=gid, guid=guid, seed=seed))
            started = True
        elif started:
            emit(LevelReset(ts=ts, game_id=gid, guid=guid, levels_completed=obs.levels_completed, state=obs.state))
    elif obs.action in GAME_ACTIONS and started:
        emit(
            ActionTaken(
                ts=ts,
                game_id=gid,
                guid=guid,
                action=obs.action,
                x=obs.x,
                y=obs.y,
                levels_completed=obs.levels_completed,
                state=obs.state,
                reasoning=obs.reasoning,
            )
        )
    if not started:
        return out
    return _outcome(card, obs, out)


def _reapplied(card: CardState, obs: Observation) -> list[AnyEvent]:
    # Scorecard.update_scorecard on the card itself, whatever the frame: the server does not look at it.
    if card.play_for(obs.game_id, obs.guid) is None:
        return []
    if obs.action != RESET and obs.action not in GAME_ACTIONS:
        return _outcome(card, obs, [])  # no action on it: the scorecard counts none
    e = ObservationReapplied(
        ts=obs.ts,
        game_id=obs.game_id,
        guid=obs.guid,
        action=obs.action,
        levels_completed=obs.levels_completed,
        state=obs.state,
    )
    apply(card, e)
    return _outcome(card, obs, [e])


def _outcome(card: CardState, obs: Observation, out: list[AnyEvent]) -> list[AnyEvent]:
    # The play's state and level marks after the observation (GAME_OVER/WIN stick; a level change is marked).
    ts, gid, guid = obs.ts, obs.game_id, obs.guid

    def emit(e: AnyEvent) -> None:
        apply(card, e)
        out.append(e)

    play = card.play_for(gid, guid)
    assert play is not None
    if obs.state == "GAME_OVER" and play.state != "GAME_OVER":
        emit(GameOver(ts=ts, game_id=gid, guid=guid))
    elif obs.state == "WIN" and play.state != "WIN":
        emit(Win(ts=ts, game_id=gid, guid=guid))
    if obs.levels_completed != play.levels_completed:
        emit(LevelCompleted(ts=ts, game_id=gid, guid=guid, levels_completed=obs.levels_completed, actions=play.actions))
    return out
