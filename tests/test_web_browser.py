"""The viewer in a real browser: Debian's headless chromium, driven by Playwright, over the live `ledger view`
server (a process of its own) and over the static bundle opened from file://.

- every number on the cards, card and compare pages equals `ledger export` (scores to 2 decimals, per-level actions
  and baselines);
- stepping a replay draws the re-simulated frame: the canvas pixels equal the toolkit's palette colour of each cell
  of the frame the toolkit returned while the test agent played;
- an open card's page updates while a test agent keeps playing into the ledger, without reloading;
- hostile tags, opaque data and reasoning stay text: no script runs, no element is injected.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from arc_agi.rendering import COLOR_MAP

from ledger import Ledger
from ledger.web.pages import BundleLinks, LiveLinks
from tests.toolkit import arcade, step
from tests.web_support import (
    ENV_DIR,
    HOSTILE_REASONING,
    HOSTILE_TAG,
    HOSTILE_TAGS,
    LEDGER,
    Played,
    ViewServer,
    best_run,
    chromium,
    play_ledger,
)

pytestmark = pytest.mark.heavy

MODES = ["live", "bundle"]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    return play_ledger(tmp_path_factory.mktemp("web") / "ledger.sqlite")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def server(played: Played) -> Iterator[ViewServer]:
    srv = ViewServer(played.db, "--environments", str(ENV_DIR))
    yield srv
    assert srv.stop() == 130


def _bundle(played: Played, out: Path, *extra: str) -> Path:
    subprocess.run(
        [*LEDGER, "--db", str(played.db), "bundle", "--all", "--environments", str(ENV_DIR), "-o", str(out), *extra],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def bundle_dir(played: Played, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(played, tmp_path_factory.mktemp("bundle") / "site")


class Site:
    """The same pages, live or bundled."""

    def __init__(self, mode: str, server: ViewServer | None, bundle: Path | None) -> None:
        self.mode = mode
        self.base = server.url if server is not None else bundle.as_uri() + "/"  # type: ignore[union-attr]
        self.links = LiveLinks() if mode == "live" else BundleLinks()

    def cards(self) -> str:
        return self.base + ("" if self.mode == "live" else "index.html")

    def card(self, card_id: str) -> str:
        return self.base + self.links.card(card_id)

    def compare(self, card_ids: list[str]) -> str:
        if self.mode == "live":
            return self.base + LiveLinks().compare(card_ids)
        return self.base + "compare.html"

    def replay(self, card_id: str, game_id: str, play: int) -> str:
        return self.base + self.links.replay(card_id, game_id, play)


@pytest.fixture(params=MODES)
def site(request: pytest.FixtureRequest, played: Played) -> Site:
    if request.param == "live":
        return Site("live", request.getfixturevalue("server"), None)
    return Site("bundle", None, request.getfixturevalue("bundle_dir"))


@pytest.fixture
def page(browser: Any, site: Site) -> Iterator[Any]:
    """A fresh page; a bundle page may not touch the network (any request but file:// fails the test)."""
    ctx = browser.new_context()
    pg = ctx.new_page()
    pg.requests_outside: list[str] = []  # type: ignore[attr-defined]
    if site.mode == "bundle":

        def guard(route: Any) -> None:
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                pg.requests_outside.append(route.request.url)  # type: ignore[attr-defined]
                route.abort()

        pg.route("**/*", guard)
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
    yield pg
    assert pg.requests_outside == []  # type: ignore[attr-defined]
    assert pg.dialogs == []  # type: ignore[attr-defined]
    ctx.close()


_READ_CARD = """() => {
  const k = (el, name) => { const x = el.querySelector('[data-k="' + name + '"]'); return x ? x.textContent : null; };
  const out = {score: k(document, 'card-score'), actions: k(document, 'total-actions'),
               levels: k(document, 'total-levels'), games: {}};
  document.querySelectorAll('section.game').forEach(s => {
    out.games[s.dataset.game] = {score: k(s, 'game-score'), actions: k(s, 'game-actions'),
      levels: k(s, 'game-levels'), resets: k(s, 'game-resets'),
      plays: Array.from(s.querySelectorAll('.play')).map(p => ({score: k(p, 'play-score'),
        actions: k(p, 'play-actions'), resets: k(p, 'play-resets'), state: k(p, 'play-state'),
        levels: Array.from(p.querySelectorAll('tr[data-level]')).map(tr => [k(tr, 'level-baseline'),
          k(tr, 'level-actions'), k(tr, 'level-score')])}))};
  });
  return out;
}"""


def _expected_card(doc: dict[str, Any]) -> dict[str, Any]:
    games = {}
    for env in doc["environments"]:
        plays = []
        for run in env["runs"]:
            levels = [
                ["-" if b < 0 else str(b), str(a), f"{s:.2f}"]
                for b, a, s in zip(
                    run["level_baseline_actions"], run["level_actions"], run["level_scores"], strict=True
                )
            ]
            plays.append(
                {
                    "score": f"{run['score']:.2f}",
                    "actions": str(run["actions"]),
                    "resets": str(run.get("resets", 0)),
                    "state": run.get("state") or "-",
                    "levels": levels,
                }
            )
        games[env["id"]] = {
            "score": f"{env['score']:.2f}",
            "actions": str(env["actions"]),
            "levels": f"{env['levels_completed']}/{env['level_count']}",
            "resets": str(env["resets"]),
            "plays": plays,
        }
    return {
        "score": f"{doc['score']:.2f}",
        "actions": str(doc["total_actions"]),
        "levels": f"{doc['total_levels_completed']}/{doc['total_levels']}",
        "games": games,
    }


def test_card_pages_show_the_export_numbers(played: Played, site: Site, page: Any) -> None:
    for card_id in played.cards.values():
        page.goto(site.card(card_id))
        assert page.evaluate(_READ_CARD) == _expected_card(played.exports[card_id]), card_id


_SHOWN = "() => Array.from(document.querySelectorAll('tr[data-card]:not([hidden])')).map(t => t.dataset.card)"


def test_cards_page_shows_the_export_numbers(played: Played, site: Site, page: Any) -> None:
    page.goto(site.cards())
    rows = page.evaluate(
        """() => Object.fromEntries(Array.from(document.querySelectorAll('tr[data-card]')).map(tr =>
             [tr.dataset.card, ['score', 'actions', 'levels', 'plays'].map(
               k => tr.querySelector('[data-k="' + k + '"]').textContent)]))"""
    )
    assert set(played.cards.values()) <= set(rows)  # the live test may add an open card of its own
    for card_id in played.cards.values():
        doc = played.exports[card_id]
        plays = sum(len(e["runs"]) for e in doc["environments"])
        levels = f"{doc['total_levels_completed']}/{doc['total_levels']}"
        assert rows[card_id] == [f"{doc['score']:.2f}", str(doc["total_actions"]), levels, str(plays)]
    if site.mode == "live":
        _server_filters(played, page)
        return
    # The bundle's filters work on the page itself (it has no server to ask).
    page.select_option("select[name=tag]", "agent-a")
    shown = page.evaluate(
        "() => Array.from(document.querySelectorAll('tr[data-card]:not([hidden])')).map(t => t.dataset.card)"
    )
    assert sorted(shown) == sorted([played.cards["a1"], played.cards["a2"]])
    page.select_option("select[name=tag]", "")
    page.select_option("select[name=state]", "open")
    assert set(page.evaluate(_SHOWN)).isdisjoint(played.cards.values())  # every played card is closed
    page.select_option("select[name=state]", "closed")
    assert set(played.cards.values()) <= set(page.evaluate(_SHOWN))
    page.select_option("select[name=state]", "")
    page.fill("input[name=from]", "2999-01-01")
    assert page.evaluate(_SHOWN) == []  # opened from a date to come: none
    page.fill("input[name=from]", "")
    page.fill("input[name=id]", played.cards["b1"][:13])
    shown = page.evaluate(
        "() => Array.from(document.querySelectorAll('tr[data-card]:not([hidden])')).map(t => t.dataset.card)"
    )
    assert shown == [played.cards["b1"]]
    page.fill("input[name=id]", "")
    page.select_option("select[name=sort]", "score-desc")
    scores = page.evaluate(
        "() => Array.from(document.querySelectorAll('tr[data-card]')).map(t => parseFloat(t.dataset.score))"
    )
    assert scores == sorted(scores, reverse=True)


def _cli_cards(played: Played, *args: str) -> list[str]:
    done = subprocess.run([*LEDGER, "--db", str(played.db), "cards", "--json", *args], capture_output=True, check=True)
    return [c["card_id"] for c in json.loads(done.stdout)]


def _server_filters(played: Played, page: Any) -> None:
    """The live page's controls ask the server: each choice loads the page `ledger cards` lists, over the ledger."""
    with page.expect_navigation():
        page.select_option("select[name=tag]", "agent-a")
    assert "tag=agent-a" in page.url
    want = _cli_cards(played, "--tag", "agent-a", "--sort", "opened", "--reverse")
    assert page.evaluate(_SHOWN) == want and sorted(want) == sorted([played.cards["a1"], played.cards["a2"]])
    total = len(_cli_cards(played))
    assert page.text_content("#card-count") == f"2 of 2 matching of {total} in the ledger"
    with page.expect_navigation():
        page.select_option("select[name=sort]", "score-desc")
    assert page.evaluate(_SHOWN) == _cli_cards(played, "--tag", "agent-a", "--sort", "score")
    with page.expect_navigation():
        page.select_option("select[name=tag]", "")
    with page.expect_navigation():
        page.select_option("select[name=state]", "open")
    assert set(page.evaluate(_SHOWN)).isdisjoint(played.cards.values())  # every played card is closed
    with page.expect_navigation():
        page.select_option("select[name=state]", "closed")
    assert page.evaluate(_SHOWN) == _cli_cards(played, "--closed", "--sort", "score")


def test_compare_page_shows_the_export_numbers(played: Played, site: Site, page: Any) -> None:
    ids = list(played.cards.values())
    page.goto(site.compare(ids))
    order = page.evaluate(
        "() => Array.from(document.querySelectorAll('#compare-cards tr[data-card]')).map(t => t.dataset.card)"
    )
    assert order == ids
    cells = page.evaluate(
        """() => { const out = {};
          document.querySelectorAll('section.game').forEach(s => {
            const g = out[s.dataset.game] = {};
            s.querySelectorAll('[data-card-index]').forEach(td => {
              const c = g[td.dataset.cardIndex] = g[td.dataset.cardIndex] || {};
              const tr = td.closest('tr'); const lv = tr.dataset.level || 'game';
              (c[lv] = c[lv] || {})[td.dataset.k] = td.textContent.replace(' ✗', '');
            });
            g.baselines = Array.from(s.querySelectorAll('tr[data-level]')).map(
              tr => tr.querySelector('[data-k="level-baseline"]').textContent);
          });
          out.scores = Array.from(document.querySelectorAll('#compare-cards [data-k="card-score"]')).map(
            x => x.textContent);
          return out; }"""
    )
    docs = [played.exports[c] for c in ids]
    assert cells.pop("scores") == [f"{d['score']:.2f}" for d in docs]
    for i, doc in enumerate(docs):
        for env in doc["environments"]:
            run = env["runs"][best_run(env)]
            got = cells[env["id"]][str(i)]
            assert got.pop("game") == {"game-actions": str(env["actions"]), "game-score": f"{env['score']:.2f}"}
            want = {
                str(n + 1): {"level-actions": str(a), "level-score": f"{s:.2f}"}
                for n, (a, s) in enumerate(zip(run["level_actions"], run["level_scores"], strict=True))
            }
            assert got == want, (doc["card_id"], env["id"])
            base = ["-" if b < 0 else str(b) for b in run["level_baseline_actions"]]
            assert cells[env["id"]]["baselines"][: len(base)] == base


_CANVAS_CELLS = """() => {
  const c = document.getElementById('screen'), s = parseInt(c.dataset.scale, 10);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, out = [];
  for (let y = 0; y < c.height / s; y++) for (let x = 0; x < c.width / s; x++) {
    const i = ((y * s + (s >> 1)) * c.width + x * s + (s >> 1)) * 4; out.push([d[i], d[i + 1], d[i + 2]]);
  }
  return {step: c.dataset.step, cells: out};
}"""


def _rgb(hex_digit: str) -> list[int]:
    h = COLOR_MAP[int(hex_digit, 16)].lstrip("#")
    return [int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)]


