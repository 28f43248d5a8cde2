"""ONLINE and COMPETITION clients: the ledger records, client-side, the card that lives on the server.

The toolkit's own REST server (``create_app``) on 127.0.0.1 stands in for the ARC server, in a thread (with a WSGI
layer that keeps the bytes of every close answer and can answer 500) or as a ``ledger serve`` process killed
mid-run. The client is a real ``Arcade(operation_mode=ONLINE|COMPETITION, arc_base_url=...)`` playing through the
toolkit's ``RemoteEnvironmentWrapper``.
"""

from __future__ import annotations

import json
import logging
import random
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
from arc_agi import Arcade, OperationMode
from arc_agi.server import create_app
from arcengine import GameAction
from werkzeug.serving import make_server

from ledger import Ledger
from ledger.app.audit import audit_card
from ledger.errors import CaptureError
from ledger.rules.text import replay_text
from tests import toolkit
from tests.rest_agent import start_server

API_KEY = "online-key-1"
_quiet = logging.getLogger("tests.online")
_quiet.setLevel(logging.CRITICAL)


class Server:
    """A toolkit REST server on 127.0.0.1 in a thread; ``fault(path, n)`` decides a 500 for the nth cmd request."""

    def __init__(self, competition: bool = False) -> None:
        self.arcade = toolkit.arcade()
        self.app, _ = create_app(self.arcade, competition_mode=competition)
        self.closes: dict[str, Any] = {}
        self.fault: Callable[[str, int], str | None] = lambda path, n: None
        self.cmds = 0
        self.http = make_server("127.0.0.1", 0, self.wsgi, threaded=True)
        self.url = f"http://127.0.0.1:{self.http.server_port}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ["PATH_INFO"]
        fault = None
        if path.startswith("/api/cmd/"):
            self.cmds += 1
            fault = self.fault(path, self.cmds)
        if fault == "before":  # refused before the game saw it: the server counted nothing
            start_response("500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")])
            return [b"boom"]
        captured: dict[str, Any] = {}

        def keep(status: str, headers: list[Any], exc_info: Any = None) -> Any:
            captured["status"], captured["headers"] = status, headers
            return lambda _b: None

        body = b"".join(self.app(environ, keep))
        if fault == "after":  # the server counted it, then the answer was lost
            start_response("500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")])
            return [b"lost"]
        if path == "/api/scorecard/close" and captured["status"].startswith("200"):
            doc = json.loads(body)
            self.closes[doc["card_id"]] = doc
        start_response(captured["status"], captured["headers"])
        return [body]

    def stop(self) -> None:
        self.http.shutdown()
        self.thread.join(5)


@contextmanager
def server(competition: bool = False) -> Iterator[Server]:
    s = Server(competition)
    try:
        yield s
    finally:
        s.stop()


def client(url: str, mode: OperationMode) -> Arcade:
    """A remote-mode Arcade; it also scans the test games' metadata.json, so it knows their baselines."""
    return Arcade(
        arc_api_key=API_KEY,
        arc_base_url=url,
        operation_mode=mode,
        environments_dir=str(toolkit.ENV_DIR),
        logger=_quiet,
    )


def play(arc: Arcade, card: str, seed: int, games: list[str], steps: int = 60) -> list[Any]:
    """A seeded agent through the toolkit's wrappers: RESET bursts, clicks, a second play of a game."""
    rng = random.Random(seed)
    envs = [arc.make(g, scorecard_id=card) for g in games]
    if arc.operation_mode == OperationMode.ONLINE and rng.random() < 0.7:
        envs.append(arc.make(games[0], scorecard_id=card))  # a second play (another guid)
    envs = [e for e in envs if e is not None]
    for _ in range(steps):
        env = rng.choice(envs)
        r = rng.random()
        if r < 0.12:
            env.step(GameAction.RESET)
            if r < 0.06:
                env.step(GameAction.RESET)
            continue
        a, x, y = toolkit.random_action(rng, env)
        toolkit.step(env, a, x, y)
    return envs


