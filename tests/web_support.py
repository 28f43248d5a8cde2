"""What the viewer's tests share: Debian's chromium driven by Playwright, a real `ledger view` server process, and
a ledger of cards played through the real toolkit (one with hostile tags, opaque data and reasoning).

The browser is never downloaded: Playwright is pointed at /usr/bin/chromium (`make test` installs Debian's package
where it is missing). Without it the browser tests skip, naming why, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from arcengine import GameAction

from ledger import Ledger
from tests.toolkit import ENV_DIR, arcade, play_random_card, step

CHROMIUM = os.environ.get("LEDGER_TEST_CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() == "true"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: The installed command, as a user runs it.
LEDGER = [str(Path(sys.executable).parent / "ledger")]

#: Tags, opaque data and reasoning an agent (or an imported file) could write: each must show as text.
HOSTILE_TAG = '</script><img src=x onerror="window.__pwned=1">'
HOSTILE_TAGS = [
    HOSTILE_TAG,
    '"><svg onload="window.__pwned=2">',
    "'><script>window.__pwned=3</script>",
    "{{7*7}}<b>bold</b>",
]
HOSTILE_REASONING = {"thought": '<script>window.__pwned=4</script><img src=x onerror="window.__pwned=5">'}
HOSTILE_OPAQUE = {"note": "</script><script>window.__pwned=6</script>", "u2028": "\u2028\u2029"}


def unavailable(reason: str) -> None:
    """Skip a browser test, or fail it under CI=true, where it must run."""
    if IN_CI:
        pytest.fail(f"CI=true, so the browser tests must run, but {reason}", pytrace=False)
    pytest.skip(f"browser tests skipped: {reason}")


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's chromium, headless, through Playwright."""
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"{CHROMIUM} is missing (apt-get install chromium, or `make test`)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Played:
    """The cards of the test ledger and what the test agent saw while playing them."""

    db: Path
    cards: dict[str, str] = field(default_factory=dict)
    #: The grid (hex digits, row by row) the toolkit returned after each step of the replayed play, start first.
    grids: list[str] = field(default_factory=list)
    replay_game: str = ""
    hostile: str = ""
    #: ``ledger export`` of every card (all closed), through the command line.
    exports: dict[str, dict[str, Any]] = field(default_factory=dict)


def hexgrid(frame: Any) -> str:
    """The last grid of a toolkit response as hex digits, row by row (computed here, not by the viewer)."""
    return "".join("0123456789abcdef"[int(v)] for row in frame.frame[-1] for v in row)


def play_ledger(db: Path) -> Played:
    """A ledger of five cards played through the real toolkit (see the module docstring)."""
    out = Played(db=db)
    with Ledger.open(db) as led:
        # A key, so cards carry an API-key fingerprint for the bundle to leave out.
        arc = arcade(arc_api_key="test-key-for-the-viewer")
        cap = led.attach(arc, record_reasoning=True)
        rng = random.Random(11)
        for name, tags, games in [
            ("a1", ["agent-a"], ["cnt3", "wkex"]),
            ("b1", ["agent-b", "v2"], ["cnt3", "clk2"]),
            ("a2", ["agent-a"], ["wkex", "shrt"]),
        ]:
            card = play_random_card(arc, rng, games=games, steps=70, tags=tags)
            arc.close_scorecard(card)
            out.cards[name] = card
        # The replayed play: scripted so it completes levels, resets, loses and restarts.
        card = arc.open_scorecard(tags=["replayed"])
        env = arc.make("cnt3", scorecard_id=card, seed=1)
        out.replay_game = env.observation_space.game_id
        out.grids.append(hexgrid(env.observation_space))
        for a in [1, 1, 2, 1, 1, 1, 0, 1, 1, 3, 0, 1, 1]:
            out.grids.append(hexgrid(step(env, a)))
        arc.close_scorecard(card)
        out.cards["replayed"] = card
        # The hostile card: tags, opaque and reasoning an attacker chose.
        card = arc.open_scorecard(tags=HOSTILE_TAGS, opaque=HOSTILE_OPAQUE, source_url="javascript:alert(1)")
        env = arc.make("wkex", scorecard_id=card, seed=0)
        for a in [1, 2, 1]:
            env.step(GameAction.from_id(a), reasoning=HOSTILE_REASONING)
        arc.close_scorecard(card)
        out.cards["hostile"] = card
        out.hostile = card
        cap.detach()
    out.exports = {c: export(db, c) for c in out.cards.values()}
    return out


