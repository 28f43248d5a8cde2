"""The viewer's charts in a real browser (Debian's headless chromium via Playwright), live and bundled: what uPlot
holds as the drawn data equals what `ledger compare --json` prints for the same ledger.

- the progress chart: one line per tag, each point a card at the time it was opened (x, seconds since 1970) and
  its score (y): the `opened` and `score` of `ledger compare --json --tag T`, retracted cards left out as there;
  it pages back to older cards, and says so when there is no card to draw;
- each game's levels chart on the compare page: per level the baseline and each card's actions of its best play,
  the `games[].cards[].levels[]` of `ledger compare --json`;
- no page error and no policy violation (the library is served by the viewer or read from the bundle's folder,
  under the same Content-Security-Policy as every page); hostile tags stay text in the chart's legend.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.web_support import ENV_DIR, HOSTILE_TAGS, LEDGER, Played, ViewServer, chromium, play_ledger

MODES = ["live", "bundle"]


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    return play_ledger(tmp_path_factory.mktemp("charts") / "ledger.sqlite")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def server(played: Played) -> Iterator[ViewServer]:
    srv = ViewServer(played.db)
    yield srv
    assert srv.stop() == 130


@pytest.fixture(scope="module")
def bundle_dir(played: Played, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "site"
    cmd = [*LEDGER, "--db", str(played.db), "bundle", "--all", "--environments", str(ENV_DIR), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def ledger_json(db: Path, *args: str) -> Any:
    done = subprocess.run([*LEDGER, "--db", str(db), *args, "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class Watched:
    """A page whose script errors and console errors (a Content-Security-Policy violation is one) are kept."""

    def __init__(self, browser: Any, bundle: bool) -> None:
        self.ctx = browser.new_context()
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        if bundle:
            # A bundle page may not touch the network.
            self.page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else r.abort())

    def close(self) -> None:
        self.ctx.close()


@pytest.fixture
def watched(browser: Any) -> Iterator[Any]:
    made: list[Watched] = []

    def make(bundle: bool = False) -> Any:
        w = Watched(browser, bundle)
        made.append(w)
        return w

    yield make
    for w in made:
        assert w.errors == []
        w.close()


_DRAWN = """(id) => { const el = document.getElementById(id); if (!el || !el.uplot) return null;
  return {labels: el.uplot.series.map(s => s.label), data: el.uplot.data.map(col => Array.from(col))}; }"""


TREND = " (median of last 9)"


def _series(drawn: dict[str, Any], *, trends: bool = False) -> dict[str, list[tuple[float, float]]]:
    """Each tag's points on the progress chart as (x, y): uPlot's table, without the nulls of other tags; with
    ``trends``, each tag's trend line instead (keyed by the tag)."""
    xs = drawn["data"][0]
    return {
        label.removesuffix(TREND): [(x, y) for x, y in zip(xs, col, strict=True) if y is not None]
        for label, col in zip(drawn["labels"][1:], drawn["data"][1:], strict=True)
        if label.endswith(TREND) == trends
    }


def _compared(db: Path, tag: str) -> list[tuple[float, float]]:
    """The tag's cards as `ledger cards --json --tag T` prints them: (opened in seconds, score), oldest first."""
    cards = ledger_json(db, "cards", "--tag", tag)
    return sorted((datetime.fromisoformat(c["opened"]).timestamp(), c["score"]) for c in cards)


