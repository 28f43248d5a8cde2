"""Re-scoring parity: `ledger export CARD --baselines B` equals the toolkit's own
``EnvironmentScorecard.from_scorecard(scorecard, infos_B).model_dump_json()`` for the same plays, byte for byte.

The toolkit's Scorecard object is kept from the run (before closing); the other baseline sets are lists of real
``arc_agi.EnvironmentInfo`` objects with changed baselines (longer, shorter, empty, none, zero, other numbers),
missing games, changed tags, duplicated entries and changed version ids.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from arc_agi import EnvironmentInfo
from arc_agi.scorecard import EnvironmentScorecard, Scorecard
from click.testing import CliRunner

from ledger import Ledger
from ledger.app.card_read import read_card
from ledger.cli import cli
from ledger.domain import baselines as bl
from ledger.domain import document
from tests.toolkit import arcade, play_random_card, step

Infos = list[EnvironmentInfo]


def _copy(i: EnvironmentInfo, **kw: Any) -> EnvironmentInfo:
    return i.model_copy(update=kw, deep=True)


def _map_baselines(f: Callable[[list[int]], list[int] | None]) -> Callable[[Infos], Infos]:
    return lambda infos: [_copy(i, baseline_actions=f(list(i.baseline_actions or []))) for i in infos]


VARIANTS: dict[str, Callable[[Infos], Infos]] = {
    "same": lambda infos: list(infos),
    "longer": _map_baselines(lambda b: [*b, 7, 11] if b else [5]),
    "shorter": _map_baselines(lambda b: b[:1]),
    "empty": _map_baselines(lambda b: []),
    "none": _map_baselines(lambda b: None),
    "zero": _map_baselines(lambda b: [0] * len(b)),
    "halved": _map_baselines(lambda b: [max(1, x // 2) for x in b]),
    "tripled": _map_baselines(lambda b: [x * 3 + 1 for x in b]),
    "missing": lambda infos: [i for n, i in enumerate(infos) if n % 2 == 0],
    "no-games": lambda infos: [],
    "tags": lambda infos: [
        _copy(i, tags=([*reversed(i.tags), "extra"] if i.tags else ["new-tag"]), private_tags=None, level_tags=None)
        for i in infos
    ],
    "no-tags": lambda infos: [_copy(i, tags=None) for i in infos],
    "duplicates": lambda infos: [*infos, *[_copy(i, baseline_actions=[1, 1]) for i in infos[:3]]],
}


def toolkit_json(sc: Scorecard, infos: Infos) -> str:
    out = EnvironmentScorecard.from_scorecard(sc, infos)
    out.api_key = None  # as Arcade.get_scorecard does
    return out.model_dump_json()


def ledger_export(db: Path, card: str, ref: str, *extra: str) -> str:
    r = CliRunner().invoke(cli, ["--db", str(db), "export", card, "--baselines", ref, *extra], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r.stdout.rstrip("\n")


def record(led: Ledger, infos: Infos) -> str:
    return led.record_baselines(bl.entry_from_info(i) for i in infos)


def scripted_card(arc: Any) -> str:
    """Every game: wins, a game over, a level reset, a full reset (two plays), clicks, a second guid."""
    card = arc.open_scorecard(tags=["t"])
    env = arc.make("cnt3", scorecard_id=card, seed=1)
    for a in [1, 1, 1, 2, 1, 1, 1, 0, 1, 1, 3, 0, 0, 1, 1, 1]:
        step(env, a)
    env2 = arc.make("cnt3", scorecard_id=card, seed=0)
    for a in [1, 1, 1]:
        step(env2, a)
    env = arc.make("clk2", scorecard_id=card)
    for x, y in [(0, 0), (20, 28), (1, 1), (44, 44)]:
        step(env, 6, x, y)
    for g, moves in [("nobl", [1, 1]), ("nbas", [1]), ("shrt", [1, 1, 1, 2]), ("wkex", [2, 1, 2, 2, 1])]:
        env = arc.make(g, scorecard_id=card)
        for a in moves:
            step(env, a)
    return card


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_export_under_other_baselines_matches_toolkit(db_path: Path, variant: str) -> None:
    arc = arcade()
    with Ledger.open(db_path) as led:
        led.attach(arc)
        card = scripted_card(arc)
        sc = arc.scorecard_manager.scorecards[card]
        as_played = led.export(card)
        assert as_played == toolkit_json(sc, arc.available_environments)
        infos = VARIANTS[variant](arc.available_environments)
        sid = record(led, infos)
    expected = toolkit_json(sc, infos)
    assert (expected == as_played) == (variant == "same")  # every other variant changes the document
    assert ledger_export(db_path, card, sid) == expected
    assert ledger_export(db_path, card, sid[:8]) == expected
    arc.close_scorecard(card)  # the log still holds the plays; re-scoring does not need the toolkit
    assert ledger_export(db_path, card, sid) == expected


def test_label_and_indent(tmp_path: Path, db_path: Path) -> None:
    arc = arcade()
    with Ledger.open(db_path) as led:
        led.attach(arc)
        card = scripted_card(arc)
        sc = arc.scorecard_manager.scorecards[card]
    infos = VARIANTS["longer"](arc.available_environments)
    f = tmp_path / "longer.json"
    f.write_text("[" + ",".join(i.model_dump_json() for i in infos) + "]")  # the toolkit's own serialisation
    r = CliRunner().invoke(cli, ["--db", str(db_path), "baselines", "import", str(f), "--label", "longer"])
    assert r.exit_code == 0, r.output
    assert ledger_export(db_path, card, "longer") == toolkit_json(sc, infos)
    out = EnvironmentScorecard.from_scorecard(sc, infos)
    out.api_key = None
    assert ledger_export(db_path, card, "longer", "--indent", "2") == out.model_dump_json(indent=2)


def test_match_base_matches_toolkit_with_renamed_infos(db_path: Path) -> None:
    """Version ids changed in the new set: `--match base` scores each game as the toolkit would if the entry
    carried the played id; with two versions of a game the first in game-id order is used."""
    arc = arcade()
    with Ledger.open(db_path) as led:
        led.attach(arc)
        card = scripted_card(arc)
        sc = arc.scorecard_manager.scorecards[card]
        played = arc.available_environments
        bumped = [_copy(i, game_id=i.game_id.split("-")[0] + "-ffffffff", baseline_actions=[3, 5, 8]) for i in played]
        older = [_copy(i, game_id=i.game_id.split("-")[0] + "-00000001", baseline_actions=[2, 9]) for i in played[:2]]
        sid = record(led, bumped + older)
    # What the toolkit computes when each played game's entry is the chosen version under the played id.
    chosen = {i.game_id.split("-")[0]: i for i in bumped}
    chosen.update({i.game_id.split("-")[0]: i for i in older})  # "-00000001" sorts before "-ffffffff"
    renamed = [_copy(chosen[i.game_id.split("-")[0]], game_id=i.game_id) for i in played]
    assert ledger_export(db_path, card, sid, "--match", "base") == toolkit_json(sc, renamed)
    assert ledger_export(db_path, card, sid) == toolkit_json(sc, bumped + older)  # exact: nothing matches


def _competition_toolkit_json(arc: Any, sc: Scorecard, infos: Infos) -> str:
    """What the toolkit's competition server does at close: ``make`` every game of the set the card has not
    played (on a copy of the card, so the original stays as played), then score. The runs those makes start
    get a fresh random guid from the toolkit; the ledger's have none, so the guid is removed from them."""
    copy_id = f"{sc.card_id}-copy"
    arc.scorecard_manager.scorecards[copy_id] = sc.model_copy(deep=True, update={"card_id": copy_id})
    made: set[str] = set()
    for info in sorted(infos, key=lambda i: i.game_id):  # the set's canonical order
        copy = arc.scorecard_manager.scorecards[copy_id]
        if not copy.has_environment(info.game_id):
            arc.make(info.game_id, scorecard_id=copy_id)
            made.add(info.game_id)
    copy = arc.scorecard_manager.scorecards.pop(copy_id)
    out = EnvironmentScorecard.from_scorecard(copy, infos)
    out.api_key = None
    out.card_id = sc.card_id
    for env in out.environments:
        if env.id in made:
            assert len(env.runs) == 1 and env.runs[0].actions == 0
            env.runs[0].guid = None
    return out.model_dump_json()


