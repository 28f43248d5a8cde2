"""Baseline sets as data: content addressing, import sources, labels, references, show/list/diff, error paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import Ledger
from ledger.app import baseline_sets as bs
from ledger.cli import cli
from ledger.domain import baselines as bl
from ledger.domain.events import BaselineEntry, LabelSet, decode, label_stream
from tests.toolkit import ENV_DIR, arcade, step

TEST_SET_GAMES = ["clk2-0000000b", "cnt3-0000000a", "nbas-0000000d", "nobl-0000000c", "shrt-0000000e", "wkex-0000000f"]


def run(db: Path | str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)


def metadata() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(ENV_DIR.rglob("metadata.json"))]


def write_tree(root: Path, metas: list[dict], names: list[str]) -> Path:
    for m, name in zip(metas, names, strict=True):
        d = root / name / "v"
        d.mkdir(parents=True)
        (d / "metadata.json").write_text(json.dumps(m, indent=3))
    return root


def import_id(db: Path | str, source: Path, *extra: str) -> str:
    r = run(db, "baselines", "import", str(source), "--json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["set_id"]


def events(db: Path) -> int:
    with Ledger.open(db) as led:
        return led.store.count()


# -- content addressing -----------------------------------------------------------------------------------


def test_same_content_in_any_order_gives_the_same_id(tmp_path: Path, db_path: Path) -> None:
    metas = metadata()
    tree_a = write_tree(tmp_path / "a", metas, [f"g{i}" for i in range(len(metas))])
    # Reversed folder order and reversed keys inside every file.
    rev = [dict(reversed(list(m.items()))) for m in reversed(metas)]
    tree_b = write_tree(tmp_path / "b", rev, [f"g{i}" for i in range(len(rev))])
    api = tmp_path / "games.json"
    api.write_text(json.dumps(metas[::2] + metas[1::2]))  # /api/games-like: every field the toolkit lists
    first = run(db_path, "baselines", "import", str(ENV_DIR), "--json")
    assert first.exit_code == 0
    sid = json.loads(first.stdout)["set_id"]
    assert json.loads(first.stdout)["new"] is True
    n = events(db_path)
    for src in (tree_a, tree_b, api):
        again = json.loads(run(db_path, "baselines", "import", str(src), "--json").stdout)
        assert (again["set_id"], again["new"], again["games"]) == (sid, False, 6)
    assert events(db_path) == n  # nothing new written
    # The set live capture records for the same games (from the toolkit's EnvironmentInfo objects) is the same.
    arc = arcade()
    with Ledger.open(db_path) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        step(arc.make("cnt3", scorecard_id=card), 1)
        assert led.load_card(card).baselines_id == sid
        assert led.baseline_set_ids() == [sid]


def test_any_changed_number_gives_a_new_id(db_path: Path) -> None:
    metas = metadata()
    base = bl.set_id(bl.entry_from_metadata(json.dumps(m).encode()) for m in metas)
    seen = {base}
    for i, m in enumerate(metas):
        for j in range(len(m.get("baseline_actions") or [])):
            for delta in (1, -1):
                changed = [dict(x) for x in metas]
                changed[i]["baseline_actions"] = list(m["baseline_actions"])
                changed[i]["baseline_actions"][j] += delta
                sid = bl.set_id(bl.entry_from_metadata(json.dumps(x).encode()) for x in changed)
                assert sid not in seen
                seen.add(sid)
    # A level added, a tag changed, a title changed, an empty list vs no list: all new ids.
    for change in (
        lambda ms: ms[0].__setitem__("baseline_actions", [*ms[0]["baseline_actions"], 1]),
        lambda ms: ms[0].__setitem__("tags", ["other"]),
        lambda ms: ms[0].__setitem__("title", "x"),
        lambda ms: ms[3].pop("baseline_actions"),  # nobl: [] -> missing
    ):
        changed = [json.loads(json.dumps(x)) for x in metas]
        change(changed)
        sid = bl.set_id(bl.entry_from_metadata(json.dumps(x).encode()) for x in changed)
        assert sid not in seen
        seen.add(sid)
    # Fields that do not enter scoring (fps, class name, download date) do not change the id.
    same = [dict(x, default_fps=30, class_name="X", date_downloaded="2030-01-01T00:00:00Z") for x in metas]
    assert bl.set_id(bl.entry_from_metadata(json.dumps(x).encode()) for x in same) == base


@settings(max_examples=50, deadline=None)
@given(st.permutations(list(range(6))))
def test_set_id_ignores_order(order: list[int]) -> None:
    entries = [bl.entry_from_metadata(json.dumps(m).encode()) for m in metadata()]
    assert bl.set_id([entries[i] for i in order]) == bl.set_id(entries)


# -- import sources and errors ------------------------------------------------------------------------------


def test_import_sources(tmp_path: Path, db_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"game_id": "ab12-1", "baseline_actions": [3, 4], "default_fps": 5}))
    assert json.loads(run(db_path, "baselines", "import", str(one), "--json").stdout)["games"] == 1
    sid = import_id(db_path, ENV_DIR, "--label", "v1")
    shown = run(db_path, "baselines", "show", "v1", "--json")
    dumped = tmp_path / "shown.json"
    dumped.write_text(shown.stdout)
    assert import_id(db_path, dumped) == sid  # `show --json` is importable as is
    dup = tmp_path / "dup.json"
    dup.write_text(
        json.dumps([{"game_id": "ab12-1", "baseline_actions": [1]}, {"game_id": "ab12-1", "baseline_actions": [3, 4]}])
    )
    r = run(db_path, "baselines", "import", str(dup), "--json")
    assert r.exit_code == 0
    assert "Warning: ab12-1 appears 2 times" in r.stderr
    assert (
        json.loads(r.stdout)["set_id"]
        == json.loads(run(db_path, "baselines", "import", str(one), "--json").stdout)["set_id"]
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        (
            '[{"game_id": "a-1", "baseline_actions": ["x"]}]',
            "Expected `int`, got `str` - at `$[0].baseline_actions[0]`",
        ),
        ('[{"game_id": "a-1", "baseline_actions": [1, -2]}]', "a-1 has a negative baseline_actions value"),
        ('[{"title": "no id"}]', "Object missing required field `game_id` - at `$[0]`"),
        ('[{"game_id": " "}]', "entry 0 has an empty game_id"),
        ("[3]", "Expected `object`, got `int` - at `$[0]`"),
        ('{"games": []}', "expected a JSON list of game entries"),
        ("[]", "holds no game entries"),
    ],
)
def test_bad_json_exits_2_and_writes_nothing(tmp_path: Path, db_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = run(db_path, "baselines", "import", str(bad), "--label", "x")
    assert r.exit_code == 2
    assert message in r.stderr
    assert r.stderr.startswith("Error: ") and r.stderr.count("\n") == 1  # one line, no traceback
    assert not db_path.exists()  # not even an empty ledger
    import_id(db_path, ENV_DIR)
    n = events(db_path)
    assert run(db_path, "baselines", "import", str(bad), "--label", "x").exit_code == 2
    assert events(db_path) == n


def test_bad_folders(tmp_path: Path, db_path: Path) -> None:
    tree = tmp_path / "envs"
    shutil.copytree(ENV_DIR, tree)
    (tree / "cnt3" / "0000000a" / "metadata.json").write_text("{broken")
    r = run(db_path, "baselines", "import", str(tree))
    assert r.exit_code == 2 and "1 metadata.json file(s) could not be read (use --skip-invalid" in r.stderr
    assert not db_path.exists()
    ok = run(db_path, "baselines", "import", str(tree), "--skip-invalid", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["games"] == 5
    assert "Warning: skipped" in ok.stderr and "cnt3" in ok.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no readable metadata.json" in run(db_path, "baselines", "import", str(empty)).stderr
    r = run(db_path, "baselines", "import", str(tmp_path / "nope.json"))
    assert r.exit_code == 2 and "does not exist" in r.stderr


# -- labels and references ---------------------------------------------------------------------------------


def label_events(db: Path) -> list[LabelSet]:
    with Ledger.open(db) as led:
        rows = [r for s in led.store.streams("label:") for r in led.store.read_stream(s.stream)]
        return sorted((decode(r.body) for r in rows), key=lambda e: e.ts)  # type: ignore[misc]


def test_labels(tmp_path: Path, db_path: Path) -> None:
    v1 = import_id(db_path, ENV_DIR, "--label", "v1")
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"game_id": "cnt3-0000000a", "baseline_actions": [9, 9, 9]}]))
    # Same content, same label: nothing new.
    r = run(db_path, "baselines", "import", str(ENV_DIR), "--label", "v1")
    assert r.exit_code == 0 and "label v1 already points at" in r.stdout
    assert len(label_events(db_path)) == 1
    # Another set under a taken label: refused, nothing written (not even the new set).
    n = events(db_path)
    r = run(db_path, "baselines", "import", str(other), "--label", "v1")
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        f"Error: label 'v1' already points at baseline set {v1[:12]}; use --move to point it at "
        f"{bl.set_id(bs.read_source(other).entries)[:12]} instead"
    )
    assert events(db_path) == n
    # --move: a new LabelSet; the latest one wins; the history is kept.
    r = run(db_path, "baselines", "import", str(other), "--label", "v1", "--move", "--json")
    assert r.exit_code == 0
    moved = json.loads(r.stdout)
    assert (moved["label_changed"], moved["label_previous"]) == (True, v1)
    assert [(e.label, e.set_id) for e in label_events(db_path)] == [("v1", v1), ("v1", moved["set_id"])]
    with Ledger.open(db_path) as led:
        labs = bs.labels(led)
        assert labs["v1"].set_id == moved["set_id"] and labs["v1"].history == (v1,)
        assert bs.resolve(led, "v1") == moved["set_id"]
    # A second label on the same set is fine; a set can have several labels.
    import_id(db_path, ENV_DIR, "--label", "public-2026.11")
    lst = json.loads(run(db_path, "baselines", "list", "--json").stdout)
    assert [(s["set_id"], s["labels"], s["games"], s["levels"]) for s in lst] == [
        (v1, ["public-2026.11"], 6, 9),
        (moved["set_id"], ["v1"], 1, 3),
    ]
    for bad in ("", "-x", "has space", "a" * 65, "0" * 64):
        r = run(db_path, "baselines", "import", str(ENV_DIR), "--label", bad)
        assert r.exit_code == 2 and "bad label" in r.stderr


def test_resolve_references(db_path: Path) -> None:
    # Two sets whose ids share their first 4 hex characters, found by trying variants (pure, fast).
    by_prefix: dict[str, list[BaselineEntry]] = {}
    n = 0
    while True:
        entries = [BaselineEntry(game_id="ab12-1", baseline_actions=[n])]
        p = bl.set_id(entries)[:4]
        if p in by_prefix:
            break
        by_prefix[p] = entries
        n += 1
    with Ledger.open(db_path) as led:
        a = led.record_baselines(by_prefix[p])
        b = led.record_baselines(entries)
        assert a[:4] == b[:4] and a != b
        assert bs.resolve(led, a) == a
        assert bs.resolve(led, b[:12]) == b
        assert bs.resolve(led, b[:12].upper()) == b
        with pytest.raises(bs.UnknownBaselineRef, match=f"'{p}' is ambiguous: 2 baseline sets start with it"):
            bs.resolve(led, p)
        with pytest.raises(bs.UnknownBaselineRef, match="no baseline set or label"):
            bs.resolve(led, a[:3])  # shorter than 4: not taken as a prefix
        with pytest.raises(bs.BaselinesInputError, match="looks like a baseline set id or id prefix"):
            bs.set_label(led, p, b)  # a label could hide the sets its characters are a prefix of
        assert bs.labels(led) == {}
    r = run(db_path, "baselines", "show", "zzzz")
    assert r.exit_code == 1
    assert r.stderr.strip() == "Error: no baseline set or label 'zzzz' in this ledger (see `ledger baselines list`)"
    r = run(db_path, "baselines", "diff", a, "zzzz")
    assert r.exit_code == 1 and "'zzzz'" in r.stderr


# -- show, list, diff ---------------------------------------------------------------------------------------


def test_show_and_list_text(db_path: Path) -> None:
    assert run(db_path, "init").exit_code == 0  # read commands never create the ledger
    assert run(db_path, "baselines", "list").stdout.strip() == (
        "no baseline sets in this ledger (see `ledger baselines import`)"
    )
    sid = import_id(db_path, ENV_DIR, "--label", "v1")
    out = run(db_path, "baselines", "show", sid[:6]).stdout.splitlines()
    assert out[0] == f"set {sid}"
    assert out[1].endswith("6 games, labels: v1")
    assert "  cnt3-0000000a            baselines [2, 3, 2]   tags keyboard, counting" in out
    assert "                           private p-count   levels easy | mid | hard" in out
    assert "  nbas-0000000d            baselines none   tags -" in out
    assert "  nobl-0000000c            baselines []   tags keyboard" in out
    lst = run(db_path, "baselines", "list").stdout.splitlines()
    assert lst[0].split() == ["set", "recorded", "games", "levels", "labels"]
    assert lst[1].startswith(sid[:12]) and lst[1].split()[-3:] == ["6", "9", "v1"]
    shown = json.loads(run(db_path, "baselines", "show", "v1", "--json").stdout)
    assert [e["game_id"] for e in shown["entries"]] == TEST_SET_GAMES
    assert shown["entries"][1] == {
        "game_id": "cnt3-0000000a",
        "title": "CNT3",
        "baseline_actions": [2, 3, 2],
        "tags": ["keyboard", "counting"],
        "private_tags": ["p-count"],
        "level_tags": [["easy"], ["mid"], ["hard"]],
    }


def test_diff(tmp_path: Path, db_path: Path) -> None:
    metas = {m["game_id"]: m for m in metadata()}
    new = [dict(m) for m in metas.values()]
    by = {m["game_id"]: m for m in new}
    by["wkex-0000000f"]["baseline_actions"] = [22, 123, 73, 84, 96]  # two levels added, none changed
    by["cnt3-0000000a"]["baseline_actions"] = [3, 3]  # level 1 changed, level 3 removed
    by["cnt3-0000000a"]["tags"] = ["keyboard"]
    by["shrt-0000000e"]["game_id"] = "shrt-000000ee"  # version bump, same numbers
    del by["nbas-0000000d"]
    new = [m for m in new if m["game_id"] != "nbas-0000000d"] + [{"game_id": "zz99-1", "baseline_actions": [5]}]
    f = tmp_path / "new.json"
    f.write_text(json.dumps(new))
    import_id(db_path, ENV_DIR, "--label", "old")
    import_id(db_path, f, "--label", "new")
    out = json.loads(run(db_path, "baselines", "diff", "old", "new", "--json").stdout)
    games = {(g["game_id"], g["status"]): g for g in out["games"]}
    wk = games[("wkex-0000000f", "changed")]
    assert (wk["levels_old"], wk["levels_new"], wk["levels_added"], wk["levels_removed"]) == (3, 5, 2, 0)
    assert wk["levels"] == [{"level": 4, "old": None, "new": 84}, {"level": 5, "old": None, "new": 96}]
    cn = games[("cnt3-0000000a", "changed")]
    assert cn["fields"] == ["baseline_actions", "tags"]
    assert cn["levels"] == [{"level": 1, "old": 2, "new": 3}, {"level": 3, "old": 2, "new": None}]
    assert (cn["levels_added"], cn["levels_removed"]) == (0, 1)
    assert ("shrt-0000000e", "removed") in games and ("shrt-000000ee", "added") in games
    assert ("nbas-0000000d", "removed") in games and ("zz99-1", "added") in games
    assert [g["game_id"] for g in out["games"] if g["status"] == "same"] == ["clk2-0000000b", "nobl-0000000c"]
    base = json.loads(run(db_path, "baselines", "diff", "old", "new", "--match", "base", "--json").stdout)
    sh = next(g for g in base["games"] if g["game_id"] == "shrt-0000000e")
    assert (sh["status"], sh["game_id_new"], sh["fields"], sh["levels"]) == ("changed", "shrt-000000ee", [], [])
    text = run(db_path, "baselines", "diff", "old", "new").stdout.splitlines()
    assert text[0].startswith("A ") and "(old)" in text[0] and "(new)" in text[0]
    assert "  changed  cnt3-0000000a   baseline_actions, tags   levels 3 -> 2" in text
    assert "      level 1: 2 -> 3" in text and "      level 3: 2 -> -" in text
    assert "  added    zz99-1   1 level(s)" in text and "  removed  nbas-0000000d   0 level(s)" in text
    assert text[-1] == "  2 game(s) the same"
    text = run(db_path, "baselines", "diff", "old", "new", "--match", "base", "--all").stdout.splitlines()
    assert "  changed  shrt-0000000e -> shrt-000000ee   version id only   1 levels" not in text
    assert "  changed  shrt-0000000e -> shrt-000000ee   version id only   1 level(s)" in text
    assert "  same     clk2-0000000b" in text


# -- both backends ----------------------------------------------------------------------------------------


def test_labels_and_rescore_on_each_backend(tmp_path: Path, backend_url: str) -> None:
    """Import, label, conflict, move, rescore and export --baselines on SQLite and PostgreSQL."""
    arc = arcade()
    with Ledger.open(backend_url) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("wkex", scorecard_id=card)
        for _ in range(43):
            step(env, 2)
        step(env, 1)  # level 1 in 44 actions: (22/44)^2*100 = 25, weight 1 of 6 -> 4.1667
        played = led.load_card(card).baselines_id
    other = tmp_path / "v2.json"
    other.write_text(json.dumps([{"game_id": "wkex-0000000f", "baseline_actions": [44, 200, 73]}]))
    v1 = import_id(backend_url, ENV_DIR, "--label", "v1")
    assert v1 == played
    r = run(backend_url, "baselines", "import", str(other), "--label", "v1")
    assert r.exit_code == 2
    v2 = import_id(backend_url, other, "--label", "v1", "--move")
    res = json.loads(run(backend_url, "rescore", card, "--baselines", "v1", "--json").stdout)
    (c,) = res["cards"]
    # The new score is the cap 1/6*100 = 16.666666666666664, a hair under the mean 100/6 = 16.666666666666668.
    assert (c["score_old"], c["score_new"], res["set_id"]) == (25.0 / 6, 1 / 6 * 100, v2)
    doc = json.loads(run(backend_url, "export", card, "--baselines", "v1").stdout)
    assert doc["score"] == 1 / 6 * 100
    with Ledger.open(backend_url) as led:
        assert [(e.label, e.set_id) for e in (decode(x.body) for x in led.store.read_stream(label_stream("v1")))] == [
            ("v1", v1),
            ("v1", v2),
        ]