@pytest.mark.parametrize("mode", MODES)
def test_progress_chart_draws_the_compare_numbers(
    mode: str, played: Played, request: pytest.FixtureRequest, watched: Any
) -> None:
    tags = ["agent-a", "agent-b", "v2", "replayed", *HOSTILE_TAGS]
    w = watched(bundle=mode == "bundle")
    if mode == "live":
        w.page.goto(request.getfixturevalue("server").url + "progress?" + urlencode([("tag", t) for t in tags]))
    else:
        w.page.goto((request.getfixturevalue("bundle_dir") / "progress.html").as_uri())
    drawn = w.page.evaluate(_DRAWN, "progress-chart")
    assert drawn is not None, "no chart drawn"
    lines = _series(drawn)
    assert sorted(lines) == sorted(tags)
    trends = _series(drawn, trends=True)
    for tag in tags:
        assert lines[tag] == _compared(played.db, tag), tag
        # The trend: at each card, the median score of the tag's last 9 cards up to it.
        scores = [y for _, y in lines[tag]]
        medians = [statistics.median(scores[max(0, i - 8) : i + 1]) for i in range(len(scores))]
        assert trends[tag] == [(x, m) for (x, _), m in zip(lines[tag], medians, strict=True)], tag
    assert lines["agent-a"] and len(lines["agent-a"]) == 2
    # The JSON the page carries is what was drawn, and the legend shows each hostile tag as text.
    payload = json.loads(w.page.text_content("#progress-data") or "")
    assert {s["tag"]: list(zip(s["x"], s["scores"], strict=True)) for s in payload["series"]} == lines
    legend = w.page.evaluate(
        "() => Array.from(document.querySelectorAll('#progress-chart .u-legend .u-label')).map(x => x.textContent)"
    )
    assert sorted(legend[1:]) == sorted([*tags, *[t + TREND for t in tags]])
    assert w.page.evaluate("() => window.__pwned") is None


def test_progress_chart_defaults_to_the_newest_tags_and_pages_back(
    played: Played, server: ViewServer, watched: Any
) -> None:
    w = watched()
    w.page.goto(server.url + "progress")
    lines = _series(w.page.evaluate(_DRAWN, "progress-chart"))
    # The newest cards' tags, most recently used first, up to six.
    assert len(lines) == 6 and set(lines) <= {"agent-a", "agent-b", "v2", "replayed", *HOSTILE_TAGS}
    # One card per tag: the newest, then the older page draws the one before, and the last page links no older.
    w.page.goto(server.url + "progress?tag=agent-a&limit=1")
    every = _compared(played.db, "agent-a")
    assert _series(w.page.evaluate(_DRAWN, "progress-chart")) == {"agent-a": every[-1:]}
    with w.page.expect_navigation():
        w.page.click("#older-page")
    assert _series(w.page.evaluate(_DRAWN, "progress-chart")) == {"agent-a": every[:1]}
    assert w.page.locator("#older-page").count() == 0
    with w.page.expect_navigation():
        w.page.click("#newest-page")
    assert _series(w.page.evaluate(_DRAWN, "progress-chart")) == {"agent-a": every[-1:]}


def _levels_expected(cmp: dict[str, Any]) -> list[dict[str, Any]]:
    """Per game, what its chart must draw, read from `ledger compare --json`: levels, baseline, each card's actions."""
    out = []
    for g in cmp["games"]:
        n = g["levels"]
        played = [e for e in g["cards"] if e is not None]
        base = [next((e["levels"][i]["baseline"] for e in played if i < len(e["levels"])), None) for i in range(n)]
        lines: list[list[Any]] = []
        for e in played:
            pad = [None] * (n - len(e["levels"]))
            # Completed levels on the card's line; the level it stopped on apart; a level never reached not at all.
            lines.append([lv["actions"] if lv["completed"] else None for lv in e["levels"]] + pad)
            stopped = [lv["actions"] if not lv["completed"] and lv["actions"] else None for lv in e["levels"]] + pad
            if any(v is not None for v in stopped):
                lines.append(stopped)
        out.append({"game": g["game_id"], "data": [list(range(1, n + 1)), base, *lines]})
    return out


@pytest.mark.parametrize("mode", MODES)
def test_levels_charts_draw_the_compare_numbers(
    mode: str, played: Played, request: pytest.FixtureRequest, watched: Any
) -> None:
    ids = list(played.cards.values())
    w = watched(bundle=mode == "bundle")
    if mode == "live":
        w.page.goto(request.getfixturevalue("server").url + "compare?" + "&".join(f"card={c}" for c in ids))
    else:
        w.page.goto((request.getfixturevalue("bundle_dir") / "compare.html").as_uri())
    order = w.page.evaluate(
        "() => Array.from(document.querySelectorAll('#compare-cards tr[data-card]')).map(t => t.dataset.card)"
    )
    assert sorted(order) == sorted(ids)
    want = _levels_expected(ledger_json(played.db, "compare", *order))
    games = w.page.evaluate("() => Array.from(document.querySelectorAll('section.game')).map(s => s.dataset.game)")
    assert games == [g["game"] for g in want] and len(games) >= 4
    for k, g in enumerate(want):
        drawn = w.page.evaluate(_DRAWN, f"levels-chart-{k}")
        assert drawn is not None, g["game"]
        assert drawn["data"] == g["data"], g["game"]
        assert drawn["labels"][1] == "baseline" and len(drawn["labels"]) == len(g["data"])