@pytest.mark.parametrize(
    "mode",
    [OperationMode.ONLINE, pytest.param(OperationMode.COMPETITION, marks=pytest.mark.heavy)],
    ids=["online", "competition"],
)
def test_remote_cards_equal_the_servers_at_close(ledger: Ledger, mode: OperationMode) -> None:
    reapplied = 0
    for seed in range(4):
        with server() as srv:
            arc = client(srv.url, mode)
            ledger.attach(arc)
            card = arc.open_scorecard(tags=["online-test"])
            rng = random.Random(seed)
            play(arc, card, seed, rng.sample(toolkit.GAMES, 3))
            live = json.loads(ledger.export(card))
            arc.close_scorecard(card)
            server_doc = srv.closes[card]
        assert json.loads(ledger.export(card)) == server_doc, f"seed {seed}"
        c = ledger.load_card(card)
        assert c.closed and c.server_document == server_doc
        assert c.competition_mode is (True if mode == OperationMode.COMPETITION else None)
        reapplied += [e.type for e in ledger.store.read_stream(f"card:{card}")].count("observation_reapplied")
        rep = audit_card(ledger, card, environments=str(toolkit.ENV_DIR))
        server_check = next(x for x in rep.checks if x.name == "server")
        assert server_check.status == "PASS", server_check.message
        assert rep.ok, [x.message for x in rep.checks if x.status == "FAIL"]
        if mode == OperationMode.COMPETITION:
            # Nothing was played after the live export: it was the final card, but for the guids the server
            # drew at close for the games never played.
            played = set(c.games) - {e["id"] for e in server_doc["environments"] if e["actions"] == 0}
            for env in server_doc["environments"]:
                if env["id"] not in played and env["actions"] == 0:
                    env["runs"][0].pop("guid")
            assert live == server_doc
            assert len(server_doc["environments"]) == len(toolkit.GAMES)
    assert (reapplied > 0) == (mode == OperationMode.COMPETITION)


def test_competition_card_is_hidden_by_the_server_but_not_by_the_ledger(ledger: Ledger) -> None:
    with server() as srv:
        arc = client(srv.url, OperationMode.COMPETITION)
        ledger.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        assert env is not None
        for a in (GameAction.RESET, GameAction.ACTION1, GameAction.ACTION1, GameAction.ACTION1):
            env.step(a)
        with pytest.raises(requests.HTTPError) as info:
            arc.get_scorecard(card)
        assert info.value.response.status_code == 403
        live = json.loads(ledger.export(card))
        # By hand: make (a new play), RESET on the untouched level re-applied (1 reset, 1 action), then 3 x ACTION1
        # (cnt3 at seed 0 needs 2 presses for level 1): 4 actions, 1 reset, 1 level.
        cnt3 = next(e for e in live["environments"] if e["id"].startswith("cnt3"))
        assert (cnt3["actions"], cnt3["resets"], cnt3["levels_completed"]) == (4, 1, 1)
        assert live["total_environments"] == len(toolkit.GAMES)
        arc.close_scorecard(card)
        assert json.loads(ledger.export(card)) == srv.closes[card]


def test_server_answering_500_counts_nothing_the_ledger_did_not_see_answered(ledger: Ledger) -> None:
    with server() as srv:
        srv.fault = lambda path, n: "before" if n % 5 == 0 else None
        arc = client(srv.url, OperationMode.ONLINE)
        ledger.attach(arc)
        card = arc.open_scorecard()
        play(arc, card, 7, ["cnt3", "clk2"], steps=50)
        arc.close_scorecard(card)
        doc = srv.closes[card]
    assert json.loads(ledger.export(card)) == doc
    failed = [e for e in ledger.store.read_stream(f"card:{card}") if e.type == "request_failed"]
    statuses = sorted(json.loads(e.body)["status"] for e in failed)
    # Every 5th command refused with 500; the 400s answer actions sent after GAME_OVER/WIN (no frame to give).
    assert statuses.count(500) == srv.cmds // 5 and set(statuses) <= {400, 500}
    assert ledger.load_card(card).requests_failed == len(failed)