def test_replay_draws_the_resimulated_frames(played: Played, site: Site, page: Any) -> None:
    page.goto(site.replay(played.cards["replayed"], played.replay_game, 1))
    assert page.text_content("[data-k=total-steps]") == str(len(played.grids))
    for n, grid in enumerate(played.grids):
        got = page.evaluate(_CANVAS_CELLS)
        assert got["step"] == str(n)
        assert got["cells"] == [_rgb(d) for d in grid], f"step {n}"
        page.click("#next")
    # The timeline marks what the recording says happened: 1 level completion, 2 resets, 1 GAME_OVER.
    marks = page.evaluate(
        "() => Array.from(document.querySelectorAll('#timeline rect[class^=k-]')).map(r => r.getAttribute('class'))"
    )
    assert sorted(marks) == ["k-level", "k-over", "k-reset", "k-reset"]
    # Scrubbing to a step draws that step.
    page.fill("#scrub", "4")
    page.dispatch_event("#scrub", "input")
    assert page.evaluate(_CANVAS_CELLS)["cells"] == [_rgb(d) for d in played.grids[4]]


def test_replay_without_game_code_says_why(played: Played, tmp_path: Path, browser: Any) -> None:
    srv = ViewServer(played.db)  # no --environments
    try:
        pg = browser.new_page()
        pg.goto(srv.url + LiveLinks().replay(played.cards["replayed"], played.replay_game, 1))
        assert "no --environments folder" in pg.text_content("#no-frames")
        assert pg.query_selector("canvas") is None
        pg.close()
    finally:
        assert srv.stop() == 130


