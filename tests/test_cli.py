"""The ledger command: every issue-2 command end to end, on a real ledger file, through Click's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli import cli
from ledger.store.base import head_revision
from tests.toolkit import arcade, step


@pytest.fixture
def played(db_path: Path) -> tuple[Path, str, str]:
    """A ledger with the worked example played and closed; returns (db, card, the toolkit's close JSON)."""
    arc = arcade()
    with Ledger.open(db_path) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("wkex", scorecard_id=card)
        for n in (44, 400):
            for _ in range(n - 1):
                step(env, 2)
            step(env, 1)
        doc = arc.close_scorecard(card)
        closed, pretty = doc.model_dump_json(), doc.model_dump_json(indent=2)
    (db_path.parent / "pretty.json").write_text(pretty)
    return db_path, card, closed


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    r = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return r.exit_code, r.output


def test_init_creates_the_schema(tmp_path: Path) -> None:
    code, out = run("--db", str(tmp_path / "new.sqlite"), "init")
    assert code == 0 and f"schema {head_revision()})" in out


def test_export_matches_the_toolkit(played, tmp_path: Path) -> None:
    db, card, closed = played
    code, out = run("--db", str(db), "export", card)
    assert code == 0 and out == closed + "\n"
    code, out = run("--db", str(db), "export", card, "--indent", "2")
    assert out == (db.parent / "pretty.json").read_text() + "\n"
    target = tmp_path / "card.json"
    code, out = run("--db", str(db), "export", card, "-o", str(target))
    assert code == 0 and out == "" and target.read_text() == closed + "\n"


def test_export_until_shows_the_card_as_it_stood(played) -> None:
    db, card, _ = played
    with Ledger.open(db) as led:
        rows = led.store.read_stream("card:" + card)
    code, out = run("--db", str(db), "export", card, "--until", str(rows[3].version))
    doc = json.loads(out)
    assert code == 0 and doc["environments"][0]["runs"][0]["actions"] == 2  # PlayStarted, then 2 actions


def test_replay_shows_the_arithmetic(played) -> None:
    db, card, _ = played
    code, out = run("--db", str(db), "replay", card)
    assert code == 0
    assert "(1x25 + 2x9.46 + 3x0)/6 = 7.32, cap 3/6 = 50 -> 7.32" in out
    assert "        1        22       44    25.00" in out
    code, out = run("--db", str(db), "replay", card, "--json")
    doc = json.loads(out)
    assert doc["plays"]["wkex-0000000f"][0]["level_marks"] == [[1, 44], [2, 444]]
    assert round(doc["scorecard"]["score"], 2) == 7.32


def test_cards_lists_and_json(played) -> None:
    db, card, _ = played
    code, out = run("--db", str(db), "cards")
    assert code == 0 and card in out and "explicit" in out
    code, out = run("--db", str(db), "cards", "--json")
    rows = json.loads(out)
    assert [(r["card_id"], r["games"], r["actions"], round(r["score"], 2)) for r in rows] == [(card, 1, 444, 7.32)]


def test_unknown_card_is_one_line_exit_1(played) -> None:
    db, _, _ = played
    for cmd in ("export", "replay"):
        code, out = run("--db", str(db), cmd, "no-such-card")
        assert code == 1
        assert out == "Error: no card 'no-such-card' in this ledger (see `ledger cards`)\n"


def test_ledger_db_env_var(played) -> None:
    db, card, _ = played
    code, out = run("cards", env={"LEDGER_DB": str(db)})
    assert code == 0 and card in out


def test_verify_ok_then_tampered(played, tmp_path: Path) -> None:
    import shutil
    import sqlite3

    db, _, _ = played
    code, out = run("--db", str(db), "verify")
    assert code == 0 and out.startswith("OK: ") and "head " in out
    bad = tmp_path / "bad.sqlite"
    shutil.copy(db, bad)
    con = sqlite3.connect(bad)
    con.execute("DROP TRIGGER events_no_update")
    con.execute(
        "UPDATE events SET body = CAST(replace(CAST(body AS TEXT), '\"action\":2', '\"action\":3') AS BLOB)"
        " WHERE seq = 10"
    )
    con.commit()
    con.close()
    code, out = run("--db", str(bad), "verify")
    assert code == 1 and "FAIL" in out and "do not match the event's hash" in out


def test_bad_database_path_is_a_clean_error(tmp_path: Path) -> None:
    code, out = run("--db", str(tmp_path / "missing" / "l.sqlite"), "cards")
    assert code == 1 and "no ledger at" in out and "Traceback" not in out  # a read command creates nothing
    code, out = run("--db", str(tmp_path / "missing" / "l.sqlite"), "init")
    assert code == 1 and "does not exist" in out and "Traceback" not in out
    assert not (tmp_path / "missing").exists()


def test_demo(tmp_path: Path) -> None:
    code, out = run("--db", str(tmp_path / "demo.sqlite"), "demo")
    assert code == 0
    assert "game dm01-00000001" in out and "game dm02-00000002" in out and "ledger: sqlite:///" in out
