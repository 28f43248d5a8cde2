"""The viewer's screenshots in docs/ (docs/viewer-*.png), taken by the tests' browser from the current code.

    .venv/bin/python scripts/screenshots.py   # writes docs/viewer-*.png and docs/viewer-screenshots.json

tests/test_web_screenshots.py takes them into a temporary folder (:func:`take`).

A picture cannot be compared pixel for pixel (fonts, anti-aliasing, the toolkit's ids and times), so the manifest
keeps, per picture, a digest of what the page was made of, ids and times masked; the test takes the pictures again
and compares those digests with the committed manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger import Ledger
from ledger.app import synthetic
from ledger.web.pages import LiveLinks
from tests.toolkit import arcade, play_random_card, step
from tests.web_support import ENV_DIR, ViewServer, chromium, low_score_cards

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MANIFEST = "viewer-screenshots.json"
STYLE = ROOT / "ledger" / "web" / "static" / "viewer.css"
WIDTH = 1280

#: cnt3 seed 0: ACTION3 loses. Die, reset the level, die again, reset, then win all three levels, two of them over
#: their baselines: the card page's bars show a baseline part and an overrun.
MOVES = [3, 0, 1, 3, 0, 1, 1, 2, 2, 1, 1, 1, 1, 1]


def build(db: Path) -> dict[str, str]:
    """The demo ledger; returns the cards the pictures show, by name."""
    cards: dict[str, str] = {}
    with Ledger.open(db) as led:
        synthetic.write_cards(led, 2_000, seed=1)
        low_score_cards(led, ["early-a", "early-b"], 90)
        arc = arcade()
        cap = led.attach(arc)
        rng = random.Random(7)
        for name, tags, games in [
            ("a1", ["agent-a"], ["cnt3", "wkex"]),
            ("b1", ["agent-b"], ["cnt3", "clk2"]),
            ("a2", ["agent-a"], ["wkex", "shrt"]),
        ]:
            card = play_random_card(arc, rng, games=games, steps=70, tags=tags)
            arc.close_scorecard(card)
            cards[name] = card
        card = arc.open_scorecard(tags=["agent-a"])
        env = arc.make("cnt3", scorecard_id=card, seed=0)
        for m in MOVES:
            step(env, m)
        env = arc.make("wkex", scorecard_id=card, seed=0)
        for m in [1, 2, 1, 1, 3, 4]:
            step(env, m)
        arc.close_scorecard(card)
        cards["shown"] = card
        cap.detach()
    return cards


#: What a page was made of, read in the browser after its script ran (see the module docstring).
_PAGE = """() => {
  const main = document.querySelector('main');
  const rects = sel => Array.from(document.querySelectorAll(sel)).map(r => [r.getAttribute('class'),
    r.dataset.part || r.dataset.mark || '', r.getAttribute('x'), r.getAttribute('width'), getComputedStyle(r).fill,
    (r.querySelector('title') || {}).textContent || '']);
  const charts = Array.from(document.querySelectorAll('.chart')).map(el => {
    const u = el.uplot;
    if (!u) return el.textContent;
    return {frame: el.dataset.frame || '', width: u.width, height: u.height,
      y: [u.scales.y.min, u.scales.y.max], x: [u.scales.x.min, u.scales.x.max], data: u.data.map(c => Array.from(c)),
      series: u.series.map(s => [s.label, s.width, s.points && s.points.show ? s.points.size : 0,
        typeof s.stroke === 'function' ? s.stroke(u, 1) : s.stroke])};
  });
  const screen = document.getElementById('screen');
  return {text: main.innerText, bars: rects('svg.bar rect'), timeline: rects('#timeline rect'), charts,
    screen: screen ? [screen.width, screen.height, screen.dataset.step] : null};
}"""

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(\+00:00|Z)?")


def masked(page: Any, cards: dict[str, str]) -> str:
    """The page's make-up as canonical JSON, with what differs from run to run masked: the toolkit's card ids (and
    their 8-character prefixes), its play guids and its times (the chart of the toolkit's cards draws them as
    seconds, so the progress picture draws only the demo ledger's fixed-time cards)."""
    text = json.dumps(page, sort_keys=True)
    for name, card in cards.items():
        text = text.replace(card, f"<card {name}>").replace(card[:8], f"<card {name}>")
    return _TIME.sub("<time>", _UUID.sub("<guid>", text))


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    w, h = struct.unpack(">II", head[16:24])
    return w, h


def digest(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def shots(cards: dict[str, str], base: str) -> list[tuple[str, str, int]]:
    """Each picture: its file, the page's address and the height shown."""
    links = LiveLinks()
    shown = cards["shown"]
    side = [cards["a1"], cards["b1"], cards["a2"], shown]
    return [
        ("viewer-cards.png", base + links.cards(), 900),
        ("viewer-card.png", base + links.card(shown), 1250),
        ("viewer-compare.png", base + links.compare(side), 1300),
        ("viewer-compare-tags.png", base + links.compare(tags=["agent-1", "agent-2"]), 1300),
        ("viewer-progress.png", base + links.progress(["early-a", "early-b"]), 1000),
        ("viewer-replay.png", base + links.card(shown), 760),
    ]


def take(out: Path) -> dict[str, Any]:
    """Build the demo ledger, take every picture into ``out`` and write the manifest there; returns it."""
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "about": "written by scripts/screenshots.py with the pictures; tests/test_web_screenshots.py checks them",
        "style": digest(STYLE.read_bytes()),
        "shots": {},
    }
    with tempfile.TemporaryDirectory(prefix="ledger-shots-") as tmp:
        db = Path(tmp) / "demo.sqlite"
        cards = build(db)
        srv = ViewServer(db, "--environments", str(ENV_DIR))
        try:
            with chromium() as browser:
                ctx = browser.new_context(viewport={"width": WIDTH, "height": 800})
                page = ctx.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                for name, url, height in shots(cards, srv.url):
                    page.goto(url)
                    if name == "viewer-replay.png":
                        page.click("section.game[data-game^=cnt3] a.replay")
                        page.wait_for_selector("#tl-cursor", state="attached")
                        for _ in range(6):
                            page.keyboard.press("ArrowRight")
                    page.set_viewport_size({"width": WIDTH, "height": height})
                    page.evaluate("() => document.fonts.ready")
                    made = page.evaluate(_PAGE)
                    page.screenshot(path=str(out / name))
                    manifest["shots"][name] = {
                        "page": digest(masked(made, cards)),
                        "size": list(png_size(out / name)),
                        "sha256": digest((out / name).read_bytes()),
                    }
                    if out != DOCS:  # what the page was made of, to compare by eye when the digests differ
                        (out / (name + ".json")).write_text(masked(made, cards))
                ctx.close()
                if errors:
                    raise SystemExit(f"script errors on the pages: {errors}")
        finally:
            srv.stop()
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    for name, shot in take(DOCS)["shots"].items():
        print(f"{DOCS / name}  {shot['size'][0]}x{shot['size'][1]}")


if __name__ == "__main__":
    main()