def test_open_card_updates_live_while_an_agent_plays(played: Played, server: ViewServer, browser: Any) -> None:
    pg = browser.new_page()
    cards_pg = browser.new_page()
    cards_pg.goto(server.url)
    with Ledger.open(played.db) as led:
        arc = arcade()
        cap = led.attach(arc)
        card = arc.open_scorecard(tags=["live-agent"])
        env = arc.make("wkex", scorecard_id=card, seed=0)
        step(env, 2)
        pg.goto(server.url + LiveLinks().card(card))
        pg.evaluate("() => { window.__same_page = 'yes'; }")
        # The cards page, opened before the card existed, lists it without a reload.
        cards_pg.wait_for_selector(f'tr[data-card="{card}"]', timeout=15000)
        for round_ in range(4):
            for a in [2, 2, 1] if round_ % 2 else [1, 2]:
                step(env, a)
            want = json.loads(led.export(card))
            pg.wait_for_function(
                "w => document.querySelector('[data-k=\"total-actions\"]').textContent === w[0]"
                " && document.querySelector('[data-k=\"card-score\"]').textContent === w[1]",
                arg=[str(want["total_actions"]), f"{want['score']:.2f}"],
                timeout=15000,
            )
            assert pg.evaluate(_READ_CARD) == _expected_card(want)
        arc.close_scorecard(card)
        cap.detach()
    pg.wait_for_function("() => document.getElementById('card-body').dataset.open === 'false'", timeout=15000)
    assert "closed" in pg.text_content(".summary")
    assert pg.evaluate("() => window.__same_page") == "yes"  # updated in place, never reloaded
    pg.close()
    cards_pg.close()


