"""The Ledger facade's writing side: ``append``/``append_card`` and the snapshot policy, in one place."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger import Ledger, VersionConflict
from ledger.domain.events import ActionTaken, AnyEvent, CardClosed, CardOpened, PlayStarted, card_stream
from ledger.domain.projection import fold
from ledger.ledger import SNAPSHOT_EVERY

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _actions(n: int) -> list[AnyEvent]:
    return [
        ActionTaken(ts=T0, game_id="dm01-00000001", guid="g", action=1, levels_completed=0, state="NOT_FINISHED")
        for _ in range(n)
    ]


def test_append_card_caches_a_long_card_and_a_closed_one(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.sqlite") as led:
        opening: list[AnyEvent] = [
            CardOpened(ts=T0, card_id="c"),
            PlayStarted(ts=T0, game_id="dm01-00000001", guid="g"),
        ]
        state = fold("c", opening)
        wrote = led.append_card("c", opening, 0, state=state)
        assert [e.version for e in wrote.stored] == [1, 2] and not wrote.cached
        assert led.cached_card("c") is None

        # Fewer than SNAPSHOT_EVERY events since the last snapshot: nothing cached.
        few = _actions(SNAPSHOT_EVERY - 3)
        fold("c", few, state)
        assert not led.append_card("c", few, 2, state=state).cached
        # The event that makes SNAPSHOT_EVERY since version 0: the card as it stands is cached.
        one = _actions(1)
        fold("c", one, state)
        wrote = led.append_card("c", one, SNAPSHOT_EVERY - 1, state=state)
        assert wrote.cached and wrote.stored[-1].version == SNAPSHOT_EVERY
        cached = led.cached_card("c")
        assert cached is not None and cached[0] == SNAPSHOT_EVERY
        assert cached[1] == led.load_card("c", use_cache=False)

        # A close is always cached, however few events followed the last snapshot.
        closed: list[AnyEvent] = [CardClosed(ts=T0, reason="explicit")]
        fold("c", closed, state)
        assert led.append_card("c", closed, SNAPSHOT_EVERY, state=state, cached_version=SNAPSHOT_EVERY).cached
        cached = led.cached_card("c")
        assert cached is not None and cached[0] == SNAPSHOT_EVERY + 1 and cached[1].closed


def test_append_card_without_state_caches_nothing_and_conflicts_write_nothing(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.sqlite") as led:
        led.append_card("c", [CardOpened(ts=T0, card_id="c"), CardClosed(ts=T0, reason="explicit")], 0)
        assert led.cached_card("c") is None
        with pytest.raises(VersionConflict):
            led.append(card_stream("c"), _actions(1), expected_version=1)
        assert led.load_card("c").events == 2
