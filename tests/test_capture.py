"""Live capture: what it records, that it changes nothing the toolkit returns, and that failures reach the agent."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from ledger import Ledger
from ledger.domain.events import ActionTaken, CardClosed, CardOpened, PlayStarted, card_stream, decode
from ledger.errors import CaptureError
from tests.toolkit import arcade, random_action, step


def events_of(led: Ledger, card: str) -> list:
    return [decode(r.body) for r in led.store.read_stream(card_stream(card))]


def script(env_name: str, seed: int, attached: Path | None) -> list[tuple]:
    arc = arcade()
    if attached is not None:
        Ledger.open(attached).attach(arc)
    card = arc.open_scorecard()
    env = arc.make(env_name, scorecard_id=card, seed=seed)
    rng = random.Random(seed)
    out = []
    for _ in range(120):
        a, x, y = random_action(rng, env)
        f = step(env, a, x, y)
        out.append((f.state, f.levels_completed, f.full_reset, [np.asarray(layer).tolist() for layer in f.frame]))
    return out


@pytest.mark.parametrize("game", ["cnt3", "clk2"])
def test_capture_changes_nothing_the_toolkit_returns(tmp_path: Path, game: str) -> None:
    assert script(game, 3, None) == script(game, 3, tmp_path / "l.sqlite")


def test_what_a_card_records(ledger: Ledger) -> None:
    arc = arcade()
    ledger.attach(arc, record_reasoning=True)
    card = arc.open_scorecard(tags=["exp-1"], opaque={"agent": "a"})
    env = arc.make("cnt3", scorecard_id=card, seed=3)
    env.step(__import__("arcengine").GameAction.ACTION1, reasoning={"why": "count"})
    arc.close_scorecard(card)
    evs = events_of(ledger, card)
    assert [type(e).__name__ for e in evs] == ["CardOpened", "PlayStarted", "ActionTaken", "CardClosed"]
    opened, started, action, closed = evs
    assert isinstance(opened, CardOpened) and opened.tags == ["exp-1"] and opened.opaque == {"agent": "a"}
    assert opened.api_key_fingerprint is None  # OFFLINE: no key
    assert isinstance(started, PlayStarted) and started.seed == 3 and started.game_id == "cnt3-0000000a"
    assert isinstance(action, ActionTaken) and action.reasoning == {"why": "count"} and action.levels_completed == 0
    assert isinstance(closed, CardClosed) and closed.reason == "explicit" and len(closed.document_sha256 or "") == 64
    baselines = ledger.baselines(opened.baselines_id or "")
    assert baselines["cnt3-0000000a"].baseline_actions == [2, 3, 2]


def test_reasoning_is_not_kept_unless_asked(ledger: Ledger) -> None:
    from arcengine import GameAction

    arc = arcade()
    ledger.attach(arc)
    card = arc.open_scorecard()
    arc.make("cnt3", scorecard_id=card).step(GameAction.ACTION1, reasoning={"secret": "plan"})
    assert all(getattr(e, "reasoning", None) is None for e in events_of(ledger, card))


def test_api_key_is_never_stored(tmp_path: Path) -> None:
    key = "arc-key-5b1f0d2e9c7a"
    arc = arcade(arc_api_key=key)
    path = tmp_path / "k.sqlite"
    with Ledger.open(path) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        step(arc.make("cnt3", scorecard_id=card), 1)
        exported = led.export(card)
        fp = next(e for e in events_of(led, card) if isinstance(e, CardOpened)).api_key_fingerprint
    assert fp is not None and fp.startswith("sha256$") and key not in fp
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert key.encode() not in raw and key not in exported


def test_close_reasons(ledger: Ledger) -> None:
    arc = arcade()
    ledger.attach(arc)
    mgr = arc.scorecard_manager
    idle, old, explicit = arc.open_scorecard(), arc.open_scorecard(), arc.open_scorecard()
    for c in (idle, old, explicit):
        step(arc.make("cnt3", scorecard_id=c), 1)
    now = datetime.now(UTC)
    mgr.scorecards[idle].last_update = now - timedelta(minutes=16)
    mgr.scorecards[old].open_at = now - timedelta(minutes=4321)
    # What the toolkit's server cleanup loop does for stale cards:
    mgr.close_scorecard(idle, None)
    mgr.close_scorecard(old, None)
    arc.close_scorecard(explicit)
    reasons = {c: ledger.load_card(c).close_reason for c in (idle, old, explicit)}
    assert reasons == {idle: "idle", old: "max_open", explicit: "explicit"}


def test_a_failed_write_reaches_the_agent_and_nothing_is_half_written(ledger: Ledger) -> None:
    arc = arcade()
    ledger.attach(arc)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    step(env, 1)
    before = ledger.store.read_stream(card_stream(card))
    ledger.store._write_dbapi().execute("PRAGMA query_only=ON")  # the database refuses writes from here on
    with pytest.raises(CaptureError, match="readonly"):
        step(env, 1)
    assert ledger.store.read_stream(card_stream(card)) == before
    ledger.store._write_dbapi().execute("PRAGMA query_only=OFF")
    step(env, 2)
    # The toolkit counted the step that failed to record; the ledger has what it acknowledged.
    toolkit_actions = arc.scorecard_manager.scorecards[card].cards["cnt3-0000000a"].actions[0]
    assert toolkit_actions == 3
    assert ledger.load_card(card).games["cnt3-0000000a"][0].actions == 2


def test_threads_sharing_one_arcade(ledger: Ledger) -> None:
    """The agents' swarm: one thread per game, one card, one Arcade."""
    arc = arcade()
    ledger.attach(arc)
    card = arc.open_scorecard()
    envs = [arc.make(g, scorecard_id=card, seed=i) for i, g in enumerate(["cnt3", "clk2", "wkex", "cnt3"])]
    errors: list[BaseException] = []

    def agent(i: int) -> None:
        rng = random.Random(i)
        try:
            for _ in range(150):
                a, x, y = random_action(rng, envs[i])
                step(envs[i], a, x, y)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(len(envs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ledger.export(card) == arc.get_scorecard(card).model_dump_json()
    assert arc.close_scorecard(card).model_dump_json() == ledger.export(card)