_INERT = """() => {
  const bad = [];
  document.querySelectorAll('*').forEach(el => {
    for (const a of el.attributes) if (a.name.startsWith('on')) bad.push(el.tagName + ' ' + a.name);
  });
  document.querySelectorAll('script').forEach(s => {
    const own = s.src.endsWith('static/viewer.js') || s.src.endsWith('static/vendor/uplot/uPlot.iife.min.js');
    if (!(own || s.type === 'application/json')) bad.push('script ' + s.outerHTML);
  });
  document.querySelectorAll('img, iframe, object, embed, b').forEach(el => bad.push(el.outerHTML));
  return {bad: bad, pwned: window.__pwned === undefined ? null : window.__pwned};
}"""


def _assert_inert(pg: Any) -> None:
    got = pg.evaluate(_INERT)
    assert got == {"bad": [], "pwned": None}


def test_hostile_tags_opaque_and_reasoning_stay_text(played: Played, site: Site, page: Any, tmp_path: Path) -> None:
    hostile = played.hostile
    page.goto(site.cards())
    _assert_inert(page)
    tags = page.evaluate(
        "h => Array.from(document.querySelectorAll('tr[data-card]')).filter(t => t.dataset.card === h)"
        ".flatMap(t => Array.from(t.querySelectorAll('[data-k=tag]')).map(x => x.textContent))",
        hostile,
    )
    assert tags == HOSTILE_TAGS
    page.goto(site.card(hostile))
    _assert_inert(page)
    assert [t.text_content() for t in page.query_selector_all(".summary [data-k=tag]")] == HOSTILE_TAGS
    assert "</script><script>window.__pwned=6</script>" in page.text_content("[data-k=opaque]")
    page.goto(site.compare([hostile, played.cards["a1"]]))
    _assert_inert(page)
    assert HOSTILE_TAG in page.text_content("#leaderboard")
    page.goto(site.base + ("progress" if site.mode == "live" else "progress.html"))
    _assert_inert(page)
    assert HOSTILE_TAG in page.text_content("#progress-chart .u-legend")
    game = played.exports[hostile]["environments"][0]["id"]
    page.goto(site.replay(hostile, game, 1))
    _assert_inert(page)
    page.click("#next")
    reasoning = page.text_content("#s-reasoning")
    if site.mode == "live":
        assert json.loads(reasoning) == HOSTILE_REASONING
    else:  # the bundle leaves reasoning out unless --with-reasoning
        assert reasoning == ""
    _assert_inert(page)


def test_bundle_with_reasoning_keeps_it_inert(played: Played, browser: Any, tmp_path: Path) -> None:
    site = _bundle(played, tmp_path / "with", "--with-reasoning")
    game = played.exports[played.hostile]["environments"][0]["id"]
    pg = browser.new_page()
    pg.goto(site.as_uri() + "/" + BundleLinks().replay(played.hostile, game, 1))
    pg.click("#next")
    assert json.loads(pg.text_content("#s-reasoning")) == HOSTILE_REASONING
    _assert_inert(pg)
    pg.close()
