"""A REST harness (the wire format of joinplank/arc-agi-3-benchmarking's ``arcagi3`` GameClient) against a real
``ledger serve`` on 127.0.0.1: what it sends with each action is kept, the ``scorecard_url`` it prints opens the
card's page, the cards it leaves open are named when the server stops, and the close answer it saved matches the
audit's hash.

The client (``tests.rest_agent.Arcagi3Client``) is written from that harness's requests: a session with
``X-API-Key``, ``Accept`` and ``Content-Type`` headers; a RESET carries ``card_id``, ``game_id`` and the string
reasoning ``"Resetting the game to initial state"``; every other action ``game_id``, ``guid`` (``x``/``y`` for
ACTION6) and a reasoning object whose ``"tokens:"`` is the run's cumulative ``[prompt, completion]`` tokens.
"""

from __future__ import annotations

import hashlib
import json
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from ledger import Ledger
from tests.cli_run import in_process
from tests.rest_agent import Arcagi3Client, start_server

GAME = "cnt3-0000000a"
OTHER = "clk2-0000000b"


class Harness(Arcagi3Client):
    def act(self, game: str, guid: str, n: int) -> dict[str, Any]:
        """Action ``n`` of a run: the model is called (tokens grow), then the action goes with its reasoning."""
        self.prompt += 1200 + 37 * n
        self.completion += 80 + n
        reasoning = {
            "analysis": f"step {n}: the grid looks the same",
            "action": "ACTION1",
            "human_action": "move up",
            "reasoning": "explore",
            "expected": "something moves",
        }
        sent = self.action1(game, guid, reasoning)
        sent["sent_reasoning"] = reasoning
        return sent


@dataclass
class Session:
    db: Path
    closed_card: str
    open_card: str
    close_answer: bytes
    sent: list[dict[str, Any]]
    oversized: requests.Response
    pages: dict[str, requests.Response] = field(default_factory=dict)
    stderr: str = ""
    returncode: int | None = None


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """One server lifetime: a card played and closed, one played and left open, the pages read, then Ctrl-C."""
    db = tmp_path_factory.mktemp("serve") / "served.sqlite"
    proc, url = start_server(db)
    try:
        h = Harness(url)
        card = h.open(GAME, ["bench", "model-x"])
        guid = h.reset(card, GAME)["guid"]
        sent = [h.act(GAME, guid, n) for n in range(1, 6)]
        # Over the toolkit's 16 KB guard for reasoning: refused by the server, nothing counted.
        oversized = h.send("/api/cmd/ACTION1", {"game_id": GAME, "guid": guid, "reasoning": {"x": "y" * 17000}})
        close = h.send("/api/scorecard/close", {"card_id": card})
        assert close.status_code == 200, close.text
        left = h.open(GAME, ["bench", "left-open"])
        other = h.reset(left, OTHER)["guid"]
        h.act(OTHER, other, 1)
        s = Session(db, card, left, close.content, sent, oversized)
        # The address the harness prints: f"{ROOT_URL}/scorecards/{card_id}", ROOT_URL pointed at the server.
        get = requests.Session()
        for name, path in {
            "closed": f"/scorecards/{card}",
            "open": f"/scorecards/{left}",
            "prefix": f"/scorecards/{card[:8]}",
            "unknown": "/scorecards/00000000-0000-0000-0000-000000000000",
            "list": "/scorecards/",
            "style": "/scorecards/static/viewer.css",
            "replay": f"/scorecards/replay?card={card}&game={GAME}&play=1",
            "api": f"/scorecards/api/card?id={card}",
        }.items():
            s.pages[name] = get.get(url + path, timeout=30)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    s.stderr, s.returncode = err.decode(), proc.returncode
    return s


def test_the_reasoning_sent_with_each_action_is_kept(session: Session) -> None:
    with Ledger.open(session.db) as led:
        taken = [e for e in led.store.read_stream(f"card:{session.closed_card}") if e.type == "action_taken"]
        assert len(taken) == 5  # the oversized one was refused before anything was counted
        kept = [json.loads(e.body)["reasoning"] for e in taken]
        assert kept == [s["sent_reasoning"] for s in session.sent]
        # The harness's usage at its last action: what a reader of the card derives it from.
        assert kept[-1]["tokens:"] == [sum(1200 + 37 * n for n in range(1, 6)), sum(80 + n for n in range(1, 6))]
        assert json.loads(led.export(session.closed_card)) == json.loads(session.close_answer)
    assert session.oversized.status_code == 400 and "reasoning exceeds 16384 bytes" in session.oversized.text


