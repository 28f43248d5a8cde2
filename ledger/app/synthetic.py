"""Synthetic cards for scale measurements and tests, written through :meth:`Ledger.append_card`."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from ledger.domain.events import (
    ActionTaken,
    AnyEvent,
    BaselineEntry,
    CardClosed,
    CardOpened,
    GameOver,
    LevelCompleted,
    PlayStarted,
    Win,
)
from ledger.ledger import Ledger

GAMES = ("ls20-016295f7601e", "ft09-b8377d4b7815", "vc33-6ae7bf49eea5", "as66-821a4dcad9c2")
TAGS = ("agent-1", "agent-2", "agent-3", "nightly", "ablation")
START = datetime(2026, 1, 1, tzinfo=UTC)


def baselines(ledger: Ledger) -> str:
    return ledger.record_baselines(
        [BaselineEntry(game_id=g, baseline_actions=[8 + i, 12 + i, 20 + i]) for i, g in enumerate(GAMES)]
    )


def card_events(rng: random.Random, n: int, baselines_id: str, *, close: bool = True) -> Iterator[AnyEvent]:
    t = START + timedelta(minutes=n)
    tags = list(dict.fromkeys([TAGS[n % len(TAGS)], *([TAGS[3]] if n % 7 == 0 else [])]))
    yield CardOpened(ts=t, card_id=str(uuid.UUID(int=rng.getrandbits(128))), tags=tags, baselines_id=baselines_id)
    for game in rng.sample(GAMES, rng.randint(1, 2)):
        guid = str(uuid.UUID(int=rng.getrandbits(128)))
        yield PlayStarted(ts=t, game_id=game, guid=guid)
        levels = 0
        for actions in range(1, rng.randint(3, 8) + 1):
            t += timedelta(milliseconds=150)
            yield ActionTaken(
                ts=t, game_id=game, guid=guid, action=rng.randint(1, 6), levels_completed=levels, state="NOT_FINISHED"
            )
            if rng.random() < 0.25 and levels < 3:
                levels += 1
                yield LevelCompleted(ts=t, game_id=game, guid=guid, levels_completed=levels, actions=actions)
        yield (Win if levels == 3 else GameOver)(ts=t, game_id=game, guid=guid)
    if close:
        yield CardClosed(ts=t + timedelta(seconds=1), reason="explicit")


def write_cards(ledger: Ledger, count: int, *, seed: int = 0, per_step: bool = False, first: int = 0) -> list[str]:
    """Write ``count`` synthetic cards (one append per card, or per event with ``per_step``)."""
    rng = random.Random(seed)
    sid = baselines(ledger)
    ids = []
    for n in range(first, first + count):
        evs = list(card_events(rng, n, sid))
        first_event = evs[0]
        assert isinstance(first_event, CardOpened)
        card_id = first_event.card_id
        if per_step:
            for v, e in enumerate(evs):
                ledger.append_card(card_id, [e], v)
        else:
            ledger.append_card(card_id, evs, 0)
        ids.append(card_id)
    return ids
