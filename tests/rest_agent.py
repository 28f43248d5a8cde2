"""A seeded agent that plays the toolkit's REST API over HTTP (any transport), for the REST and ONLINE tests.

It opens a card, starts several games (a second play of one when the server allows it), then sends random
actions: RESET bursts (two in a row), ACTION6 clicks near the test games' targets, actions after the end
(answered 400), and closes the card. ``send(path, body)`` returns (status, JSON answer).
"""

from __future__ import annotations

import random
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from tests import toolkit

ROOT = Path(__file__).resolve().parent.parent
LEDGER = [str(ROOT / ".venv" / "bin" / "ledger")]
KEY = {"X-API-Key": "agent-key-1"}

Send = Callable[[str, dict[str, Any]], tuple[int, Any]]

GAME_IDS = ["cnt3-0000000a", "clk2-0000000b", "wkex-0000000f", "nobl-0000000c", "shrt-0000000e", "nbas-0000000d"]


def _action(rng: random.Random, avail: list[int]) -> tuple[str, dict[str, Any]]:
    a = rng.choice([*avail, 1]) if avail else 1
    if a == 6:
        if rng.random() < 0.6:
            cx, cy = rng.choice([(2, 3), (5, 5)])
            return "ACTION6", {"x": cx * 8 + rng.randint(0, 7), "y": cy * 8 + rng.randint(0, 7)}
        return "ACTION6", {"x": rng.randint(0, 63), "y": rng.randint(0, 63)}
    return f"ACTION{a}", {}


def play(send: Send, seed: int, *, steps: int = 120, games: int = 3, api_close: bool = True) -> tuple[str, Any]:
    """Play one seeded card; return (card_id, the close answer's JSON, or None without ``api_close``)."""
    rng = random.Random(seed)
    status, body = send("/api/scorecard/open", {"tags": ["rest-agent", f"seed-{seed}"], "opaque": {"seed": seed}})
    assert status == 200, body
    card = body["card_id"]
    plays: list[dict[str, Any]] = []
    for gid in rng.sample(GAME_IDS, games):
        for _ in range(2 if rng.random() < 0.4 else 1):  # a second play of the game (a new guid)
            status, fr = send("/api/cmd/RESET", {"game_id": gid, "card_id": card})
            if status == 200:
                plays.append({"game_id": gid, "guid": fr["guid"], "avail": fr["available_actions"]})
    for _ in range(steps):
        p = rng.choice(plays)
        base = {"game_id": p["game_id"], "guid": p["guid"]}
        if rng.random() < 0.5:
            base["card_id"] = card
        r = rng.random()
        if r < 0.12:
            names = [("RESET", {}), ("RESET", {})] if r < 0.06 else [("RESET", {})]
        else:
            names = [_action(rng, p["avail"])]
        for name, extra in names:
            status, fr = send(f"/api/cmd/{name}", {**base, **extra})
            if status == 200:
                p["avail"] = fr["available_actions"]
    if not api_close:
        return card, None
    status, doc = send("/api/scorecard/close", {"card_id": card})
    assert status == 200, doc
    return card, doc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """``ledger serve`` on a free loopback port; returns the process and its base URL once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [*LEDGER, "--db", str(db), "serve", "--environments", str(toolkit.ENV_DIR), "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60  # a loaded machine takes 10 s and more to import and scan
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/api/healthcheck", timeout=1).ok:
                return proc, url
        except requests.ConnectionError:
            time.sleep(0.05)
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"server did not start: {proc.communicate()[1].decode()[-2000:]}")


def http_sender(url: str) -> Send:
    session = requests.Session()

    def send(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        r = session.post(url + path, json=body, headers=KEY, timeout=10)
        return r.status_code, r.json()

    return send


class Arcagi3Client:
    """Requests as joinplank/arc-agi-3-benchmarking's ``arcagi3`` GameClient and agent send them: a session with
    ``X-API-Key``, ``Accept`` and ``Content-Type`` headers; a RESET with ``card_id``, ``game_id`` and a string
    reasoning; every other action with ``game_id``, ``guid`` and a reasoning object whose ``"tokens:"`` is the run's
    running ``[prompt, completion]`` total (a stand-in model's tokens)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.session.headers.update(
            {"X-API-Key": "bench-key", "Accept": "application/json", "Content-Type": "application/json"}
        )
        self.prompt = self.completion = 0

    def send(self, path: str, body: dict[str, Any]) -> requests.Response:
        return self.session.post(self.url + path, json=body, timeout=20)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self.send(path, body)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def open(self, game: str, tags: list[str]) -> str:
        return str(self.post("/api/scorecard/open", {"game_ids": [game], "tags": tags})["card_id"])

    def reset(self, card: str, game: str) -> dict[str, Any]:
        body = {"card_id": card, "game_id": game, "reasoning": "Resetting the game to initial state"}
        return self.post("/api/cmd/RESET", body)

    def action1(self, game: str, guid: str, reasoning: dict[str, Any]) -> dict[str, Any]:
        reasoning["tokens:"] = [self.prompt, self.completion]
        return self.post("/api/cmd/ACTION1", {"game_id": game, "guid": guid, "reasoning": reasoning})
