"""``ledger view``: a Flask app over one ledger, opened read-only. Werkzeug runs a thread per request: the card cache
takes a lock, cached lists are replaced whole, and the store's connections are bounded."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlencode

import msgspec
from flask import Flask, Response, abort, jsonify, request

from ledger.app.checkpoints import covering_checkpoint, prove
from ledger.app.compare import Comparison, compare_cards, ledger_board
from ledger.app.progress import PER_TAG, tag_progress
from ledger.app.tag_stats import SIDE_BY_SIDE, TagReport, tag_report
from ledger.errors import AmbiguousCard, InputError, LedgerError, UnknownCard
from ledger.resim.frames import DEFAULT_LIMIT, palette_or_empty, play_frames
from ledger.store.summary import card_count, distinct_keys, retracted_count

from . import pages
from .data import PAGE_SIZE, CardCache, card_events, card_view, load, page_rows, usage_of

if TYPE_CHECKING:
    from ledger.app.listing import CardFilter

T = TypeVar("T")


class Viewer:
    """The pages and JSON endpoints over one read-only ledger (each method serves one route)."""

    def __init__(self, ledger: Any, environments: str | None, source: str, with_reasoning: bool) -> None:
        self.ledger = ledger
        self.environments = environments
        self.source = source
        self.with_reasoning = with_reasoning
        self.cache = CardCache(ledger)
        self.links = pages.LiveLinks()
        self.site = pages.Site(self.links, False, source)
        self.colours = palette_or_empty()
        self._held: dict[Hashable, tuple[int, Any]] = {}

    def _kept(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, kept per ``key`` until events are appended (the leaderboard, tag lists and tag figures)."""
        stamp = self.cache.stamp()
        held = self._held.get(key)
        if held is None or held[0] != stamp:
            if len(self._held) >= 32:
                self._held.clear()
            held = self._held[key] = (stamp, make())
        return cast(T, held[1])

    def message(self, title: str, text: str, **more: Any) -> str:
        return pages.message_page(title, text, links=self.links, source=self.source, **more)

    def cards(self) -> str:
        """One page of cards (``?tag=``, ``?game=``, ``?sort=``, ``?after=``, ``?limit=``, ``?retracted=1``)."""
        f = _page_filter()
        rows = page_rows(self.ledger, f)
        stamp = self.cache.stamp()
        tags, games = self._lists()
        from ledger.app.listing import count_cards

        matching = count_cards(self.ledger, f)
        total = card_count(self.ledger.store, include_retracted=f.include_retracted)
        return pages.cards_page(
            rows,
            self.site,
            stamp=stamp,
            hidden=0 if f.include_retracted else retracted_count(self.ledger.store),
            shown_href=None if f.include_retracted else "/?retracted=1",
            next_url=_next_url(rows, f),
            all_tags=tags,
            all_games=games,
            covers=pages.Covers(shown=len(rows), matching=matching, total=total, after=f.after),
            chosen={k: request.args.get(k, "") for k in ("tag", "game", "sort", "state", "from")},
        )

    def leaderboard(self) -> str:
        board, total = self._kept("board", lambda: (ledger_board(self.ledger), card_count(self.ledger.store)))
        return pages.leaderboard_page(board.rows, self.site, total=total, calculator=board)

    def _lists(self) -> tuple[list[str], list[str]]:
        # Every tag and game id: a loose scan of the keys table's index.
        store = self.ledger.store
        return self._kept("keys", lambda: (distinct_keys(store, "t"), distinct_keys(store, "g")))

    def api_cards(self) -> Any:
        """The cards table's rows, unless nothing was appended since ``?since=``."""
        stamp = self.cache.stamp()
        if request.args.get("since") == str(stamp):
            return Response(status=204)
        html = pages.card_rows_fragment(page_rows(self.ledger, _page_filter()), links=self.links)
        return jsonify({"stamp": stamp, "html": html})

    def card(self) -> str:
        return self.card_of(_arg("id"))

    def card_of(self, ref: str) -> str:
        state, doc, version = load(self.cache, self.ledger.resolve_card(ref))
        view = card_view(state, doc, usage_of(self.cache, state.card_id))
        covered = covering_checkpoint(self.ledger, state.card_id) is not None
        evidence = self.links.evidence(state.card_id) if covered else None
        return pages.card_page(view, self.site, version=version, evidence=evidence)

    def evidence(self) -> Any:
        card_id = self.ledger.resolve_card(_arg("card"))
        note = covering_checkpoint(self.ledger, card_id)
        if note is None:
            return self.message("No evidence", f"no signed checkpoint covers card {card_id} yet"), 404
        name = f"evidence-{pages.slug(card_id)}.json"
        return Response(
            prove(self.ledger, card_id, note),
            mimetype="application/json",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    def api_card(self) -> Any:
        """The card page's body, unless the card has no event after version ``?since=``."""
        state, doc, version = load(self.cache, self.ledger.resolve_card(_arg("id")))
        if request.args.get("since") == str(version):
            return Response(status=204)
        html = pages.card_body_fragment(card_view(state, doc, usage_of(self.cache, state.card_id)), links=self.links)
        return jsonify({"events": version, "open": not state.closed, "html": html})

    def _report(self, tags: list[str]) -> TagReport:
        retracted = _flag("retracted")
        return self._kept((tuple(tags), retracted), lambda: tag_report(self.ledger, tags, include_retracted=retracted))

    def _chosen(self) -> tuple[list[str], list[str], Comparison]:
        """The cards of ``?card=``, the tags of ``?tag=``, and those cards side by side."""
        ids = request.args.getlist("card")
        if len(dict.fromkeys(ids)) > SIDE_BY_SIDE:
            raise InputError(
                f"at most {SIDE_BY_SIDE} cards side by side ({len(dict.fromkeys(ids))} chosen): tag them and "
                "compare the tag's figures"
            )
        cmp = compare_cards(self.ledger, ids, include_retracted=_flag("retracted"), hint=_RETRACTED_HINT)
        return ids, [t for t in request.args.getlist("tag") if t], cmp

    def compare(self) -> str:
        """The figures of every card of ``?tag=`` and the cards of ``?card=`` side by side."""
        ids, tags, cmp = self._chosen()
        report = self._report(tags) if tags else None
        all_tags = self._lists()[0]
        return pages.compare_page(
            cmp,
            self.site,
            all_tags=all_tags,
            chosen_tags=tags,
            chosen_cards=ids,
            report=report,
        )

    def api_compare(self) -> Any:
        ids, tags, cmp = self._chosen()
        body: Any = cmp
        if tags:
            report = self._report(tags)
            body = {**msgspec.to_builtins(report), "side_by_side": msgspec.to_builtins(cmp) if ids else None}
        return Response(msgspec.json.encode(body), mimetype="application/json")

    def progress(self) -> str:
        """Each tag's card scores over time (``?tag=``, ``?limit=``, ``?before=``)."""
        tags = [t for t in request.args.getlist("tag") if t]
        limit = max(1, min(_int_arg("limit", PER_TAG), 1000))
        prog = tag_progress(self.ledger, tags, limit=limit, before=request.args.get("before") or None)
        drawn = tags or [s.tag for s in prog.series]
        shown_limit = None if limit == PER_TAG else limit
        return pages.progress_page(
            prog,
            self.site,
            all_tags=self._lists()[0],
            chosen_tags=drawn,
            older_href=self.links.progress(drawn, prog.older, shown_limit) if prog.older else None,
            newest_href=self.links.progress(drawn, None, shown_limit) if prog.before else None,
        )

    def replay(self) -> Any:
        ref, game_id = _arg("card"), _arg("game")
        play, start = _int_arg("play", 1), _int_arg("start", 0)
        card_id = self.ledger.resolve_card(ref)
        state, _ = self.cache.get(card_id)
        plays = len(state.games.get(game_id, []))
        if not 1 <= play <= plays:
            what = f"game {game_id!r}" if not plays else f"play {play} of game {game_id!r} (it has {plays})"
            back = (self.links.card(card_id), f"back to card {card_id}")
            page = self.message("Not found", f"card {card_id} has no {what}", back=back)
            return Response(page, status=404, mimetype="text/html")
        frames = play_frames(
            card_events(self.ledger, card_id),
            game_id,
            play,
            self.environments,
            start=start,
            with_reasoning=self.with_reasoning,
        )
        end = start + len(frames.steps)
        return pages.replay_page(
            card_id,
            frames,
            self.colours,
            self.site,
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


def create_app(
    ledger: Any,
    *,
    environments: str | None = None,
    source: str = "",
    with_reasoning: bool = True,
    card_ids_at_root: bool = False,
) -> Flask:
    """The viewer app over a read-only ``ledger``; ``card_ids_at_root``: also a card at ``/<card id>`` (for serve)."""
    app = Flask("ledger.web", static_folder=str(pages.STATIC), static_url_path="/static")
    viewer = Viewer(ledger, environments, source, with_reasoning)
    app.after_request(_headers)
    app.register_error_handler(UnknownCard, lambda e: (viewer.message("Not found", str(e)), 404))
    app.register_error_handler(
        AmbiguousCard, lambda e: (viewer.message("Which card?", str(e), candidates=e.candidates), 400)
    )
    app.register_error_handler(InputError, lambda e: (viewer.message("Cannot show that", str(e)), 400))
    app.register_error_handler(LedgerError, lambda e: (viewer.message("The ledger could not be read", str(e)), 500))
    for rule, view in [
        ("/", viewer.cards),
        ("/api/cards", viewer.api_cards),
        ("/card", viewer.card),
        ("/api/card", viewer.api_card),
        ("/compare", viewer.compare),
        ("/api/compare", viewer.api_compare),
        ("/progress", viewer.progress),
        ("/leaderboard", viewer.leaderboard),
        ("/replay", viewer.replay),
        ("/evidence", viewer.evidence),
    ]:
        app.add_url_rule(rule, view.__name__, view, methods=["GET"])
    if card_ids_at_root:
        # The fixed routes above are matched before this one: no card id can shadow a page.
        app.add_url_rule("/<ref>", "card_of", viewer.card_of, methods=["GET"])
    return app


_RETRACTED_HINT = "add &retracted=1 to the address to show it"


def _flag(name: str) -> bool:
    return request.args.get(name, "") not in ("", "0")


#: The cards page's ``?sort=`` values: the summary's sort key and whether it is descending.
SORTS = {"date-desc": ("opened", True), "date-asc": ("opened", False), "score-desc": ("score", True)}
SORTS["score-asc"] = ("score", False)


def _page_filter() -> CardFilter:
    from ledger.app.listing import CardFilter

    sort, descending = SORTS.get(request.args.get("sort", "date-desc"), SORTS["date-desc"])
    state = request.args.get("state") or None
    if state not in (None, "open", "closed"):
        raise InputError(f"?state= is open or closed, not {state!r}")
    since = None
    if request.args.get("from"):
        try:
            since = datetime.fromisoformat(request.args["from"]).replace(tzinfo=UTC)
        except ValueError:
            raise InputError(f"?from= is a date (YYYY-MM-DD), not {request.args['from']!r}") from None
    return CardFilter(
        tags=tuple(t for t in request.args.getlist("tag") if t),
        games=tuple(g for g in request.args.getlist("game") if g),
        state=state,  # type: ignore[arg-type]
        since=since,
        sort=sort,  # type: ignore[arg-type]
        reverse=descending,
        limit=max(1, min(_int_arg("limit", PAGE_SIZE), 1000)),
        after=request.args.get("after") or None,
        include_retracted=_flag("retracted"),
    )


def _next_url(rows: list[Any], f: CardFilter) -> str | None:
    if f.limit is None or len(rows) < f.limit:
        return None
    args = [(k, v) for k, v in request.args.items(multi=True) if k != "after"] + [("after", rows[-1].card_id)]
    return "?" + urlencode(args)


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
    """Serve ``app`` on host:port (0: any free port), ``on_ready(url)`` once listening, until Ctrl-C or shut down."""
    from werkzeug.serving import make_server

    server = make_server(host, port, app, threaded=True)
    shown = f"[{host}]" if ":" in host else host
    if on_ready is not None:
        on_ready(f"http://{shown}:{server.server_port}/")
    try:
        server.serve_forever()
    finally:
        server.server_close()
