"""The pages, rendered by Jinja2 for the live server and the static bundle alike. Autoescaping is on for every template:
whatever the ledger holds reaches the page as text, or JSON via ``tojson``."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlencode

import msgspec
from jinja2 import Environment, PackageLoader, select_autoescape

from ledger.app.compare import Comparison, letter
from ledger.app.progress import TREND_CARDS, Progress
from ledger.app.tag_stats import SIDE_BY_SIDE, TagReport
from ledger.resim.frames import PlayFrames

from .data import CardRow, CardView

#: The pages' assets: served by the viewer, copied into a bundle.
STATIC = Path(__file__).resolve().parent / "static"
#: The policy every page runs under: only the package's own script and style, no inline script, nothing remote.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: The bundle opens from file://, where 'self' matches no file: only scripts and styles from file: URLs run.
BUNDLE_CSP = "default-src 'none'; script-src file:; style-src file:; img-src data:; base-uri 'none'; form-action 'none'"

_env = Environment(
    loader=PackageLoader("ledger.web", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


class LiveLinks:
    """The server's URLs (relative, so the app can sit behind any prefix)."""

    def cards(self) -> str:
        return "./"

    def card(self, card_id: str) -> str:
        return "card?" + urlencode({"id": card_id})

    def compare_all(self) -> str:
        return "compare"

    def compare(self, card_ids: Sequence[str] = (), tags: Sequence[str] = ()) -> str:
        return "compare?" + urlencode([("card", c) for c in card_ids] + [("tag", t) for t in tags])

    def progress_all(self) -> str:
        return "progress"

    def leaderboard(self) -> str:
        return "leaderboard"

    def progress(self, tags: Sequence[str], before: str | None = None, limit: int | None = None) -> str:
        q = [("tag", t) for t in tags] + ([("before", before)] if before else [])
        return "progress?" + urlencode(q + ([("limit", str(limit))] if limit else []))

    def replay(self, card_id: str, game_id: str, play: int, start: int = 0) -> str:
        q = [("card", card_id), ("game", game_id), ("play", str(play))] + ([("start", str(start))] if start else [])
        return "replay?" + urlencode(q)

    def evidence(self, card_id: str) -> str:
        return "evidence?" + urlencode({"card": card_id})

    def static(self, name: str) -> str:
        return "static/" + name

    def api_card(self, card_id: str) -> str:
        return "api/card?" + urlencode({"id": card_id})


