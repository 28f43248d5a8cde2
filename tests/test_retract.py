"""`ledger retract`: a card withdrawn from lists, comparisons, leaderboards, the viewer and bundles, its record kept
and still read by export, replay and audit; on both backends. Commands run in-process through Click's runner (the
same main, errors and exit codes), the key ones also as the installed program in a child process."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from ledger import Ledger
from ledger.app.retract import retract_card
from ledger.cli import cli
from ledger.web.server import create_app
from tests.cli_run import append_open_card, ledger, no_traceback
from tests.replayed import replayed_cards


def _inproc(*args: str) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` through Click's runner (an escaping exception fails the test with its traceback)."""
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return subprocess.CompletedProcess(list(args), r.exit_code, r.stdout, r.stderr)


def _ok(*args: str, child: bool = False) -> str:
    r = (ledger if child else _inproc)(*args)
    no_traceback(r)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _two_demo_cards(db: str) -> tuple[str, str]:
    """Two real cards played through the toolkit (both tagged demo), oldest first."""
    _ok("--db", db, "demo")
    _ok("--db", db, "demo", "--seed", "3")
    rows = json.loads(_ok("--db", db, "cards", "--json"))
    return rows[0]["card_id"], rows[1]["card_id"]


def _fails(code: int, *args: str, child: bool = False) -> str:
    r = (ledger if child else _inproc)(*args)
    no_traceback(r)
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("Error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


def test_retract_end_to_end(backend_url: str, tmp_path: Path) -> None:
    db = backend_url
    a, b = _two_demo_cards(db)
    exported = _ok("--db", db, "export", a)
    before = _ok("--db", db, "verify")
    assert "OK:" in before

    # Bad input: nothing written, one line, its exit code.
    assert "give a reason" in _fails(2, "--db", db, "retract", a, "--reason", "   ", child=True)
    assert "no card 'zzzz'" in _fails(1, "--db", db, "retract", "zzzz", "--reason", "x")
    r = ledger("--db", db, "retract", a)
    assert r.returncode == 2 and "--reason" in r.stderr

    out = _ok("--db", db, "retract", a[:6], "--reason", "scored  by a  dishonest agent", child=True)
    assert out.startswith(f"card {a} retracted on ") and "reason: scored by a dishonest agent" in out
    assert "already retracted on " in _fails(2, "--db", db, "retract", a, "--reason", "again")

    # Left out of every list by default, listed and marked on request.
    listed = json.loads(_ok("--db", db, "cards", "--json"))
    assert [r["card_id"] for r in listed] == [b]
    every = json.loads(_ok("--db", db, "cards", "--json", "--include-retracted"))
    assert [(r["card_id"], r["retract_reason"]) for r in every] == [(a, "scored by a dishonest agent"), (b, None)]
    assert f"{a} (retracted)" in _ok("--db", db, "cards", "--include-retracted")
    with Ledger.open(db, readonly=True) as led:
        assert [c.card_id for c in replayed_cards(led)] == [b]
        assert [(c.card_id, c.retract_reason) for c in replayed_cards(led, include_retracted=True)] == [
            (a, "scored by a dishonest agent"),
            (b, None),
        ]
    assert a not in _ok("--db", db, "cards", "--tag", "demo")
    cmp = json.loads(_ok("--db", db, "compare", "--tag", "demo", "--json"))
    assert [(t["cards"], t["best_card"]) for t in cmp["tags"]] == [(1, b)]
    assert "is retracted on" in _fails(2, "--db", db, "compare", a[:8], b[:8], child=True)
    text = _ok("--db", db, "compare", a[:8], b[:8], "--include-retracted")
    assert "retracted on " in text and "(not ranked)" in text
    cmp = json.loads(_ok("--db", db, "compare", a, b, "--include-retracted", "--json"))
    assert [lr["best_card"] for lr in cmp["leaderboard"]] == [b] and cmp["leaderboard"][0]["cards"] == 1

    # Still read, and said, by export (stderr only: the document is the toolkit's), replay and audit.
    r = ledger("--db", db, "export", a)
    assert r.returncode == 0 and r.stdout == exported
    assert r.stderr.startswith(f"Note: card {a} was retracted on ") and "dishonest agent" in r.stderr
    assert "reason: scored by a dishonest agent" in _ok("--db", db, "replay", a)
    assert json.loads(_ok("--db", db, "replay", a, "--json"))["retracted"]["reason"] == "scored by a dishonest agent"
    out = _ok("--db", db, "audit", a)
    assert "NOTE this card was retracted on " in out and "PASS consistency" in out and "FAIL" not in out
    assert json.loads(_ok("--db", db, "audit", a, "--json"))["retracted"]["reason"] == "scored by a dishonest agent"
    assert "OK:" in _ok("--db", db, "verify")

    # Bundles leave it out unless asked.
    site = tmp_path / "site"
    _ok("--db", db, "bundle", "--all", "-o", str(site))
    assert not list(site.glob(f"card-{a}*")) and list(site.glob(f"card-{b}*"))
    assert "is retracted on" in _fails(2, "--db", db, "bundle", a[:8], "-o", str(tmp_path / "one"))
    _ok("--db", db, "bundle", "--all", "--include-retracted", "-o", str(site))
    page = next(site.glob(f"card-{a}*")).read_text()
    assert 'id="retracted"' in page and "dishonest agent" in page


def test_an_open_card_is_closed_before_it_is_retracted(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    append_open_card(db, "open-card", datetime.now(UTC) - timedelta(minutes=2))
    assert "close it first" in _fails(2, "--db", db, "retract", "open-card", "--reason", "x")
    _ok("--db", db, "close", "open-card")
    _ok("--db", db, "retract", "open-card", "--reason", "x")


def test_a_retraction_days_after_the_close_is_no_lifecycle_problem(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    a, _ = _two_demo_cards(db)
    with Ledger.open(db) as led:
        retract_card(led, a, "late", ts=datetime.now(UTC) + timedelta(days=3))
    out = _ok("--db", db, "audit", a)
    assert "FAIL" not in out and "WARN" not in out, out


def test_the_viewer_shows_a_retracted_card_as_such(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    a, b = _two_demo_cards(db)
    _ok("--db", db, "retract", a, "--reason", "withdrawn by its author")
    with Ledger.open(db, readonly=True) as led:
        client = create_app(led).test_client()
        home = client.get("/").get_data(as_text=True)
        assert b in home and f'data-card="{a}"' not in home and "1 retracted card(s) left out" in home
        shown = client.get("/?retracted=1").get_data(as_text=True)
        assert f'data-card="{a}"' in shown and 'data-k="retracted"' in shown
        card = client.get(f"/card?id={a[:6]}")
        assert card.status_code == 200
        html = card.get_data(as_text=True)
        assert 'id="retracted"' in html and "withdrawn by its author" in html
        refused = client.get(f"/compare?card={a}&card={b}")
        assert refused.status_code == 400 and "retracted=1" in refused.get_data(as_text=True)
        assert client.get(f"/compare?card={a}&card={b}&retracted=1").status_code == 200


def test_prefixes_everywhere_and_ambiguity_lists_candidates(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    for cid in ("9ad7-one", "9ad7-two", "44a4-three"):
        append_open_card(db, cid, datetime.now(UTC) - timedelta(minutes=2))
    out = _ok("--db", db, "compare", "9ad7-o", "44a4")
    assert "9ad7-one" in out and "44a4-three" in out
    err = _fails(2, "--db", db, "compare", "9ad7", "44a4")
    assert "ambiguous" in err and "9ad7-one" in err and "9ad7-two" in err
    _ok("--db", db, "bundle", "44a", "-o", str(tmp_path / "b"))
    _fails(2, "--db", db, "bundle", "9ad7", "-o", str(tmp_path / "c"))
    with Ledger.open(db, readonly=True) as led:
        client = create_app(led).test_client()
        assert client.get("/card?id=44a4").status_code == 200
        page = client.get("/card?id=9ad7")
        html = page.get_data(as_text=True)
        assert (
            page.status_code == 400 and 'id="candidates"' in html and "card?id=9ad7-two" in html.replace("&amp;", "&")
        )
        missing = client.get("/replay?card=44a4&game=nope-00000000&play=1")
        assert missing.status_code == 404 and 'id="back"' in missing.get_data(as_text=True)


def test_the_lapsed_card_rule_is_the_same_in_cards_the_api_and_the_viewer(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    append_open_card(db, "idle-card", datetime.now(UTC) - timedelta(hours=5))
    append_open_card(db, "busy-card", datetime.now(UTC) - timedelta(minutes=1))
    listed = {r["card_id"]: (r["close_reason"], r["lapsed"]) for r in json.loads(_ok("--db", db, "cards", "--json"))}
    assert listed == {"idle-card": ("idle", True), "busy-card": (None, False)}
    with Ledger.open(db, readonly=True) as led:
        assert {s.card_id: (s.close_reason, s.lapsed) for s in replayed_cards(led)} == listed
        client = create_app(led).test_client()
        home = client.get("/").get_data(as_text=True)
        row = home[home.index('data-card="idle-card"') :].split("</tr>", 1)[0]
        assert 'data-state="closed"' in row and "(idle)" in row
        page = client.get("/card?id=idle").get_data(as_text=True)
        assert "(idle)" in page