def test_lost_answer_makes_the_audit_name_the_first_difference(ledger: Ledger) -> None:
    with server() as srv:
        # The 4th command is counted by the server but its answer is lost: the ledger cannot count it.
        srv.fault = lambda path, n: "after" if n == 4 else None
        arc = client(srv.url, OperationMode.ONLINE)
        ledger.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        assert env is not None
        for a in (GameAction.ACTION2, GameAction.ACTION2, GameAction.ACTION2, GameAction.ACTION2):
            env.step(a)
        arc.close_scorecard(card)
    rep = audit_card(ledger, card)
    check = next(x for x in rep.checks if x.name == "server")
    assert check.status == "FAIL"
    assert "first at environments[0].runs[0].actions: ledger 3, server 4" in check.message
    assert "1 request(s) failed" in check.message


@pytest.mark.heavy
def test_killed_server_leaves_an_open_card_that_counts_what_was_answered(ledger: Ledger, tmp_path: Path) -> None:
    proc, url = start_server(tmp_path / "server-side.sqlite")
    try:
        arc = client(url, OperationMode.ONLINE)
        ledger.attach(arc)
        card = arc.open_scorecard()
        envs = play(arc, card, 11, ["cnt3", "wkex"], steps=40)
        last = requests.get(f"{url}/api/scorecard/{card}", headers={"X-API-Key": API_KEY}, timeout=10).json()
        before = ledger.load_card(card).requests_failed  # 400s: actions sent after GAME_OVER/WIN
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        for env in envs:
            assert env.step(GameAction.ACTION1) is None  # the toolkit's own answer to a dead server
        with pytest.raises(requests.ConnectionError):
            arc.close_scorecard(card)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    c = ledger.load_card(card)
    assert not c.closed and c.requests_failed == before + len(envs) + 1
    assert json.loads(ledger.export(card)) == last
    failed = [json.loads(e.body) for e in ledger.store.read_stream(f"card:{card}") if e.type == "request_failed"]
    assert all("ConnectionError" in f["error"] for f in failed[before:])
    assert all(f["status"] == 400 for f in failed[:before])
    text = replay_text(c, ledger.document(card))
    assert f"{c.requests_failed} request(s) to the server failed; none of them counted" in text
    assert failed[-1]["request"] == "close"


def test_the_api_key_is_never_stored(ledger: Ledger) -> None:
    with server() as srv:
        arc = client(srv.url, OperationMode.ONLINE)
        ledger.attach(arc)
        card = arc.open_scorecard()
        play(arc, card, 3, ["cnt3"], steps=10)
        arc.close_scorecard(card)
    bodies = b"".join(e.body for e in ledger.store.read_stream(f"card:{card}"))
    assert API_KEY.encode() not in bodies and b"sha256$" in bodies


def test_a_failed_write_reaches_the_agent_after_the_servers_answer(ledger: Ledger) -> None:
    with server() as srv:
        arc = client(srv.url, OperationMode.ONLINE)
        ledger.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        assert env is not None
        env.step(GameAction.ACTION2)
        before = ledger.store.read_stream(f"card:{card}")
        ledger.store._write_dbapi().execute("PRAGMA query_only=ON")  # the database refuses writes from here on
        with pytest.raises(CaptureError, match="readonly"):
            env.step(GameAction.ACTION2)
        assert ledger.store.read_stream(f"card:{card}") == before
        ledger.store._write_dbapi().execute("PRAGMA query_only=OFF")
        assert env.observation_space is not None and env.observation_space.action_input.id == GameAction.ACTION2
        env.step(GameAction.ACTION2)
        arc.close_scorecard(card)
        doc = srv.closes[card]
    # The server counted the step the ledger could not record; the audit names the difference.
    assert next(e for e in doc["environments"] if e["id"].startswith("cnt3"))["actions"] == 3
    assert ledger.load_card(card).games["cnt3-0000000a"][0].actions == 2
    check = next(x for x in audit_card(ledger, card).checks if x.name == "server")
    assert check.status == "FAIL" and "ledger 2, server 3" in check.message