#: The one-level game of :func:`low_score_cards`: its human baseline is 2 actions.
LOW_GAME = "lo01-5c0e5c0e5c0e"


def low_score_cards(led: Ledger, tags: list[str], per_tag: int, *, seed: int = 5) -> dict[str, list[float]]:
    """Cards that score 1-4, as an agent early in its life does: per tag ``per_tag`` cards a minute apart, each
    one play of LOW_GAME completed in 10-20 actions (score (2/n)^2 x 100, from 4.00 down to 1.00), written through
    the ledger's own append path. Returns each tag's scores, oldest first."""
    from datetime import UTC, datetime, timedelta
    from uuid import UUID

    from ledger.domain.events import (
        ActionTaken,
        BaselineEntry,
        CardClosed,
        CardOpened,
        LevelCompleted,
        PlayStarted,
        Win,
    )

    rng = random.Random(seed)
    sid = led.record_baselines([BaselineEntry(game_id=LOW_GAME, baseline_actions=[2])])
    start = datetime(2026, 3, 1, tzinfo=UTC)
    scores: dict[str, list[float]] = {t: [] for t in tags}
    for n in range(per_tag * len(tags)):
        tag = tags[n % len(tags)]
        # Each tag gets a little better over time, with noise, as the chart should show.
        best = 20 - (10 * n) // (per_tag * len(tags)) - 2 * (n % len(tags))
        actions = max(10, min(20, best + rng.randint(-2, 2)))
        t = start + timedelta(minutes=n)
        card = str(UUID(int=rng.getrandbits(128)))
        guid = str(UUID(int=rng.getrandbits(128)))
        evs: list[Any] = [CardOpened(ts=t, card_id=card, tags=[tag], baselines_id=sid)]
        evs.append(PlayStarted(ts=t, game_id=LOW_GAME, guid=guid))
        act = ActionTaken(ts=t, game_id=LOW_GAME, guid=guid, action=1, levels_completed=0, state="NOT_FINISHED")
        evs.extend([act] * actions)
        evs.append(LevelCompleted(ts=t, game_id=LOW_GAME, guid=guid, levels_completed=1, actions=actions))
        evs.append(Win(ts=t, game_id=LOW_GAME, guid=guid))
        evs.append(CardClosed(ts=t + timedelta(seconds=1), reason="explicit"))
        led.append_card(card, evs, 0)
        scores[tag].append((2 / actions) ** 2 * 100)
    return scores


class ViewServer:
    """``ledger view`` in its own process, on a free port of 127.0.0.1."""

    def __init__(self, db: Path | str, *extra: str, sigint_ignored: bool = False) -> None:
        # sigint_ignored: started as `ledger view &` from a non-interactive shell, which ignores SIGINT in it.
        self.proc = subprocess.Popen(
            [*LEDGER, "--db", str(db), "view", "--port", "0", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        if m is None:
            self.proc.kill()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"ledger view did not start: {line!r} {err!r}")
        self.url = m.group(1)

    def stop(self) -> int:
        """Ctrl-C, as a user stops it; returns the exit code."""
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


def export(db: Path, card_id: str) -> dict[str, Any]:
    """``ledger export`` of a card, through the command line (Click's runner)."""
    import json

    from tests.cli_run import in_process

    r = in_process("--db", str(db), "export", card_id)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def best_run(env: dict[str, Any]) -> int:
    """The toolkit's best play of a game: the first run with the most levels completed."""
    best, most = 0, -1
    for i, run in enumerate(env["runs"]):
        if run["levels_completed"] > most:
            best, most = i, run["levels_completed"]
    return best


__all__ = ["ENV_DIR"]
