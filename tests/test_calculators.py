"""The calculator is versioned data: each published arc-agi release's arithmetic and document shape, checked
byte for byte against that release's own toolkit.

Each release (0.9.1, 0.9.3, 0.9.6, 0.9.9: the three arithmetic eras) gets an environment of its own
(tests/toolkit_versions.py, built once per session) in which tests/toolkit_play.py plays seeded random cards over the
demo games and the tests' games OFFLINE, with the toolkit's recordings, and writes that toolkit's
``get_scorecard(card).model_dump_json()``. The recordings are imported with ``calculator=`` that release, and every
card's export must be those bytes. The same seeds under every release play the same actions (one arcengine), so a
card played under one release re-scored with ``--calculator`` another must be that other toolkit's JSON of the same
plays (card id and guids aside: the toolkit makes new ones).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result

from ledger import Ledger
from ledger.app.listing import list_cards
from ledger.capture.demo import DEMO_GAMES
from ledger.cli import cli
from ledger.domain import calculators
from ledger.domain.calculators import UnknownCalculator
from ledger.domain.events import ActionIgnored, CardOpened, card_stream, decode, encode
from ledger.domain.projection import fold
from ledger.domain.scoring import calculator_of, score_card
from ledger.imports.importing import import_recordings
from tests import standalone
from tests.replayed import replayed_cards
from tests.toolkit import ENV_DIR
from tests.toolkit_versions import run_under

RELEASES = ["0.9.1", "0.9.3", "0.9.6", "0.9.9"]
PLAY = str(Path(__file__).resolve().parent / "toolkit_play.py")
SEED, CARDS = 28, 4
GAME_DIRS = {"demo": DEMO_GAMES, "tests": ENV_DIR}


class Played(msgspec.Struct):
    """One release's play: where its recordings are, and its toolkit's JSON of each card."""

    version: str
    out: Path
    cards: dict[str, str]


_played: dict[str, Played] = {}


def run_cli(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def played(toolkit_env: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Played]:
    def get(version: str) -> Played:
        if version not in _played:
            toolkit_env(version)
            out = tmp_path_factory.mktemp(f"play-{version}")
            r = run_under(version, [PLAY, str(out), str(SEED), str(CARDS)])
            assert r.returncode == 0, r.stderr[-3000:]
            body = json.loads((out / "expected.json").read_text())
            assert body["version"] == version  # the toolkit that played is the one asked for
            _played[version] = Played(version, out, body["cards"])
        return _played[version]

    return get


def _import(led: Ledger, p: Played, calculator: str | None) -> None:
    for name, games in GAME_DIRS.items():
        s = import_recordings(led, [p.out / name], environments=games, calculator=calculator)
        assert s.exit_code == 0, [str(x) for x in s.problems]


def _ids(doc: str) -> list[str]:
    d = json.loads(doc)
    return [d["card_id"], *(r["guid"] for e in d["environments"] for r in e["runs"])]


@pytest.mark.parametrize("version", RELEASES)
def test_every_release_exports_its_toolkits_bytes(played: Any, tmp_path: Path, version: str) -> None:
    p = played(version)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        _import(led, p, version)
        assert sorted(led.card_ids()) == sorted(p.cards)
        for card, want in p.cards.items():
            assert led.export(card) == want, (version, card)
            assert led.load_card(card).calculator == version
        # The standalone verifier (docs/evidence-format.md section 8) scores each card with its release's arithmetic.
        sv = standalone.load()
        for card, want in p.cards.items():
            state = led.load_card(card)
            infos = {g: msgspec.to_builtins(e) for g, e in led.card_baselines(state).items()}
            folded = sv.fold(card, [json.loads(b) for b in led.store.read_bodies(card_stream(card))[0]])
            assert sv.scorecard(folded, infos) == want, (version, card)
        # The cards summary holds each card's score under its own calculator.
        listed = {r.card_id: r.score for r in list_cards(led)}
        assert listed == {c: json.loads(want)["score"] for c, want in p.cards.items()}
        # The test can fail: under the other eras' arithmetic, the same plays score differently.
        others = {c.arithmetic: c for c in calculators.PUBLISHED if c.arithmetic != calculators.get(version).arithmetic}
        for calc in others.values():
            differ = [c for c, want in p.cards.items() if led.document(c, calculator=calc) != _doc(want)]
            assert differ, (version, calc.version)


def _doc(text: str) -> Any:
    from ledger.domain.document import ScorecardDoc

    return msgspec.json.decode(text, type=ScorecardDoc)


@pytest.mark.parametrize(
    ("played_on", "scored_as"), [("0.9.1", "0.9.3"), ("0.9.6", "0.9.9"), ("0.9.9", "0.9.6"), ("0.9.9", "0.9.1")]
)
def test_rescoring_with_another_calculator_is_that_toolkits_card(
    played: Any, tmp_path: Path, played_on: str, scored_as: str
) -> None:
    """`export --calculator B` of a card played under A is B's own JSON of the same plays.

    ``--calculator`` changes the arithmetic and the document's shape, not what was counted: where A and B count an
    action after GAME_OVER or WIN differently (0.9.6 changed it), only the cards without one are the same plays.
    """
    a, b = played(played_on), played(scored_as)
    same_counting = calculators.get(played_on).empty_frames_count == calculators.get(scored_as).empty_frames_count
    with Ledger.open(tmp_path / "l.sqlite") as led:
        _import(led, a, played_on)
        after_end = {c for c in a.cards if any(type(e) is ActionIgnored for e in _events(led, c))}
    if not calculators.get(played_on).empty_frames_count:  # its cards say where an action after the end was
        assert after_end, "the plays must act after GAME_OVER or WIN somewhere, or the counting rule is untested"
    pairs = list(zip(a.cards, b.cards, strict=True))  # the same seeds: the same cards in the same order
    checked = 0
    for card_a, card_b in pairs:
        if not same_counting and card_a in after_end:
            continue
        r = run_cli(["--db", str(tmp_path / "l.sqlite"), "export", card_a, "--calculator", scored_as])
        assert r.exit_code == 0, r.output
        got = r.stdout.rstrip("\n")
        for ida, idb in zip(_ids(a.cards[card_a]), _ids(b.cards[card_b]), strict=True):
            got = got.replace(ida, idb)
        assert got == b.cards[card_b], (card_a, card_b)
        assert f"the card's own is {played_on}" in r.stderr
        checked += 1
    assert checked >= (2 * CARDS if same_counting else 2), checked


def _events(led: Ledger, card: str) -> list[Any]:
    return [decode(b) for b in led.store.read_bodies(card_stream(card))[0]]


def test_capture_records_the_installed_toolkit(tmp_path: Path) -> None:
    from ledger.toolkit.arc_adapter import installed_version
    from tests.toolkit import arcade, step

    arc = arcade()
    with Ledger.open(tmp_path / "l.sqlite") as led:
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        step(env, 1)
        opened = decode(led.store.read_bodies(card_stream(card))[0][0])
        assert type(opened) is CardOpened
        assert (opened.calculator, opened.calculator_source) == (installed_version(), "capture")
        assert led.export(card) == arc.get_scorecard(card).model_dump_json()


def test_a_card_that_records_no_calculator_is_scored_as_0_9_9() -> None:
    """Events written before the calculator was recorded keep their bytes (so their hashes) and mean 0.9.9."""
    from datetime import UTC, datetime

    old = CardOpened(ts=datetime(2026, 1, 1, tzinfo=UTC), card_id="c1", baselines_id=None)
    assert b"calculator" not in encode(old)
    card = fold("c1", [decode(encode(old))])
    assert card.calculator is None and calculator_of(card) is calculators.get("0.9.9")
    assert score_card(card, {}) == score_card(card, {}, calculator=calculators.get("0.9.9"))
    # A release the ledger does not know is scored under the newest, and says so.
    calc, note = calculators.resolve("0.9.10")
    assert calc is calculators.NEWEST and note is not None and "0.9.10" in note


def test_an_unknown_calculator_is_a_usage_error_naming_the_published_ones(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    with Ledger.open(db):
        pass
    for args in (["export", "x", "--calculator", "0.9.0"], ["rescore", "--all", "--calculator", "1.0"]):
        r = run_cli(["--db", db, *args])
        assert r.exit_code == 2, r.output
        assert "0.9.1, 0.9.2, 0.9.3, 0.9.4, 0.9.5, 0.9.6, 0.9.7, 0.9.8, 0.9.9" in r.output
        assert "Traceback" not in r.output
    with pytest.raises(UnknownCalculator):
        calculators.get("0.8")


def test_rescore_with_a_calculator_lists_each_level(played: Any, tmp_path: Path) -> None:
    p = played("0.9.6")
    db = str(tmp_path / "l.sqlite")
    with Ledger.open(db) as led:
        _import(led, p, None)  # not stated: the newest, assumed, and replay says so
        card = next(iter(p.cards))
        assert led.load_card(card).calculator_source == "assumed"
    replay = run_cli(["--db", db, "replay", card])
    assert "the import was not told which toolkit played it" in replay.stdout
    export = run_cli(["--db", db, "export", card])
    assert "does not say which arc-agi played it" in export.stderr
    r = run_cli(["--db", db, "rescore", card, "--calculator", "0.9.6"])
    assert r.exit_code == 0, r.output
    assert "calculator arc-agi 0.9.6" in r.stdout and "calculator 0.9.9 -> 0.9.6" in r.stdout
    want = json.loads(p.cards[card])
    got = json.loads(run_cli(["--db", db, "export", card, "--calculator", "0.9.6"]).stdout)
    assert got == want
    # Every level score of the toolkit's 0.9.6 card is in the listing as the new side of a level line.
    for env in want["environments"]:
        for s in env["runs"][0]["level_scores"]:
            assert re.search(rf"-> {s:.2f}\b|\b{s:.2f}\s*$", r.stdout, re.M), s


def test_cards_of_different_calculators_are_ranked_under_one(tmp_path: Path) -> None:
    """compare, the leaderboard and the progress chart score every card with one calculator and say which."""
    import random

    from ledger.app.compare import compare_cards, comparison_text, ledger_board
    from ledger.app.progress import tag_progress
    from tests.toolkit import arcade, play_random_card

    arc = arcade()
    with Ledger.open(tmp_path / "l.sqlite") as led:
        led.attach(arc)
        first = play_random_card(arc, random.Random(7), games=["cnt3", "clk2"], steps=80, tags=["agent"])
        arc.close_scorecard(first)
        # The same plays on a card played under 0.9.1: its own score is the linear era's.
        evs = _events(led, first)
        second = "00000000-0000-4000-8000-000000000091"
        opened = msgspec.structs.replace(evs[0], card_id=second, calculator="0.9.1")
        led.append_card(second, [opened, *evs[1:]], 0)
        own = {c.card_id: c.score for c in replayed_cards(led)}
        assert own[first] != own[second]  # else the test proves nothing
        newest, oldest = own[first], led.document(first, calculator=calculators.get("0.9.1")).score
        assert own[second] == oldest

        cmp = compare_cards(led, [first, second])
        assert (cmp.calculator, cmp.rescored) == ("0.9.9", [second])
        assert [c.score for c in cmp.cards] == [newest, newest]
        assert "card(s) B played under another release are re-scored" in comparison_text(cmp)
        cmp = compare_cards(led, [first, second], calculator="0.9.1")
        assert [c.score for c in cmp.cards] == [oldest, oldest] and cmp.rescored == [first]

        board = ledger_board(led)
        assert (board.calculator, board.rescored) == ("0.9.9", [second])
        assert [(r.tag, r.cards, r.mean_score) for r in board.rows] == [("agent", 2, newest)]

        prog = tag_progress(led, ["agent"])
        assert (prog.calculator, prog.rescored) == ("0.9.9", [second])
        assert prog.series[0].scores == [newest, newest]

    r = run_cli(["--db", str(tmp_path / "l.sqlite"), "cards", "--calculator", "0.9.1", "--json"])
    assert sorted(c["score"] for c in json.loads(r.stdout)) == [oldest, oldest]
    r = run_cli(["--db", str(tmp_path / "l.sqlite"), "cards"])
    assert "these differ (arc-agi 0.9.1 (linear): 1 card(s), 0.9.9 (capped): 1 card(s))" in r.stdout
