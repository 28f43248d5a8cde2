"""`ledger rescore`: the worked example checked by hand, base-id matching, the competition view, sorting, and
that a rescore writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain.events import BaselineEntry
from ledger.rules.rescoring import match_baselines, rescore_card
from tests.toolkit import arcade, step

WKEX = "wkex-0000000f"
CNT3 = "cnt3-0000000a"


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


def play_example(led: Ledger) -> str:
    """wkex: level 1 in 44 actions, level 2 in 400, level 3 not reached; cnt3: level 1 in 4, level 2 in 3."""
    arc = arcade()
    led.attach(arc)
    card = arc.open_scorecard()
    env = arc.make("wkex", scorecard_id=card)
    for n in (44, 400):
        for _ in range(n - 1):
            step(env, 2)
        step(env, 1)
    env = arc.make("cnt3", scorecard_id=card, seed=0)
    for a in [2, 2, 1, 1, 1, 1, 1]:
        step(env, a)
    arc.close_scorecard(card)
    return card


def v2_file(tmp_path: Path) -> Path:
    p = tmp_path / "v2.json"
    p.write_text(
        json.dumps(
            [
                {"game_id": WKEX, "title": "WKEX", "baseline_actions": [44, 200, 73]},
                {"game_id": CNT3, "title": "CNT3", "tags": ["keyboard", "counting"], "baseline_actions": [4, 3, 2, 5]},
            ]
        )
    )
    return p


def test_worked_example_by_hand(tmp_path: Path, db_path: Path) -> None:
    """The README's example.

    As played (wkex [22,123,73], cnt3 [2,3,2]):
      wkex  levels (22/44)^2*100 = 25, (123/400)^2*100 = 9.455625, 0 (not reached)
            game = (1*25 + 2*9.455625 + 3*0) / 6 = 7.318541..., cap 3/6*100 = 50 -> 7.318541...
      cnt3  levels (2/4)^2*100 = 25, (3/3)^2*100 = 100, 0 -> (25 + 200 + 0)/6 = 37.5, cap 50 -> 37.5
      card  (7.318541... + 37.5) / 2 = 22.409270...
    Under v2 (wkex [44,200,73], cnt3 [4,3,2,5], one level more):
      wkex  (44/44)^2*100 = 100, (200/400)^2*100 = 25, 0 -> (100 + 50 + 0)/6 = 25.0, cap 50 -> 25.0
      cnt3  100, 100, 0, 0 (level 4 not reached) -> (100 + 200 + 0 + 0)/10 = 30, cap (1+2)/10*100 = 30 -> 30.0
      card  (25 + 30) / 2 = 27.5; change +5.090729...; games sorted: wkex +17.68, cnt3 -7.5
    """
    with Ledger.open(db_path) as led:
        card = play_example(led)
    assert run(db_path, "baselines", "import", str(v2_file(tmp_path)), "--label", "v2").exit_code == 0
    res = run(db_path, "rescore", card, "--baselines", "v2", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["match"] == "exact" and out["ref"] == "v2"
    (c,) = out["cards"]
    wkex_old = (1 * 25.0 + 2 * ((123 / 400) ** 2 * 100) + 3 * 0.0) / 6
    assert wkex_old == pytest.approx(7.318541666666667)
    assert c["score_old"] == (wkex_old + 37.5) / 2
    assert c["score_new"] == 27.5
    assert c["delta"] == 27.5 - (wkex_old + 37.5) / 2
    assert round(c["delta"], 4) == 5.0907
    assert [g["game_id"] for g in c["games"]] == [WKEX, CNT3]  # largest change first
    wk, cn = c["games"]
    assert (wk["score_old"], wk["score_new"], wk["delta"]) == (wkex_old, 25.0, 25.0 - wkex_old)
    assert (cn["score_old"], cn["score_new"], cn["delta"]) == (37.5, 30.0, -7.5)
    assert wk["how_new"] == "exact" and wk["used_new"] == WKEX
    (run_wk,) = wk["runs"]
    assert run_wk["best"] is True and run_wk["state"] == "NOT_FINISHED"
    assert [
        (lv["baseline_old"], lv["baseline_new"], lv["actions_old"], lv["actions_new"], lv["score_old"], lv["score_new"])
        for lv in run_wk["levels"]
    ] == [
        (22, 44, 44, 44, 25.0, 100.0),
        (123, 200, 400, 400, (123 / 400) ** 2 * 100, 25.0),
        (73, 73, 0, 0, 0.0, 0.0),
    ]
    (run_cn,) = cn["runs"]
    assert [
        (lv["baseline_old"], lv["baseline_new"], lv["actions_old"], lv["actions_new"], lv["score_old"], lv["score_new"])
        for lv in run_cn["levels"]
    ] == [
        (2, 4, 4, 4, 25.0, 100.0),
        (3, 3, 3, 3, 100.0, 100.0),
        (2, 2, 0, 0, 0.0, 0.0),
        (None, 5, None, 0, None, 0.0),
    ]
    assert {t["tag"]: (t["score_old"], t["score_new"]) for t in c["tags"]} == {
        "keyboard": (37.5, 30.0),
        "counting": (37.5, 30.0),
    }
    text = run(db_path, "rescore", card, "--baselines", "v2")
    assert text.exit_code == 0
    lines = text.stdout.splitlines()
    assert lines[0] == "rescored 1 card(s) under v2 (" + out["set_id"][:12] + "), match exact: 1 changed"
    assert f"card {card}   score 22.41 -> 27.50 (+5.09)" in lines[2]
    assert lines[3] == f"  game {WKEX}   score 7.32 -> 25.00 (+17.68)"
    assert "          1        22 -> 44           44   25.00 -> 100.00" in lines
    assert "          2      123 -> 200          400     9.46 -> 25.00" in lines
    assert f"  game {CNT3}   score 37.50 -> 30.00 (-7.50)" in lines
    assert "          4          - -> 5       - -> 0         - -> 0.00" in lines
    assert lines[-1] == "  tags: counting 37.50 -> 30.00, keyboard 37.50 -> 30.00"


def test_rescore_is_a_read(tmp_path: Path, db_path: Path) -> None:
    with Ledger.open(db_path) as led:
        play_example(led)
    assert run(db_path, "baselines", "import", str(v2_file(tmp_path)), "--label", "v2").exit_code == 0
    with Ledger.open(db_path) as led:
        before = verify_ledger(led.store)
    for args in (["--all"], ["--all", "--json"], ["--all", "--match", "base", "--all-environments"]):
        assert run(db_path, "rescore", "--baselines", "v2", *args).exit_code == 0
    with Ledger.open(db_path) as led:
        after = verify_ledger(led.store)
    assert after.ok and (after.events, after.head) == (before.events, before.head)


def test_cards_sorted_by_largest_change(tmp_path: Path, db_path: Path) -> None:
    arc = arcade()
    with Ledger.open(db_path) as led:
        led.attach(arc)
        small = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=small, seed=0)
        for a in [1, 1]:  # cnt3 level 1 in 2 actions: 100, weight 1 of 6 -> 16.67
            step(env, a)
        big = arc.open_scorecard()
        env = arc.make("wkex", scorecard_id=big)
        step(env, 1)  # wkex level 1 in 1 action: 115, weighted 115/6 = 19.17, capped at 1/6 -> 16.67
        same = arc.open_scorecard()
        env = arc.make("clk2", scorecard_id=same)
        step(env, 6, 20, 28)  # clk2 level 1 in 1 click: 100, weight 1 of 3 -> 33.33
    p = tmp_path / "b.json"
    p.write_text(
        json.dumps(
            [
                {"game_id": CNT3, "baseline_actions": [2, 3]},  # 2 levels: 100*1/3 = 33.33
                {"game_id": WKEX, "baseline_actions": [22]},  # 1 level: 115, capped at 1/1 -> 100
                {"game_id": "clk2-0000000b", "tags": ["click"], "baseline_actions": [1, 2]},
            ]
        )
    )
    assert run(db_path, "baselines", "import", str(p), "--label", "b").exit_code == 0
    out = json.loads(run(db_path, "rescore", "--all", "--baselines", "b", "--json").stdout)
    got = [(c["card_id"], round(c["score_old"], 4), round(c["score_new"], 4)) for c in out["cards"]]
    assert got == [(big, 16.6667, 100.0), (small, 16.6667, 33.3333), (same, 33.3333, 33.3333)]
    text = run(db_path, "rescore", "--all", "--baselines", "b").stdout
    assert text.splitlines()[0].endswith(": 2 changed")


def test_match_base_names_the_version_used(tmp_path: Path, db_path: Path) -> None:
    with Ledger.open(db_path) as led:
        card = play_example(led)
    p = tmp_path / "new.json"
    p.write_text(
        json.dumps(
            [
                {"game_id": "wkex-000000ff", "baseline_actions": [44, 200, 73]},
                {"game_id": "wkex-000000aa", "baseline_actions": [22, 123, 73]},
                {"game_id": "cnt3-0000000b", "baseline_actions": [4, 3, 2, 5], "tags": ["keyboard", "counting"]},
            ]
        )
    )
    assert run(db_path, "baselines", "import", str(p), "--label", "new").exit_code == 0
    exact = json.loads(run(db_path, "rescore", card, "--baselines", "new", "--json").stdout)["cards"][0]
    assert exact["score_new"] == 0.0
    assert {g["game_id"]: g["how_new"] for g in exact["games"]} == {WKEX: "missing", CNT3: "missing"}
    base = json.loads(run(db_path, "rescore", card, "--baselines", "new", "--match", "base", "--json").stdout)
    (c,) = base["cards"]
    games = {g["game_id"]: g for g in c["games"]}
    # Two versions of wkex in the set: the first in game-id order (wkex-000000aa, same numbers as played) is used.
    assert (games[WKEX]["how_new"], games[WKEX]["used_new"]) == ("base", "wkex-000000aa")
    assert games[WKEX]["versions"] == ["wkex-000000aa", "wkex-000000ff"]
    assert games[WKEX]["delta"] == 0.0
    assert (games[CNT3]["used_new"], games[CNT3]["score_new"]) == ("cnt3-0000000b", 30.0)
    text = run(db_path, "rescore", card, "--baselines", "new", "--match", "base").stdout
    assert (
        f"  game {WKEX}   score 7.32 -> 7.32 (+0.00)   scored with wkex-000000aa (also in set: wkex-000000ff)" in text
    )
    exp = run(db_path, "export", card, "--baselines", "new", "--match", "base")
    assert exp.exit_code == 0
    assert json.loads(exp.stdout)["score"] == c["score_new"]
    assert exp.stderr.splitlines() == [
        f"{WKEX}: scored with the baselines of wkex-000000aa (first of 2 versions; also wkex-000000ff)",
        f"{CNT3}: scored with the baselines of cnt3-0000000b",
    ]
    rep = run(db_path, "replay", card, "--baselines", "new", "--match", "base")
    assert rep.stdout.splitlines()[0].startswith("scored under baselines ")
    assert f"  {CNT3}: scored with the baselines of cnt3-0000000b" in rep.stdout.splitlines()


def test_match_base_prefers_exact_and_handles_unversioned_ids() -> None:
    entries = {
        "ls20": BaselineEntry(game_id="ls20", baseline_actions=[1]),
        "ab12-2": BaselineEntry(game_id="ab12-2", baseline_actions=[2]),
        "ab12-1": BaselineEntry(game_id="ab12-1", baseline_actions=[3]),
    }
    eff, matches = match_baselines(["ls20-9607627b", "ab12-2", "ab12-3", "zz99-1"], entries, "base")
    assert [(m.game_id, m.used, m.how) for m in matches] == [
        ("ls20-9607627b", "ls20", "base"),
        ("ab12-2", "ab12-2", "exact"),
        ("ab12-3", "ab12-1", "base"),
        ("zz99-1", None, "missing"),
    ]
    assert eff["ab12-3"].baseline_actions == [3] and "zz99-1" not in eff
    _, exact = match_baselines(["ls20-9607627b"], entries, "exact")
    assert [m.how for m in exact] == ["missing"]


def test_competition_view(tmp_path: Path, db_path: Path) -> None:
    """Unplayed games appear with a 0-action run and count 0 in the mean, on both sides (each its own set)."""
    with Ledger.open(db_path) as led:
        card = play_example(led)  # played under the 6 test games: 4 unplayed
        cs = led.load_card(card)
        played = led.card_baselines(cs)
        new = dict(played)
        new.pop("nobl-0000000c")
        r = rescore_card(cs, played, new, all_environments=True)
    wkex_old = (1 * 25.0 + 2 * ((123 / 400) ** 2 * 100)) / 6
    assert r.score_old == (wkex_old + 37.5) / 6
    assert r.score_new == (wkex_old + 37.5) / 5
    games = {g.game_id: g for g in r.games}
    assert set(games) == {WKEX, CNT3, "clk2-0000000b", "nobl-0000000c", "nbas-0000000d", "shrt-0000000e"}
    nobl = games["nobl-0000000c"]
    assert (nobl.played, nobl.score_old, nobl.score_new, nobl.how_new) == (False, 0.0, None, "absent")
    clk = games["clk2-0000000b"]
    assert (clk.played, clk.how_new, clk.runs[0].guid, clk.runs[0].score_new) == (False, "unplayed", None, 0.0)
    assert [(lv.baseline_new, lv.actions_new) for lv in clk.runs[0].levels] == [(1, 0), (2, 0)]
    out = json.loads(run(db_path, "export", card, "--all-environments").stdout)
    assert [e["id"] for e in out["environments"]] == [
        WKEX,
        CNT3,
        "clk2-0000000b",
        "nbas-0000000d",
        "nobl-0000000c",
        "shrt-0000000e",
    ]
    assert out["total_environments"] == 6 and out["score"] == r.score_old
    assert "guid" not in out["environments"][2]["runs"][0]


def test_rescore_cli_errors(tmp_path: Path, db_path: Path) -> None:
    with Ledger.open(db_path) as led:
        card = play_example(led)
    assert run(db_path, "baselines", "import", str(v2_file(tmp_path)), "--label", "v2").exit_code == 0
    r = run(db_path, "rescore", card, "--baselines", "nope")
    assert r.exit_code == 1
    assert r.stderr.strip() == "Error: no baseline set or label 'nope' in this ledger (see `ledger baselines list`)"
    r = run(db_path, "rescore", "no-such-card", "--baselines", "v2")
    assert r.exit_code == 1 and "no card 'no-such-card'" in r.stderr and r.stdout == ""
    r = run(db_path, "rescore", card, "no-such-card", "--baselines", "v2", "--json")
    assert r.exit_code == 1 and r.stdout == ""  # nothing printed for the good card either
    assert run(db_path, "rescore", "--baselines", "v2").exit_code == 2
    assert run(db_path, "rescore", card, "--all", "--baselines", "v2").exit_code == 2
    assert run(db_path, "rescore", card).exit_code == 2  # --baselines is required
    assert run(db_path, "rescore", card, "--baselines", "v2", "--match", "fuzzy").exit_code == 2
    r = run(db_path, "export", card, "--baselines", "nope")
    assert r.exit_code == 1 and r.stdout == ""
    r = run(db_path, "replay", card, "--baselines", "nope")
    assert r.exit_code == 1 and r.stdout == ""


def test_replay_with_baselines(tmp_path: Path, db_path: Path) -> None:
    with Ledger.open(db_path) as led:
        card = play_example(led)
    imp = json.loads(run(db_path, "baselines", "import", str(v2_file(tmp_path)), "--label", "v2", "--json").stdout)
    sid = imp["set_id"]
    r = run(db_path, "replay", card, "--baselines", "v2")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"scored under baselines {sid[:12]} (played under ")
    assert lines[1] == f"card {card}   score 27.50"
    j = json.loads(run(db_path, "replay", card, "--baselines", sid[:8], "--json").stdout)
    assert j["scorecard"]["score"] == 27.5
    assert j["baselines"]["set_id"] == sid and j["baselines"]["match"] == "exact"
    plain = json.loads(run(db_path, "replay", card, "--json").stdout)
    assert "baselines" not in plain and plain["scorecard"]["score"] != 27.5
