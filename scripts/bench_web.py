"""Viewer figures: the card page of a 100,000-event card served by `ledger view`'s app next to `ledger export` of
the same card, and the card page's weight before data."""

from __future__ import annotations

import logging
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchlib import best, build_card, synthetic_plays

from ledger import Ledger
from ledger.web.pages import STATIC, LiveLinks
from ledger.web.server import create_app


def _serve(led: Ledger) -> tuple[Any, str]:
    """A fresh app (empty card cache) on a free port of 127.0.0.1, in a thread."""
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request in the figures
    server = make_server("127.0.0.1", 0, create_app(led, source="bench"), threaded=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/"


def _get(url: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as resp:
        body = resp.read()
    return time.perf_counter() - t, body


def _measure(db: Path, card_id: str, repeats: int) -> tuple[list[float], list[float], list[float], list[float], bytes]:
    """(export, cold page, warm page, poll) times of ``repeats`` runs, each page run on a new server."""
    url = LiveLinks().card(card_id)
    exports, cold, warm, polls = [], [], [], []
    body = b""
    with Ledger.open(db, readonly=True) as led:
        for _ in range(repeats):
            exports.append(best(lambda: led.export(card_id), 1)[0])
            server, base = _serve(led)
            try:
                dt, body = _get(base + url)
                cold.append(dt)
                warm.append(_get(base + url)[0])
                version = body.split(b'data-events="', 1)[1].split(b'"', 1)[0].decode()
                polls.append(_get(base + LiveLinks().api_card(card_id) + f"&since={version}")[0])
            finally:
                server.shutdown()
                server.server_close()
    return exports, cold, warm, polls, body


def page_figures(n_steps: int, repeats: int) -> list[str]:
    """Cold and warm card-page times next to export times, medians of ``repeats`` runs, without and with a cached
    projection."""
    plays = synthetic_plays(n_steps)
    lines = []
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "bench.sqlite"
        card_id = "bench-card-0000"
        with Ledger.open(db) as led:
            n_events = build_card(led, plays, card_id)
            led.store.drop_snapshots()
        lines.append(f"card of {n_events:,} events ({len(plays):,} steps), medians of {repeats} runs side by side:")
        for label in ("no cached projection", "writer's cached projection"):
            if label != "no cached projection":
                with Ledger.open(db) as led:
                    led.load_card(card_id)  # a read-write load past SNAPSHOT_AFTER events caches the projection
            exports, cold, warm, polls, body = _measure(db, card_id, repeats)
            ex, c, w, p = (statistics.median(x) for x in (exports, cold, warm, polls))
            lines.append(f" {label}:")
            lines.append(f"  ledger export (read-only):                  {ex * 1000:7.1f} ms")
            lines.append(f"  card page, cold (new server):               {c * 1000:7.1f} ms  ({c / ex:.2f}x export)")
            lines.append(f"  card page, warm (server's own cache):       {w * 1000:7.1f} ms  ({w / ex:.2f}x export)")
            lines.append(f"  live poll, nothing new (204):               {p * 1000:7.1f} ms")
        assets = sum(p.stat().st_size for p in STATIC.iterdir())
    shell = len(body.split(b'<div id="card-body"', 1)[0]) + len(body.rsplit(b"</main>", 1)[1])
    lines.append(
        f"card page weight before data: {(shell + assets) / 1024:.1f} KB (HTML shell {shell / 1024:.1f} KB + "
        f"viewer.js/viewer.css {assets / 1024:.1f} KB); with this card's data the HTML is {len(body) / 1024:.1f} KB"
    )
    return lines


def run(quick: bool) -> list[str]:
    return page_figures(5_000 if quick else 100_000, 3 if quick else 5)
