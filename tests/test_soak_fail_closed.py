"""``ledger serve`` fails closed: a request the ledger could not record is never answered 200, nor is its card.

The toolkit's own Flask app (``arc_agi.server.create_app``) with the ledger attached as ``ledger serve`` attaches it
(``raise_errors=False`` and :class:`~ledger.capture.rest.FailClosed`), on each backend. The database refuses writes
for a while on the very connection every append goes through (SQLite ``PRAGMA query_only``, PostgreSQL
``default_transaction_read_only``); the real subprocess with a really full disk is in ``test_soak_serve.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from arc_agi.server import create_app

from ledger import Ledger
from ledger.capture.rest import CARD_INCOMPLETE, NOT_RECORDED, FailClosed
from ledger.errors import UnknownCard
from tests import toolkit
from tests.rest_agent import KEY

pytestmark = pytest.mark.heavy


def refuse_writes(led: Ledger, backend: str, on: bool) -> None:
    """Make the database refuse (or accept again) every write made through the store's writer connection."""
    con = led.store._write_dbapi()  # type: ignore[attr-defined]
    if backend == "sqlite":
        con.execute(f"PRAGMA query_only={'ON' if on else 'OFF'}")
    else:
        con.execute(f"SET default_transaction_read_only = {'on' if on else 'off'}")
        con.commit()


class Served:
    """The toolkit's REST app over an attached Arcade, guarded as ``ledger serve`` guards it."""

    def __init__(self, led: Ledger) -> None:
        self.led = led
        self.arc = toolkit.arcade()
        led.attach(self.arc, raise_errors=False)
        self.said: list[str] = []
        self.guard = FailClosed(led.repository, self.arc, on_refusal=self.said.append)
        app, _ = create_app(self.arc)
        self.guard.install(app)
        self.client = app.test_client()

    def send(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        r = self.client.post(path, json=body, headers=KEY)
        return r.status_code, r.get_json()

    def get(self, path: str) -> tuple[int, Any]:
        r = self.client.get(path, headers=KEY)
        return r.status_code, r.get_json()

    def open_and_play(self, game: str, steps: int = 3) -> tuple[str, dict[str, str]]:
        status, body = self.send("/api/scorecard/open", {"tags": ["fail-closed"]})
        assert status == 200, body
        card = body["card_id"]
        status, fr = self.send("/api/cmd/RESET", {"game_id": game, "card_id": card})
        assert status == 200, fr
        play = {"game_id": game, "guid": fr["guid"]}
        for _ in range(steps):
            assert self.send("/api/cmd/ACTION1", play)[0] == 200
        return card, play

    def server_actions(self, card: str) -> int:
        sc = self.arc.scorecard_manager.get_scorecard(card, KEY["X-API-Key"])
        assert sc is not None
        return sum(sum(play.actions) for play in sc.cards.values())

    def is_open_on_server(self, card: str) -> bool:
        return card in self.arc.scorecard_manager.scorecards


@pytest.fixture
def served(backend_ledger: Ledger) -> Iterator[Served]:
    s = Served(backend_ledger)
    try:
        yield s
    finally:
        s.guard.uninstall()


def check_refused(answer: tuple[int, Any], status: int, error: str, card: str | None, *says: str) -> None:
    code, body = answer
    assert code == status, body
    assert body["error"] == error and body["card_id"] == card and body["recorded"] is False
    for text in ("not recorded", *says):
        assert text in body["message"], body["message"]


def test_a_step_the_ledger_could_not_record_is_an_error_and_its_card_stays_incomplete(
    served: Served, backend: str
) -> None:
    led = served.led
    cause = "readonly database" if backend == "sqlite" else "read-only transaction"
    a, play_a = served.open_and_play("cnt3-0000000a")
    b, play_b = served.open_and_play("wkex-0000000f")

    refuse_writes(led, backend, True)
    check_refused(served.send("/api/cmd/ACTION1", play_a), 503, NOT_RECORDED, a, cause, "carried it out")
    check_refused(served.send("/api/cmd/ACTION2", {**play_b, "card_id": b}), 503, NOT_RECORDED, b, cause)
    # An opening that failed: the card is closed again on the server, and is not in the ledger.
    opened = served.send("/api/scorecard/open", {})
    check_refused(opened, 503, NOT_RECORDED, opened[1]["card_id"], cause, "closed card")
    lost = opened[1]["card_id"]
    assert not served.is_open_on_server(lost)
    refuse_writes(led, backend, False)

    # The database writes again; the two cards stay incomplete: every request on them is refused before the
    # server carries it out (by guid, by card_id, by URL), and says why.
    actions = served.server_actions(a)
    for answer in (
        served.send("/api/cmd/ACTION1", play_a),
        served.send("/api/cmd/RESET", {"game_id": "cnt3-0000000a", "card_id": a}),
        served.get(f"/api/scorecard/{a}"),
        served.get(f"/api/scorecard/{a}/cnt3-0000000a"),
    ):
        check_refused(answer, 500, CARD_INCOMPLETE, a, "incomplete in the ledger", cause, "refused")
    assert served.server_actions(a) == actions

    # Another card is recorded as usual, and its close answer is what the ledger exports.
    c, _ = served.open_and_play("clk2-0000000b")
    status, doc = served.send("/api/scorecard/close", {"card_id": c})
    assert status == 200 and json.loads(led.export(c)) == doc

    # Closing an incomplete card closes it on the server; the answer is still an error, and the ledger retracts it.
    for card in (a, b):
        check_refused(served.send("/api/scorecard/close", {"card_id": card}), 500, CARD_INCOMPLETE, card, "retracted")
        assert not served.is_open_on_server(card)
        state = led.load_card(card)
        assert state.retracted_at is not None and state.retract_reason is not None
        assert "incomplete" in state.retract_reason and cause in state.retract_reason
    with pytest.raises(UnknownCard):
        led.load_card(lost)
    assert not led.load_card(c).retracted_at
    # Each refusal was said once, on the server's side too.
    assert sum("answered 503" in line for line in served.said) == 3
    assert sum("answered 500" in line for line in served.said) == 6


def test_a_close_the_ledger_could_not_record_is_never_200(served: Served, backend: str) -> None:
    led = served.led
    card, _ = served.open_and_play("cnt3-0000000a", steps=5)
    refuse_writes(led, backend, True)
    check_refused(served.send("/api/scorecard/close", {"card_id": card}), 503, NOT_RECORDED, card)
    assert not served.is_open_on_server(card)  # the server did close it
    assert led.load_card(card).closed_at is None  # the ledger did not
    refuse_writes(led, backend, False)
    # Asked again once the database writes: still an error (the server no longer has the card), and now retracted.
    check_refused(served.send("/api/scorecard/close", {"card_id": card}), 500, CARD_INCOMPLETE, card, "retracted")
    assert led.load_card(card).retracted_at is not None
    # Cards opened from now on are recorded as usual.
    fine, _ = served.open_and_play("cnt3-0000000a")
    status, doc = served.send("/api/scorecard/close", {"card_id": fine})
    assert status == 200 and json.loads(led.export(fine)) == doc
