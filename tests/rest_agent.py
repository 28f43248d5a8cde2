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
