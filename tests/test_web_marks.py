"""The viewer tells what the card's numbers say, in a real browser (Debian's headless chromium via Playwright) over a
static bundle: every GAME_OVER of a play is marked on the replay timeline, a WIN is not hidden under its level's
mark, the card page's bar legend explains each colour, and a retracted card reads as such."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger
from ledger.web.pages import BundleLinks
from tests.cli_run import ledger
from tests.toolkit import arcade, step
from tests.web_support import ENV_DIR, chromium

#: cnt3 seed 0: ACTION3 loses. Die, reset the level, die again, reset, then win all three levels.
MOVES = [3, 0, 1, 3, 0, 1, 1, 2, 2, 1, 1, 1, 1, 1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("marks")
    db = root / "ledger.sqlite"
    with Ledger.open(db) as led:
        arc = arcade()
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card, seed=0)
        for m in MOVES:
            step(env, m)
        arc.close_scorecard(card)
        assert led.load_card(card).games["cnt3-0000000a"][0].state == "WIN"
    r = ledger("--db", str(db), "retract", card, "--reason", "a test of the marks")
    assert r.returncode == 0, r.stderr
    out = root / "site"
    r = ledger("--db", str(db), "bundle", card, "--include-retracted", "--environments", str(ENV_DIR), "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out, card


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


_MARKS = """() => Array.from(document.querySelectorAll('#timeline rect[data-mark]')).map(r => ({
    mark: r.getAttribute('data-mark'), x: +r.getAttribute('x'), y: +r.getAttribute('y'), h: +r.getAttribute('height')
}))"""


def test_replay_timeline_marks_every_game_over_and_an_unhidden_win(site: tuple[Path, str], browser: Any) -> None:
    out, card = site
    page = browser.new_page()
    page.goto((out / BundleLinks().replay(card, "cnt3-0000000a", 1)).as_uri())
    marks: list[dict[str, Any]] = page.evaluate(_MARKS)
    page.close()
    overs = [m for m in marks if m["mark"] == "GAME_OVER"]
    assert len(overs) == 2 and overs[0]["x"] < overs[1]["x"], marks
    (win,) = [m for m in marks if m["mark"] == "WIN"]
    level3 = next(m for m in marks if m["mark"] == "level 3 completed")
    assert win["x"] == level3["x"]
    # Same step, separate bands of its bar: neither covers the other.
    assert win["y"] + win["h"] <= level3["y"] or level3["y"] + level3["h"] <= win["y"], (win, level3)


def test_card_page_legend_and_retracted_banner(site: tuple[Path, str], browser: Any) -> None:
    out, card = site
    page = browser.new_page()
    page.goto((out / BundleLinks().card(card)).as_uri())
    legend = page.text_content("[data-k=bar-legend]") or ""
    colours = page.evaluate(
        "() => Array.from(document.querySelectorAll('[data-k=bar-legend] .key')).map("
        "k => getComputedStyle(k).backgroundColor)"
    )
    bars = page.evaluate(
        "() => Array.from(document.querySelectorAll('svg.bar rect.act')).map(r => getComputedStyle(r).fill)"
    )
    banner = page.text_content("#retracted") or ""
    page.close()
    assert "more than the baseline" in legend and "not completed" in legend
    # Every colour a bar is drawn in has its key in the legend.
    assert set(bars) <= set(colours), (bars, colours)
    assert "retracted on " in banner and "a test of the marks" in banner


_BARS = """() => Array.from(document.querySelectorAll('table.levels tr[data-level]')).map(tr => ({
    level: +tr.dataset.level,
    baseline: +tr.querySelector('[data-k=level-baseline]').textContent,
    actions: +tr.querySelector('[data-k=level-actions]').textContent,
    parts: Array.from(tr.querySelectorAll('svg.bar rect[data-part]')).map(r => ({
        part: r.dataset.part, n: +r.dataset.n, x: +r.getAttribute('x'), w: +r.getAttribute('width'),
        fill: getComputedStyle(r).fill, title: r.querySelector('title').textContent
    }))
}))"""


def test_level_bars_show_the_baseline_part_and_the_overrun_apart(site: tuple[Path, str], browser: Any) -> None:
    out, card = site
    page = browser.new_page()
    page.goto((out / BundleLinks().card(card)).as_uri())
    rows: list[dict[str, Any]] = page.evaluate(_BARS)
    keys = page.evaluate(
        "() => Object.fromEntries(Array.from(document.querySelectorAll('[data-k=bar-legend] .key')).map("
        "k => [k.className, getComputedStyle(k).backgroundColor]))"
    )
    page.close()
    # cnt3 seed 0 as MOVES plays it: levels 1 and 2 over their baselines (7 for 2, 5 for 3), level 3 at it.
    assert [(r["baseline"], r["actions"]) for r in rows] == [(2, 7), (3, 5), (2, 2)]
    for r in rows:
        parts = {p["part"]: p for p in r["parts"]}
        base, within = parts["baseline"], parts["within"]
        over = r["actions"] - r["baseline"]
        # Blue up to the baseline, as long as the baseline's own bar; red beyond it, starting where the blue ends.
        assert within["n"] == min(r["actions"], r["baseline"]) and within["w"] == base["w"], r
        assert within["fill"] == keys["key act"], r
        assert f"{within['n']} action(s) up to the baseline of {r['baseline']}" in within["title"]
        if over > 0:
            red = parts["over"]
            assert red["n"] == over and red["fill"] == keys["key act over"], r
            assert abs(red["x"] - (within["x"] + within["w"])) < 0.05, r
            # Drawn to the same scale: the red part's length to the blue's is the overrun's to the baseline.
            assert abs(red["w"] / within["w"] - over / r["baseline"]) < 0.02, r
            assert f"{over} action(s) more than the baseline of {r['baseline']} ({r['actions']} in all)" in red["title"]
        else:
            assert "over" not in parts, r