def test_progress_of_an_empty_ledger_and_of_one_tag(tmp_path: Path, browser: Any, watched: Any) -> None:
    empty = tmp_path / "empty.sqlite"
    assert subprocess.run([*LEDGER, "--db", str(empty), "init"], capture_output=True).returncode == 0
    srv = ViewServer(empty)
    try:
        w = watched()
        w.page.goto(srv.url + "progress")
        assert "no tagged card" in (w.page.text_content("#progress-empty") or "")
        assert w.page.locator("#progress-chart").count() == 0
        w.page.goto(srv.url + "compare")
        assert w.page.locator(".chart").count() == 0
    finally:
        assert srv.stop() == 130


def test_progress_of_one_tag_leaves_retracted_cards_out(played: Played, tmp_path: Path, watched: Any) -> None:
    db = tmp_path / "copy.sqlite"
    shutil.copyfile(played.db, db)
    gone = played.cards["a1"]
    done = subprocess.run(
        [*LEDGER, "--db", str(db), "retract", gone, "--reason", "a test of the chart"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    srv = ViewServer(db)
    try:
        w = watched()
        w.page.goto(srv.url + "progress?tag=agent-a")
        lines = _series(w.page.evaluate(_DRAWN, "progress-chart"))
        assert lines == {"agent-a": _compared(db, "agent-a")}
        assert len(lines["agent-a"]) == 1
        w.page.goto(srv.url + "progress?tag=no-such-tag")
        assert "for these tags" in (w.page.text_content("#progress-empty") or "")
    finally:
        assert srv.stop() == 130


@pytest.mark.postgres
def test_progress_reads_the_same_on_postgresql(played: Played, pg_url: str) -> None:
    from ledger import Ledger
    from ledger.app.progress import tag_progress

    done = subprocess.run([*LEDGER, "copy", "--from", str(played.db), "--to", pg_url], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with Ledger.open(played.db, readonly=True) as lite, Ledger.open(pg_url, readonly=True) as pg:
        for tags, limit in [([], 200), (["agent-a", "v2", "no-such-tag"], 200), (["agent-a"], 1)]:
            want = tag_progress(lite, tags, limit=limit)
            assert tag_progress(pg, tags, limit=limit) == want
        first = tag_progress(pg, ["agent-a"], limit=1)
        assert first.older == first.series[0].cards[0]
        older = tag_progress(pg, ["agent-a"], limit=1, before=first.older)
        assert older == tag_progress(lite, ["agent-a"], limit=1, before=first.older)
        assert older.series[0].cards == [played.cards["a1"]] and older.older is None
        # The loose scan of the keys and both plans of a tag's page, on PostgreSQL too.
        from ledger.store.summary import distinct_keys, query, tag_points_query

        for kind in ("t", "g"):
            assert sorted(distinct_keys(pg.store, kind)) == sorted(distinct_keys(lite.store, kind))
        for tag in ["agent-a", "replayed", HOSTILE_TAGS[0]]:
            for before in [None, played.cards["a2"]]:
                few = query(pg.store, *tag_points_query(tag, 1, before, many=False))
                assert query(pg.store, *tag_points_query(tag, 1, before, many=True)) == few


def test_both_plans_of_a_tag_page_and_the_loose_key_scan_agree(played: Played) -> None:
    """A tag's page reads the same cards whichever plan its size chooses; the tag and game lists equal DISTINCT."""
    from ledger import Ledger
    from ledger.store.summary import distinct_keys, query, tag_points_query

    with Ledger.open(played.db, readonly=True) as led:
        ids = [c for (c,) in query(led.store, "SELECT card_id FROM card_summary")]
        for tag in ["agent-a", "agent-b", "replayed", "no-such-tag", *HOSTILE_TAGS]:
            for limit in (1, 2, 50):
                for before in [None, *ids]:
                    few = query(led.store, *tag_points_query(tag, limit, before, many=False))
                    assert query(led.store, *tag_points_query(tag, limit, before, many=True)) == few
        for kind in ("t", "g"):
            every = [
                v for (v,) in query(led.store, "SELECT DISTINCT value FROM card_summary_keys WHERE kind = ?", [kind])
            ]
            assert distinct_keys(led.store, kind) == sorted(every) and every


def test_the_leaderboard_has_its_own_page(played: Played, server: ViewServer, watched: Any) -> None:
    w = watched()
    w.page.goto(server.url)
    assert w.page.locator("#leaderboard").count() == 0
    with w.page.expect_navigation():
        w.page.click("#leaderboard-link")
    rows = w.page.evaluate(
        "() => Array.from(document.querySelectorAll('#leaderboard tr[data-tag]')).map(tr => [tr.dataset.tag,"
        " tr.querySelector('[data-k=cards]').textContent, tr.querySelector('[data-k=mean-score]').textContent])"
    )
    tags = sorted({t for doc in played.exports.values() for t in doc.get("tags") or []})
    figures = ledger_json(played.db, "compare", *[a for t in tags for a in ("--tag", t)])["tags"]
    board = sorted(figures, key=lambda t: (-t["score"]["mean"], -t["cards"], t["tag"]))
    assert rows == [[t["tag"], str(t["cards"]), f"{t['score']['mean']:.2f}"] for t in board]
    assert len(rows) >= 4


_Y = """() => { const el = document.getElementById('progress-chart'), u = el.uplot;
  return {min: u.scales.y.min, max: u.scales.y.max, frame: el.dataset.frame, hash: location.hash,
          points: u.series.slice(1).filter(s => !s.label.endsWith('(median of last 9)')).map(s => ({
            size: s.points.size, stroke: s.points.stroke(u, 1)}))}; }"""


@pytest.fixture(scope="module")
def low_scores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[float]]:
    """A ledger of two tags whose cards all score 1-4, and a bundle of it."""
    from ledger import Ledger
    from tests.web_support import low_score_cards

    root = tmp_path_factory.mktemp("low")
    with Ledger.open(root / "ledger.sqlite") as led:
        scores = low_score_cards(led, ["early-a", "early-b"], 30)
    out = root / "site"
    subprocess.run([*LEDGER, "--db", str(root / "ledger.sqlite"), "bundle", "--all", "-o", str(out)], check=True)
    return root, [s for v in scores.values() for s in v]


@pytest.mark.parametrize("mode", MODES)
def test_progress_axis_fits_scores_of_one_to_four(
    mode: str, low_scores: tuple[Path, list[float]], watched: Any
) -> None:
    root, scores = low_scores
    assert 1 <= min(scores) < 1.5 and 3.5 < max(scores) <= 4.0001
    w = watched(bundle=mode == "bundle")
    srv = ViewServer(root / "ledger.sqlite") if mode == "live" else None
    try:
        url = srv.url + "progress?tag=early-a&tag=early-b" if srv else (root / "site" / "progress.html").as_uri()
        w.page.goto(url)
        fitted = w.page.evaluate(_Y)
        # The axis spans the scores (from 0, as they sit nearer 0 than they spread), not 0-100: 1 and 4 lie apart.
        assert fitted["frame"] == "fitted" and fitted["min"] == 0 and max(scores) < fitted["max"] <= 5, fitted
        # Points readable: larger than 5 px, and outlined in their tag's full colour (no alpha in the stroke).
        assert fitted["points"] and all(p["size"] >= 7 and len(p["stroke"]) == 7 for p in fitted["points"]), fitted
        w.page.click("#y-frame")
        full = w.page.evaluate(_Y)
        assert (full["min"], full["max"], full["frame"], full["hash"]) == (0, 100, "full", "#frame=full"), full
        # The address keeps the choice: reloading it draws the whole frame again, and the button returns.
        w.page.reload()
        assert (w.page.evaluate(_Y)["min"], w.page.evaluate(_Y)["max"]) == (0, 100)
        w.page.click("#y-frame")
        back = w.page.evaluate(_Y)
        assert (back["min"], back["max"], back["hash"]) == (fitted["min"], fitted["max"], ""), back
        if srv:
            w.page.goto(url + "&frame=full")
            assert w.page.evaluate(_Y)["max"] == 100
    finally:
        if srv:
            assert srv.stop() == 130
