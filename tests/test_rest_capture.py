"""The toolkit's REST server with the ledger attached: each card equals the one the server returns at close.

Driven over HTTP through Flask's test client (many seeds, normal and competition mode) and through a real
``ledger serve`` process on 127.0.0.1. Competition mode is where the ledger used to lose actions: a RESET on a
level with no action yet is not executed, the server re-applies the last observation straight on the card.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from arc_agi.server import create_app

from ledger import Ledger
from ledger.app.audit import audit_card
from tests import rest_agent, toolkit
from tests.rest_agent import KEY, LEDGER, http_sender, start_server


def flask_sender(client: Any) -> rest_agent.Send:
    def send(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        r = client.post(path, json=body, headers=KEY)
        return r.status_code, r.get_json()

    return send


def event_types(led: Ledger, card_id: str) -> list[str]:
    return [e.type for e in led.store.read_stream(f"card:{card_id}")]


@pytest.mark.parametrize(
    "competition", [False, pytest.param(True, marks=pytest.mark.heavy)], ids=["normal", "competition"]
)
def test_flask_client_cards_equal_the_close_response(ledger: Ledger, competition: bool) -> None:
    arc = toolkit.arcade()
    ledger.attach(arc)
    reapplied = 0
    for seed in range(8):
        # A competition server opens one card only: a fresh server (same Arcade) per card.
        app, _ = create_app(arc, competition_mode=competition)
        card, doc = rest_agent.play(flask_sender(app.test_client()), seed)
        assert json.loads(ledger.export(card)) == doc, f"seed {seed}"
        if seed < 3:  # every recorded input replays against the game code; re-applied ones move only the card
            rep = audit_card(ledger, card, environments=str(toolkit.ENV_DIR))
            assert rep.ok, [c.message for c in rep.checks if c.status == "FAIL"]
        types = event_types(ledger, card)
        reapplied += types.count("observation_reapplied")
        assert types[-2:] == ["server_document", "card_closed"] or types[-1] == "card_closed"
        if competition:
            assert doc["competition_mode"] is True
            assert len(doc["environments"]) == len(rest_agent.GAME_IDS)  # unplayed games made at close, 0 each
    # The runs did exercise the competition rule (and only there).
    assert (reapplied > 0) == competition


def test_competition_reset_burst_counts_as_the_server_counts(ledger: Ledger) -> None:
    """By hand: make (new play), RESET (re-applied RESET: 1 reset, 1 action), ACTION1 (1), RESET (level reset:
    1 reset, 1 action), RESET (re-applied RESET again: 1 reset, 1 action) -> 4 actions, 3 resets."""
    arc = toolkit.arcade()
    ledger.attach(arc)
    app, _ = create_app(arc, competition_mode=True)
    send = flask_sender(app.test_client())
    _, body = send("/api/scorecard/open", {})
    card = body["card_id"]
    _, fr = send("/api/cmd/RESET", {"game_id": "cnt3-0000000a", "card_id": card})
    g = {"game_id": "cnt3-0000000a", "guid": fr["guid"]}
    for name in ["RESET", "ACTION1", "RESET", "RESET"]:
        status, _ = send(f"/api/cmd/{name}", g)
        assert status == 200
    live = json.loads(ledger.export(card))
    status, doc = send("/api/scorecard/close", {"card_id": card})
    cnt3 = next(e for e in doc["environments"] if e["id"] == "cnt3-0000000a")
    assert (cnt3["actions"], cnt3["resets"]) == (4, 3)
    assert json.loads(ledger.export(card)) == doc
    # While open, the ledger's export already was the card the server gave at close (unplayed games at 0),
    # but for the guids the server drew for those games at close.
    for env in doc["environments"]:
        if env["id"] != "cnt3-0000000a":
            for run in env["runs"]:
                run.pop("guid")
    assert live == doc


@pytest.mark.parametrize("competition", [False, True], ids=["normal", "competition"])
@pytest.mark.heavy
def test_ledger_serve_subprocess_cards_equal_the_close_response(tmp_path: Path, competition: bool) -> None:
    db = tmp_path / "served.sqlite"
    proc, url = start_server(db, *(["--competition"] if competition else []))
    try:
        closes = [rest_agent.play(http_sender(url), seed=100 + i, steps=80) for i in range(1 if competition else 3)]
        if competition:  # the next run: the toolkit's server refuses a second card, and serve says why
            assert http_sender(url)("/api/scorecard/open", {"tags": ["next"]})[0] == 409
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err.decode()[-2000:]
    assert "serving 6 games on http://127.0.0.1" in err.decode()
    said = [ln for ln in err.decode().splitlines() if "answered 409" in ln]
    assert said == (
        [
            f"ledger serve: POST /api/scorecard/open answered 409: in competition mode the toolkit's server serves one "
            f"card per server lifetime and it has served its card (card {closes[0][0]}); start `ledger serve "
            "--competition` again for each run, or run one server per run, each on its own --port"
        ]
        if competition
        else []
    )
    with Ledger.open(db) as led:
        for card, doc in closes:
            assert json.loads(led.export(card)) == doc
            assert led.load_card(card).competition_mode is (True if competition else None)


def test_serve_refuses_a_folder_without_games(tmp_path: Path) -> None:
    r = subprocess.run(
        [*LEDGER, "--db", str(tmp_path / "x.sqlite"), "serve", "--environments", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "no games under" in r.stderr and "Traceback" not in r.stderr


def test_only_loopback_hosts_pass_without_a_warning() -> None:
    from ledger.cli.common import is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.10") and not is_loopback("example.org")


def test_serve_help_names_its_options() -> None:
    env = {**os.environ, "COLUMNS": "120"}
    out = subprocess.run([*LEDGER, "serve", "--help"], capture_output=True, text=True, env=env, timeout=60).stdout
    for opt in ("--environments", "--competition", "--host", "--port", "X-API-Key"):
        assert opt in out


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = ["serve", "--environments", str(toolkit.ENV_DIR), "--port", str(port)]
        r = subprocess.run(
            [*LEDGER, "--db", str(tmp_path / "x.sqlite"), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 2 and f"cannot serve on 127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr
