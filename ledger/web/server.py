"""``ledger view``: a Flask app over one ledger, opened read-only.

Flask comes with the toolkit (``arc-agi`` depends on it) and brings Jinja2 and Werkzeug; the app is served by
Werkzeug's server in one thread, which serializes the card cache (the store's connections are bounded whatever the
threads: see :mod:`ledger.storage.connections`).
Requests are short (an open card's page asks every second whether events were appended: one indexed query).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from flask import Flask, Response, abort, jsonify, request

from ledger.errors import LedgerError, UnknownCard
from ledger.services.compare import compare_cards, leaderboard
from ledger.toolkit.frames import DEFAULT_LIMIT, palette_or_empty, play_frames

from . import pages
from .data import CardCache, card_events, card_rows, card_view, column_of, load

STATIC = Path(__file__).resolve().parent / "static"


class Viewer:
    """The pages and JSON endpoints over one read-only ledger (each method serves one route)."""

    def __init__(self, ledger: Any, environments: str | None, source: str) -> None:
        self.ledger = ledger
        self.environments = environments
        self.source = source
        self.cache = CardCache(ledger)
        self.links = pages.LiveLinks()
        self.colours = palette_or_empty()

    def message(self, title: str, text: str) -> str:
        """A page that only says something."""
        return pages.message_page(title, text, links=self.links, source=self.source)

    def cards(self) -> str:
        """Every card, with the leaderboard by tag."""
        rows = card_rows(self.cache)
        board = leaderboard([column_of(r) for r in rows])
        stamp = self.cache.stamp()
        return pages.cards_page(
            rows, links=self.links, bundle=False, source=self.source, stamp=stamp, leaderboard=board
        )

    def api_cards(self) -> Any:
        """The cards table's rows, unless nothing was appended since ``?since=``."""
        stamp = self.cache.stamp()
        if request.args.get("since") == str(stamp):
            return Response(status=204)
        html = pages.card_rows_fragment(card_rows(self.cache), links=self.links)
        return jsonify({"stamp": stamp, "html": html})

    def card(self) -> str:
        """One card's page."""
        state, doc, version = load(self.cache, _arg("id"))
        view = card_view(state, doc)
        return pages.card_page(view, version=version, links=self.links, bundle=False, source=self.source)

    def api_card(self) -> Any:
        """The card page's body, unless the card has no event after version ``?since=``."""
        state, doc, version = load(self.cache, _arg("id"))
        if request.args.get("since") == str(version):
            return Response(status=204)
        html = pages.card_body_fragment(card_view(state, doc), links=self.links)
        return jsonify({"events": version, "open": not state.closed, "html": html})

    def _chosen(self) -> tuple[list[str], list[str]]:
        return request.args.getlist("card"), [t for t in request.args.getlist("tag") if t]

    def compare(self) -> str:
        """The cards of ``?card=`` and every card of ``?tag=``, side by side."""
        ids, tags = self._chosen()
        cmp = compare_cards(self.ledger, ids, tags)
        all_tags = sorted({t for r in card_rows(self.cache) for t in r.tags})
        return pages.compare_page(
            cmp,
            links=self.links,
            bundle=False,
            source=self.source,
            all_tags=all_tags,
            chosen_tags=tags,
            chosen_cards=ids,
        )

    def api_compare(self) -> Any:
        """The comparison as JSON (the same as ``ledger compare --json``)."""
        ids, tags = self._chosen()
        return Response(msgspec.json.encode(compare_cards(self.ledger, ids, tags)), mimetype="application/json")

    def replay(self) -> str:
        """A play's frames, re-simulated, from step ``?start=``."""
        card_id, game_id = _arg("card"), _arg("game")
        play, start = _int_arg("play", 1), _int_arg("start", 0)
        frames = play_frames(card_events(self.ledger, card_id), game_id, play, self.environments, start=start)
        end = start + len(frames.steps)
        return pages.replay_page(
            card_id,
            frames,
            self.colours,
            links=self.links,
            bundle=False,
            source=self.source,
            prev_href=self.links.replay(card_id, game_id, play, max(0, start - DEFAULT_LIMIT)) if start else None,
            next_href=self.links.replay(card_id, game_id, play, end)
            if frames.steps and end < frames.total_steps
            else None,
        )


def _headers(resp: Response) -> Response:
    resp.headers["Content-Security-Policy"] = pages.CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    if not request.path.startswith("/static/"):
        resp.headers["Cache-Control"] = "no-store"
    return resp


def create_app(ledger: Any, *, environments: str | None = None, source: str = "") -> Flask:
    """The viewer app over an open (read-only) ``ledger``; replays use the game files under ``environments``."""
    app = Flask("ledger.web", static_folder=str(STATIC), static_url_path="/static")
    viewer = Viewer(ledger, environments, source)
    app.after_request(_headers)
    app.register_error_handler(UnknownCard, lambda e: (viewer.message("Not found", str(e)), 404))
    app.register_error_handler(LedgerError, lambda e: (viewer.message("The ledger could not be read", str(e)), 500))
    for rule, view in [
        ("/", viewer.cards),
        ("/api/cards", viewer.api_cards),
        ("/card", viewer.card),
        ("/api/card", viewer.api_card),
        ("/compare", viewer.compare),
        ("/api/compare", viewer.api_compare),
        ("/replay", viewer.replay),
    ]:
        app.add_url_rule(rule, view.__name__, view, methods=["GET"])
    return app


def _arg(name: str) -> str:
    value = request.args.get(name)
    if not value:
        abort(400, f"missing ?{name}=")
    return value


def _int_arg(name: str, default: int) -> int:
    try:
        value = int(request.args.get(name, default))
    except ValueError:
        abort(400, f"?{name}= must be a whole number")
    if value < 0:
        abort(400, f"?{name}= must not be negative")
    return value


def run(app: Flask, host: str, port: int, on_ready: Any = None) -> None:
    """Serve ``app`` on host:port (port 0: any free port); ``on_ready(url)`` once listening.

    Returns when interrupted (Werkzeug's server swallows the KeyboardInterrupt of Ctrl-C) or shut down.
    """
    from werkzeug.serving import make_server

    server = make_server(host, port, app, threaded=False)
    shown = f"[{host}]" if ":" in host else host
    if on_ready is not None:
        on_ready(f"http://{shown}:{server.server_port}/")
    try:
        server.serve_forever()
    finally:
        server.server_close()