def test_the_printed_scorecard_url_opens_the_card_page(session: Session) -> None:
    page = session.pages["closed"]
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert session.closed_card in page.text and "model-x" in page.text
    assert session.pages["prefix"].status_code == 200 and session.closed_card in session.pages["prefix"].text
    assert session.pages["open"].status_code == 200 and session.open_card in session.pages["open"].text
    unknown = session.pages["unknown"]
    assert unknown.status_code == 404 and "00000000-0000-0000-0000-000000000000" in unknown.text
    # The page's relative links (the list, its style, replays, its refresh) resolve under /scorecards/.
    assert 'href="static/viewer.css"' in page.text and session.pages["style"].status_code == 200
    assert session.pages["list"].status_code == 200 and session.open_card in session.pages["list"].text
    assert session.pages["api"].status_code == 200 and session.pages["api"].json()["open"] is False
    replay = session.pages["replay"]
    assert replay.status_code == 200 and GAME in replay.text
    assert "the grid looks the same" not in replay.text  # reasoning stays off the pages anyone on the API reaches


def test_stopping_names_the_cards_left_open_and_how_they_close(session: Session) -> None:
    assert session.returncode == 130, session.stderr[-2000:]
    said = [ln for ln in session.stderr.splitlines() if ln.startswith("ledger serve: ")]
    assert said[-3] == "ledger serve: 1 card stays open in the ledger (the harness did not close them):"
    assert said[-2].startswith(f"ledger serve:   card {session.open_card}   games 1   actions 1   lapses (idle) at ")
    assert said[-1] == (
        "ledger serve: an open card reads as closed by the toolkit's auto-close once idle STALE_MINUTES=15 or open "
        "MAX_OPEN_FOR_MINUTES=4320 (marked lapsed; no close event is written); `ledger close CARD` records its "
        "close now"
    )
    assert not any(session.closed_card in ln for ln in said) and "Traceback" not in session.stderr


def test_audit_gives_the_hash_of_the_close_answer_as_sent(session: Session) -> None:
    db, card = str(session.db), session.closed_card
    r = in_process("--db", db, "audit", card, "--json")
    assert r.returncode == 0, r.stderr
    cons = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "consistency")
    with Ledger.open(session.db) as led:
        exported = led.export(card)
    assert cons["recorded_document_sha256"] == hashlib.sha256(exported.encode()).hexdigest()
    assert cons["close_answer_sha256"] == hashlib.sha256(session.close_answer).hexdigest()
    assert cons["close_answer_sha256"] != cons["recorded_document_sha256"]
    text = in_process("--db", db, "audit", card).stdout
    line = next(ln for ln in text.splitlines() if ln.startswith("PASS consistency: "))
    assert f"(sha256 {cons['recorded_document_sha256']} of the bytes `ledger export` prints)" in line
    assert (
        "the close answer `ledger serve` sent (the same document, keys sorted, compact, a newline at the end) hashes "
        f"to {hashlib.sha256(session.close_answer).hexdigest()}"
    ) in line
    # A card no REST server answered has no such hash, and the key is there all the same.
    left = in_process("--db", db, "audit", session.open_card, "--json")
    cons = next(c for c in json.loads(left.stdout)["checks"] if c["name"] == "consistency")
    assert cons["close_answer_sha256"] is None


def test_competition_pages_stay_hidden_while_the_card_is_open(tmp_path: Path) -> None:
    proc, url = start_server(tmp_path / "c.sqlite", "--competition")
    try:
        h = Harness(url)
        card = h.open(GAME, ["bench"])
        h.act(GAME, h.reset(card, GAME)["guid"], 1)
        hidden = requests.get(f"{url}/scorecards/{card}", timeout=30)
        listed = requests.get(f"{url}/scorecards/", timeout=30)
        api = requests.get(f"{url}/api/scorecard/{card}", headers={"X-API-Key": "bench-key"}, timeout=30)
        assert h.send("/api/scorecard/close", {"card_id": card}).status_code == 200
        shown = requests.get(f"{url}/scorecards/{card}", timeout=30)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert api.status_code == 403  # the toolkit's own rule, which the pages follow
    assert hidden.status_code == 403 and "hides a card until it is closed" in hidden.text
    assert listed.status_code == 403
    assert shown.status_code == 200 and card in shown.text
    assert proc.returncode == 130 and "stay open" not in err.decode() and "stays open" not in err.decode()