def slug(text: str) -> str:
    """A file-name-safe form of any id: its safe characters, then a short hash so different ids never collide."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", text)[:48]
    return f"{safe}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


class BundleLinks:
    def cards(self) -> str:
        return "index.html"

    def card(self, card_id: str) -> str:
        return f"card-{slug(card_id)}.html"

    def compare_all(self) -> str:
        return "compare.html"

    def progress_all(self) -> str:
        return "progress.html"

    def leaderboard(self) -> str:
        return "index.html#leaderboard"

    def replay(self, card_id: str, game_id: str, play: int, start: int = 0) -> str:
        return f"replay-{slug(card_id)}-{slug(game_id)}-{play}.html"

    def evidence(self, card_id: str) -> str:
        return f"evidence-{slug(card_id)}.json"

    def static(self, name: str) -> str:
        return "static/" + name

    def api_card(self, card_id: str) -> str:
        return ""  # no server, no live updates


Links = LiveLinks | BundleLinks


#: Pages that draw charts load the vendored uPlot (README "Viewer" says why that library).
CHART_PAGES = frozenset({"compare", "progress"})
#: Cards drawn on a game's levels chart (the table under it shows every compared card).
CHART_CARDS = 20


class Site(NamedTuple):
    """What every page is rendered with: where pages live, whether it is the bundle, the ledger it shows."""

    links: Links
    bundle: bool
    source: str


def _render(page: str, site: Site, *, title: str | None = None, **ctx: Any) -> str:
    return _env.get_template(f"{page}.html").render(
        **site._asdict(), csp=BUNDLE_CSP, charts=page in CHART_PAGES, page=page, title=title or page, **ctx
    )


class Covers(msgspec.Struct, frozen=True):
    """What a page of cards covers: its rows, the cards its filters match, the cards in the ledger."""

    shown: int
    matching: int
    total: int
    after: str | None = None


def cards_page(
    rows: Sequence[CardRow],
    site: Site,
    *,
    stamp: int,
    leaderboard: Sequence[Any] = (),
    hidden: int = 0,
    shown_href: str | None = None,
    next_url: str | None = None,
    all_tags: Sequence[str],
    all_games: Sequence[str],
    covers: Covers | None = None,
    chosen: dict[str, str] | None = None,
) -> str:
    """The cards page: one page of rows, the filter controls, and the leaderboard by tag when given (the bundle's)."""
    return _render(
        "cards",
        site,
        rows=rows,
        stamp=stamp,
        all_tags=all_tags,
        all_games=all_games,
        leaderboard=leaderboard,
        hidden=hidden,
        shown_href=shown_href,
        next_url=next_url,
        covers=covers,
        chosen=chosen or {},
    )


def leaderboard_page(board: Sequence[Any], site: Site, *, total: int = 0, calculator: Any = None) -> str:
    """The leaderboard by tag of the whole ledger (``calculator``: a :class:`ledger.app.compare.Board`)."""
    return _render("leaderboard", site, leaderboard=board, board_calc=calculator, total=total)


def card_rows_fragment(rows: Sequence[CardRow], *, links: Links) -> str:
    return _env.get_template("_cards_rows.html").render(rows=rows, links=links, bundle=False)


def card_page(view: CardView, site: Site, *, version: int, evidence: str | None = None) -> str:
    return _render("card", site, title=f"card {view.row.card_id}", view=view, version=version, evidence=evidence)


def card_body_fragment(view: CardView, *, links: Links) -> str:
    return _env.get_template("_card_body.html").render(view=view, links=links, bundle=False)


def compare_page(
    cmp: Comparison,
    site: Site,
    *,
    all_tags: Sequence[str] = (),
    chosen_tags: Sequence[str] = (),
    chosen_cards: Sequence[str] = (),
    report: TagReport | None = None,
    side_of: int = 0,
) -> str:
    """The compare page: the chosen tags' figures and the chosen cards side by side."""
    return _render(
        "compare",
        site,
        cmp=cmp,
        letters=[letter(i) for i in range(len(cmp.cards))],
        level_charts=level_charts(cmp),
        chart_cards=min(len(cmp.cards), CHART_CARDS),
        leaderboard=cmp.leaderboard,
        all_tags=all_tags,
        chosen_tags=list(chosen_tags),
        chosen_cards=list(chosen_cards),
        report=report,
        side_by_side=SIDE_BY_SIDE,
        side_of=side_of,
        cards_href=cards_href,
    )


def cards_href(tag: str, game_id: str | None) -> str:
    q = [("tag", tag)] + ([("game", game_id)] if game_id else []) + [("sort", "score-desc")]
    return "./?" + urlencode(q)


def level_charts(cmp: Comparison) -> list[dict[str, Any]]:
    """Per game, what its levels chart draws: each level's baseline, and for the first :data:`CHART_CARDS` cards'
    best play the actions of each completed level and, apart, those spent on the level it stopped on."""
    out = []
    for g in cmp.games:
        baseline = [g.baseline(lv) for lv in range(g.levels)]
        cards = []
        for i, e in enumerate(g.cards[:CHART_CARDS]):
            if e is None:
                continue
            pad = [None] * (g.levels - len(e.levels))
            cards.append(
                {
                    "card": cmp.cards[i].card_id,
                    "n": i,
                    "letter": letter(i),
                    "actions": [lv.actions if lv.completed else None for lv in e.levels] + pad,
                    "unfinished": [lv.actions if not lv.completed and lv.actions else None for lv in e.levels] + pad,
                    "completed": [lv.completed for lv in e.levels] + pad,
                }
            )
        out.append({"game": g.game_id, "levels": list(range(1, g.levels + 1)), "baseline": baseline, "cards": cards})
    return out


def progress_page(
    prog: Progress,
    site: Site,
    *,
    all_tags: Sequence[str] = (),
    chosen_tags: Sequence[str] = (),
    older_href: str | None = None,
    newest_href: str | None = None,
) -> str:
    return _render(
        "progress",
        site,
        prog=prog,
        payload={**msgspec.to_builtins(prog), "trend_cards": TREND_CARDS},
        all_tags=all_tags,
        chosen_tags=list(chosen_tags),
        older_href=older_href,
        newest_href=newest_href,
        trend_cards=TREND_CARDS,
    )


def replay_page(
    card_id: str,
    frames: PlayFrames,
    palette: Sequence[str],
    site: Site,
    *,
    prev_href: str | None = None,
    next_href: str | None = None,
) -> str:
    payload = {"palette": list(palette), "frames": msgspec.to_builtins(frames)}
    return _render(
        "replay",
        site,
        title=f"replay {frames.game_id} play {frames.play}",
        card_id=card_id,
        frames=frames,
        payload=payload,
        prev_href=prev_href,
        next_href=next_href,
    )


def message_page(
    title: str,
    text: str,
    *,
    links: Links,
    source: str,
    candidates: Sequence[str] = (),
    back: tuple[str, str] | None = None,
) -> str:
    """A page that only says something (an unknown card, a bad address), with the cards an ambiguous prefix names."""
    return _render(
        "message",
        Site(links, False, source),
        title=title,
        text=text,
        candidates=list(candidates),
        back=back,
    )
