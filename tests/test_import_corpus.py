"""The bad-input corpus (tests/recordings_corpus/README.md): each case's message, exit code and recovered card."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain.events import card_stream
from tests.toolkit import ENV_DIR

CORPUS = Path(__file__).resolve().parent / "recordings_corpus"


def case_card(case: str) -> str:
    (card,) = [d.name for d in (CORPUS / case).iterdir() if d.is_dir()]
    return card


def case_file(case: str) -> Path:
    card = case_card(case)
    (f,) = (CORPUS / case / card).glob("*.jsonl")
    return f


def run(db: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--db", str(db), "import", *args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


# case -> (stderr lines after "FILE:LINE: " or "FILE: ", exit code with --strict)
CASES: dict[str, tuple[list[str], int]] = {
    "good": ([], 0),
    "truncated": (["Warning: {f}:7: truncated last line (6392 bytes, no newline): skipped"], 0),
    "not_json": (["Warning: {f}:3: not JSON: JSON is malformed: object keys must be strings (byte 80)"], 2),
    "wrong_types": (["Warning: {f}:5: wrong type: Expected `int`, got `str` - at `$.data.levels_completed`"], 2),
    "unknown_action": (["Warning: {f}:6: wrong type: unknown action id 'ACTION9' - at `$.data.action_input.id`"], 2),
    "reset_only": ([], 0),
    "mismatched": (
        [
            "Warning: {f}:1: guid '08d9fd27-a693-59bf-a0db-80e60c4f3262' differs from the file name's "
            "'6a8bc496-cc61-5683-8b41-039cb5ea67eb' (lines 1, +15 more): imported as the lines say"
        ],
        2,
    ),
    "unknown_fields": ([], 0),
    "crlf": ([], 0),
}


@pytest.fixture
def with_good(tmp_path: Path) -> tuple[Path, list[tuple[int, str]]]:
    """A ledger holding the intact card, and its stored rows (version, hash) to prove it stays untouched."""
    db = tmp_path / "l.sqlite"
    code, _, _ = run(db, str(CORPUS / "good"), "--environments", str(ENV_DIR), "-q")
    assert code == 0
    with Ledger.open(db) as led:
        rows = [(e.version, e.hash) for e in led.store.read_stream(card_stream(case_card("good")))]
    return db, rows


def good_untouched(db: Path, rows: list[tuple[int, str]]) -> None:
    with Ledger.open(db) as led:
        assert [(e.version, e.hash) for e in led.store.read_stream(card_stream(case_card("good")))] == rows
        assert led.export(case_card("good")) == (CORPUS / "expected" / "good.json").read_text().strip()
        assert verify_ledger(led.store).ok


@pytest.mark.parametrize("case", sorted(CASES))
def test_corpus_case(case: str, with_good: tuple[Path, list[tuple[int, str]]]) -> None:
    db, good_rows = with_good
    messages, strict_code = CASES[case]
    f = case_file(case)
    card = case_card(case)
    want_stderr = [m.format(f=f) for m in messages]

    code, out, err = run(db, str(CORPUS / case), "--environments", str(ENV_DIR), "--strict")
    assert code == strict_code
    assert err.splitlines() == [m.replace("Warning:", "Error:", 1) if strict_code else m for m in want_stderr]
    with Ledger.open(db) as led:
        assert (card in led.card_ids()) == (strict_code == 0)
    if strict_code:
        assert f"not imported      {card}: 1 problem(s) in its recordings (--strict)" in out
    good_untouched(db, good_rows)

    code, out, err = run(db, str(CORPUS / case), "--environments", str(ENV_DIR))
    assert code == 0
    assert err.splitlines() == ([] if strict_code == 0 and case != "truncated" else want_stderr)
    expected = (CORPUS / "expected" / f"{case}.json").read_text().strip()
    with Ledger.open(db) as led:
        assert led.export(card) == expected
    good_untouched(db, good_rows)
    # Again: nothing new, and a skipped bad line is not reported twice (a truncated last line is: it is not read).
    code, out, err = run(db, str(CORPUS / case), "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["totals"]["already_imported"] == 1 and summary["totals"]["events"] == 0
    assert [p["kind"] for p in summary["problems"]] == (["truncated"] if case == "truncated" else [])
    assert err == ""


def test_binary_garbage(with_good: tuple[Path, list[tuple[int, str]]]) -> None:
    db, good_rows = with_good
    f = case_file("binary")
    for args in ([], ["--strict"]):
        code, out, err = run(db, str(CORPUS / "binary"), *args)
        assert code == 2
        assert err.startswith(f"Error: {f}: not a recording the ledger reads. It reads: ")
        assert f"not imported      {case_card('binary')}: 1 of its files in no format the ledger reads" in out
    with Ledger.open(db) as led:
        assert led.card_ids() == [case_card("good")]
    good_untouched(db, good_rows)


def test_empty_file(with_good: tuple[Path, list[tuple[int, str]]]) -> None:
    db, good_rows = with_good
    for args in ([], ["--strict"]):
        code, out, err = run(db, str(CORPUS / "empty"), *args)
        assert code == 0
        assert err == f"Note: {case_file('empty')}: empty file: nothing to import\n"
        assert f"nothing to import {case_card('empty')}: 1 file" in out
    with Ledger.open(db) as led:
        assert led.card_ids() == [case_card("good")]
    good_untouched(db, good_rows)


def test_reset_only_is_one_play_of_no_actions(tmp_path: Path) -> None:
    code, _, _ = run(tmp_path / "l.sqlite", str(CORPUS / "reset_only"), "--environments", str(ENV_DIR))
    assert code == 0
    with Ledger.open(tmp_path / "l.sqlite") as led:
        run_doc = json.loads(led.export(case_card("reset_only")))["environments"][0]["runs"]
    assert [(r["actions"], r["state"], r["levels_completed"]) for r in run_doc] == [(0, "NOT_FINISHED", 0)]


def test_the_whole_corpus_at_once(tmp_path: Path) -> None:
    """Every case folder in one command: the good cards are imported, the bad lines reported, the file that is no
    recording refused (exit 2)."""
    cases = sorted(d for d in CORPUS.iterdir() if d.is_dir() and d.name != "expected")
    db = tmp_path / "l.sqlite"
    code, _, _ = run(db, *map(str, cases), "--strict", "--environments", str(ENV_DIR))
    assert code == 2
    code, _, _ = run(db, *map(str, cases), "--environments", str(ENV_DIR))
    assert code == 2
    with Ledger.open(db) as led:
        assert case_card("binary") not in led.card_ids()
        for case in CASES:
            assert led.export(case_card(case)) == (CORPUS / "expected" / f"{case}.json").read_text().strip(), case


def test_a_bad_line_in_a_copy_is_consumed_once(tmp_path: Path) -> None:
    """A skipped line is consumed: after the file grows, only the new lines are read and reported."""
    rec = tmp_path / "rec"
    shutil.copytree(CORPUS / "not_json", rec)
    f = next(rec.rglob("*.jsonl"))
    db = tmp_path / "l.sqlite"
    code, _, err = run(db, str(rec))
    assert code == 0 and ":3: not JSON" in err
    with f.open("ab") as out:
        out.write(b"garbage appended\n")
    code, out, err = run(db, str(rec))
    assert code == 0
    assert err == f"Warning: {f}:17: not JSON: JSON is malformed: invalid character (byte 0)\n"
    assert "updated" in out
