"""A cold replay from joined bodies (``ledger.domain.replay``) equals the per-event fold; WAL checkpoints leave the
appending thread."""

from __future__ import annotations

import random
import sqlite3
import threading
from pathlib import Path

import msgspec
import pytest

from ledger import Ledger
from ledger.app import synthetic
from ledger.domain import chain
from ledger.domain.events import ActionTaken, PlayStarted, card_stream, decode
from ledger.domain.projection import fold
from ledger.domain.replay import ChunkMismatch, fold_joined
from ledger.errors import StoreError
from tests.toolkit import arcade, random_action, step

_state = msgspec.msgpack.Encoder()


def _played(path: Path, steps: int, seed: int, close: bool = True) -> str:
    """A card of random real play on two games (level resets, GAME_OVER, WIN, empty frames); returns its id."""
    rng = random.Random(seed)
    arc = arcade()
    with Ledger.open(path) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        envs = [arc.make(g, scorecard_id=card, seed=1) for g in ("cnt3", "clk2")]
        for _ in range(steps):
            env = rng.choice(envs)
            a, x, y = random_action(rng, env)
            step(env, a, x, y)
        if close:
            arc.close_scorecard(card)
    return card


def _per_event(led: Ledger, card: str, until: int | None = None) -> bytes:
    bodies, _, _ = led.store.read_bodies(card_stream(card), until_seq=until)
    return _state.encode(fold(card, (decode(b) for b in bodies)))


@pytest.mark.parametrize("chunk", [1, 7, 50_000])
def test_joined_replay_equals_the_per_event_fold(db_path: Path, chunk: int) -> None:
    card = _played(db_path, 400, seed=chunk)
    with Ledger.open(db_path) as led:
        stream = card_stream(card)
        chunks, version, seq = led.store.read_joined(stream, chunk=chunk)  # type: ignore[attr-defined]
        assert sum(n for _, n in chunks) == version == len(led.store.read_stream(stream))
        last = led.store.event_at(stream, version)
        assert last is not None and last.seq == seq
        state = fold_joined(card, chunks, last_event=lambda: decode(last.body))
        assert _state.encode(state) == _per_event(led, card)
        # Part of the card (``--until``) and what a cold load_card returns.
        rows = led.store.read_stream(stream)
        mid = rows[len(rows) // 2].seq
        part, v2, _ = led.store.read_joined(stream, until_seq=mid, chunk=chunk)  # type: ignore[attr-defined]
        ev = led.store.event_at(stream, v2)
        assert ev is not None
        assert _state.encode(fold_joined(card, part, last_event=lambda: decode(ev.body))) == _per_event(led, card, mid)
        led.store.drop_snapshots()
        assert _state.encode(led.load_card(card, use_cache=False)) == _per_event(led, card)


def test_an_open_card_ending_on_an_action_gets_that_actions_ts(db_path: Path) -> None:
    card = _played(db_path, 60, seed=3, close=False)
    with Ledger.open(db_path) as led:
        led.store.drop_snapshots()
        state = led.load_card(card, use_cache=False)
        assert _state.encode(state) == _per_event(led, card)
        assert state.last_ts == decode(led.store.read_stream(card_stream(card))[-1].body).ts


def test_a_body_that_is_not_one_event_is_reported_as_before(db_path: Path) -> None:
    card = _played(db_path, 30, seed=5, close=False)
    stream = card_stream(card)
    with Ledger.open(db_path) as led:
        head = led.store.read_stream(stream)[-1]
    # Two events in one stored body (written around the ledger): the joined chunk would decode one too many.
    body = head.body + b"\n" + head.body
    con = sqlite3.connect(db_path)
    v = head.version + 1
    h = chain.event_hash(head.hash, stream, v, head.type, body)
    con.execute(
        "INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (stream, v, head.type, head.ts, body, head.hash, h),
    )
    con.commit()
    con.close()
    with Ledger.open(db_path) as led:
        chunks, _, _ = led.store.read_joined(stream)  # type: ignore[attr-defined]
        with pytest.raises(ChunkMismatch):
            fold_joined(card, chunks, last_event=lambda: decode(head.body))
        # The facade falls back to decoding event by event, which refuses the body: one error a user can act on.
        with pytest.raises(StoreError, match=f"card {card} cannot be read: a stored event does not decode"):
            led.load_card(card, use_cache=False)


def test_checkpoints_run_off_the_appending_thread(db_path: Path) -> None:
    from ledger.store import sqlite as wal
    from ledger.store.base import Follower

    seen: list[str] = []
    real = Follower._run

    def spy(self: Follower) -> None:
        seen.append(threading.current_thread().name)
        real(self)

    Follower._run = spy  # type: ignore[method-assign]
    try:
        _played(db_path, wal.EVERY_COMMITS + 20, seed=9)
    finally:
        Follower._run = real  # type: ignore[method-assign]
    assert [n for n in seen if n != "ledger-summary-follower"] == ["ledger-wal-checkpoint"]
    con = sqlite3.connect(db_path)
    assert con.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000  # a plain connection: SQLite's default
    with Ledger.open(db_path) as led:
        assert led.store._write_dbapi().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == (  # type: ignore[attr-defined]
            wal.BACKSTOP_PAGES
        )
    con.close()


def test_one_commit_of_many_events_is_checkpointed_off_the_appending_thread(db_path: Path) -> None:
    # An import commits a card of thousands of events at once: counted by its pages, not as one commit, so its WAL
    # is checkpointed while the import goes on, not all at the close. A commit of a few events counts once.
    from ledger.store import sqlite as wal
    from ledger.store.base import Follower

    ran: list[str] = []
    real = Follower._run

    def spy(self: Follower) -> None:
        ran.append(self._name)
        real(self)

    Follower._run = spy  # type: ignore[method-assign]
    try:
        with Ledger.open(db_path) as led:
            events = list(synthetic.card_events(random.Random(1), 0, synthetic.baselines(led), close=False))
            card_id, play = events[0].card_id, events[1]  # type: ignore[union-attr]
            assert isinstance(play, PlayStarted)
            led.append_card(card_id, events, 0)
            assert "ledger-wal-checkpoint" not in ran
            n = wal.EVERY_COMMITS * wal.EVENTS_PER_PAGE
            more = [
                ActionTaken(
                    ts=play.ts, game_id=play.game_id, guid=play.guid, action=2, levels_completed=0, state="NOT_FINISHED"
                )
                for _ in range(n)
            ]
            led.append_card(card_id, more, len(events))
            assert "ledger-wal-checkpoint" in ran
    finally:
        Follower._run = real  # type: ignore[method-assign]


def test_a_long_range_read_ahead_by_a_second_thread_gives_the_same_chunks(db_path: Path) -> None:
    card = _played(db_path, 120, seed=11)
    stream = card_stream(card)
    with Ledger.open(db_path) as led:
        whole, version, seq = led.store.read_joined(stream, chunk=7)  # type: ignore[attr-defined]
        ahead, v2, s2 = led.store.iter_joined(stream, chunk=7)  # type: ignore[attr-defined]
        assert (list(ahead), v2, s2) == (whole, version, seq)
        # Abandoned after one chunk: the reader stops, and the store's own connection is free at once.
        ahead, _, _ = led.store.iter_joined(stream, chunk=7)  # type: ignore[attr-defined]
        assert next(iter(ahead)) == whole[0]
        ahead.close()
        assert led.store.count() >= version
        assert not [t for t in threading.enumerate() if t.name == "ledger-read-ahead"]