@pytest.mark.parametrize("variant", ["same", "longer", "missing", "tags", "empty", "no-games"])
def test_all_environments_matches_competition_server(db_path: Path, variant: str) -> None:
    arc = arcade()
    with Ledger.open(db_path) as led:
        cap = led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        for a in [1, 1, 1, 1, 1, 2]:
            step(env, a)
        env = arc.make("shrt", scorecard_id=card)
        step(env, 1)
        cap.detach()  # the server's makes below must not reach the ledger
        sc = arc.scorecard_manager.scorecards[card]
        infos = VARIANTS[variant](arc.available_environments)
        sid = record(led, infos)
    expected = _competition_toolkit_json(arc, sc, infos)
    got = ledger_export(db_path, card, sid, "--all-environments")
    assert got == expected
    if variant == "same":
        assert '"total_environments":6' in got


@pytest.mark.parametrize("seed", range(12))
def test_random_plays_rescored_match_toolkit(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    arc = arcade()
    with Ledger.open(tmp_path / "l.sqlite") as led:
        led.attach(arc)
        cards = [play_random_card(arc, rng, steps=rng.randint(10, 80)) for _ in range(rng.randint(1, 2))]
        scorecards = {c: arc.scorecard_manager.scorecards[c] for c in cards}
        for name in sorted(VARIANTS):
            infos = VARIANTS[name](arc.available_environments)
            sid = record(led, infos)
            for c, sc in scorecards.items():
                # read_card is what `ledger export --baselines` prints (the CLI tests above run it end to end).
                got = document.to_json(read_card(led, c, baselines=sid).doc)
                assert got == toolkit_json(sc, infos), (name, c)
