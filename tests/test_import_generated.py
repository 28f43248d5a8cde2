"""Two hundred made-up files, imported one by one: each is imported as exactly the card its lines prove, or
refused (exit 2) with nothing of it committed.

The runs are real (the toolkit plays the test games and writes its recordings, and its scorecard is taken after
every step), so a recording cut after k lines must import as the toolkit's scorecard after those k lines. The
made-up files are these recordings cut, cut mid-line, laid out without their card folder, put together with another
run's, sprinkled with junk lines, pasted twice or turned back in time, and files that are no recording at all
(random JSON shapes, text).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger
from ledger.imports.importing import import_recordings
from tests.cli_run import LEDGER
from tests.toolkit import ENV_DIR, RecordedRun, record_runs

FILES = 200
KINDS = ["whole", "cut", "cut_mid", "flat", "two_runs", "two_runs_flat", "shapes", "text", "junk", "repeat",
         "backwards", "empty"]  # fmt: skip


def _junk(rng: random.Random) -> bytes:
    shapes: list[Any] = [
        {"timestamp": "2026-12-02T10:00:00+00:00", "data": {"game_id": 3, "state": []}},
        {"timestamp": "yesterday", "data": {}},
        {"data": {"game_id": "cnt3"}},
        [1, 2, {"frame": []}],
        rng.random(),
        "a string",
        None,
        {"k" * rng.randint(1, 9): {"nested": [rng.randint(0, 9)] * rng.randint(0, 5)}},
    ]
    if rng.random() < 0.3:
        return rng.choice([b"# Title", b"some words here", b"- [ ] a task", b"{not json", b"\x00\x01\xff"]) + b"\n"
    return json.dumps(rng.choice(shapes)).encode() + b"\n"


@dataclass
class Case:
    kind: str
    folder: str  # "card" (its uuid folder), "flat" (a folder named otherwise)
    body: bytes
    #: The scorecard the import must give, or None when it must refuse (exit 2) or import nothing.
    expected: str | None
    refused: bool
    #: The run's whole scorecard (what --card-id must give a flat folder's copy).
    whole: str | None = None


def _make_case(i: int, runs: list[RecordedRun], rng: random.Random) -> Case:
    run = runs[i % len(runs)]
    other = runs[(i + 1 + rng.randrange(len(runs) - 1)) % len(runs)]
    n = len(run.lines)
    kind = KINDS[i % len(KINDS)]
    if kind == "whole":
        return Case(kind, "card", b"".join(run.lines), run.after[-1], False)
    if kind == "cut":
        k = rng.randint(1, n)
        return Case(kind, "card", b"".join(run.lines[:k]), run.after[k - 1], False)
    if kind == "cut_mid":
        # Cut in its first line too: a first record still being written is no card yet, and no error.
        k = rng.randint(0, n - 1)
        part = run.lines[k][: rng.randint(12, len(run.lines[k]) - 2)]
        return Case(kind, "card", b"".join(run.lines[:k]) + part, run.after[k - 1] if k else None, False)
    if kind == "flat":
        return Case(kind, "flat", b"".join(run.lines), None, True, run.after[-1])
    if kind in ("two_runs", "two_runs_flat"):
        body = b"".join(run.lines) + b"".join(other.lines)
        return Case(kind, "card" if kind == "two_runs" else "flat", body, None, True)
    if kind == "shapes":
        return Case(
            kind, rng.choice(["card", "flat"]), b"".join(_junk(rng) for _ in range(rng.randint(1, 30))), None, True
        )
    if kind == "text":
        text = b"# README\n\nSome prose.\n" + (run.lines[0] if rng.random() < 0.5 else b"") + b"More prose.\n"
        return Case(kind, rng.choice(["card", "flat"]), text, None, True)
    if kind == "junk":
        lines = list(run.lines)
        bad = rng.randint(1, n)
        for _ in range(bad):
            lines.insert(rng.randint(1, len(lines)), _junk(rng))
        # Junk lines are skipped and reported while they are fewer than one line in four; then it is refused.
        refused = bad * 4 >= len(lines)
        return Case(kind, "card", b"".join(lines), None if refused else run.after[-1], refused)
    if kind == "repeat":
        a = rng.randint(1, n - 1)
        b = rng.randint(a + 1, n)
        return Case(kind, "card", b"".join(run.lines[:b] + run.lines[a:b] + run.lines[b:]), None, True)
    if kind == "backwards":
        lines = list(run.lines)
        k = rng.randint(1, n - 1)
        lines[k - 1], lines[k] = lines[k], lines[k - 1]
        return Case(kind, "card", b"".join(lines), None, True)
    return Case(kind, rng.choice(["card", "flat"]), b"", None, False)


def _place(root: Path, i: int, case: Case, run: RecordedRun) -> Path:
    folder = root / f"f{i}" / (run.card if case.folder == "card" else "Downloads")
    folder.mkdir(parents=True)
    f = folder / run.name
    f.write_bytes(case.body)
    return f


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Case, Path, str]]:
    root = tmp_path_factory.mktemp("generated")
    rng = random.Random(20)
    runs = record_runs(root / "rec", 12, rng)
    out = []
    for i in range(FILES):
        case = _make_case(i, runs, rng)
        run = runs[i % len(runs)]
        out.append((case, _place(root / "files", i, case, run), run.card))
    return out


@pytest.mark.heavy
def test_each_made_up_file_is_its_proven_card_or_refused(tmp_path: Path, cases: list[tuple[Case, Path, str]]) -> None:
    seen: dict[str, int] = {}
    for i, (case, f, card) in enumerate(cases):
        db = tmp_path / f"{i}.sqlite"
        with Ledger.open(db) as led:
            s = import_recordings(led, [f.parent], environments=ENV_DIR)
            what = f"case {i} ({case.kind}): exit {s.exit_code}, {[str(p) for p in s.problems]}"
            if case.refused:
                assert s.exit_code == 2, what
                assert led.card_ids() == [] and led.baseline_set_ids() == [], what
            elif case.expected is None:
                assert s.exit_code == 0 and led.card_ids() == [], what
            else:
                assert s.exit_code == 0, what
                assert led.card_ids() == [card], what
                assert led.export(card) == case.expected, what
        seen[case.kind] = seen.get(case.kind, 0) + 1
    assert len(seen) == len(KINDS) and min(seen.values()) >= FILES // len(KINDS), seen


def test_a_handful_through_the_real_command(tmp_path: Path, cases: list[tuple[Case, Path, str]]) -> None:
    """The command's exit code and stderr for one case of each kind that refuses, and one that imports."""
    picked = {}
    for case, f, card in cases:
        picked.setdefault((case.kind, case.refused), (case, f, card))
    for n, ((kind, refused), (_case, f, _card)) in enumerate(sorted(picked.items())[:8]):
        r = subprocess.run(
            [LEDGER, "--db", str(tmp_path / f"{n}.sqlite"), "import", str(f)], capture_output=True, text=True
        )
        assert "Traceback" not in r.stderr
        want = 2 if refused else 0
        assert r.returncode == want, (kind, r.stdout, r.stderr)
        if refused:
            assert "Error: " in r.stderr, (kind, r.stderr)


def test_card_id_names_the_card_of_a_flat_folder(tmp_path: Path, cases: list[tuple[Case, Path, str]]) -> None:
    """--card-id imports a flat folder's one run; it cannot name two cards at once."""
    case, f, card = next(c for c in cases if c[0].kind == "flat")
    db = tmp_path / "l.sqlite"
    with Ledger.open(db) as led:
        s = import_recordings(led, [f.parent], environments=ENV_DIR, card_id=card)
        assert s.exit_code == 0, [str(p) for p in s.problems]
        assert led.export(card) == case.whole
    # A flat copy of a run whose plays are in the ledger: found by its guid, already imported.
    copy = tmp_path / "copy" / f.name
    copy.parent.mkdir()
    shutil.copy(f, copy)
    with Ledger.open(db) as led:
        s = import_recordings(led, [copy.parent], environments=ENV_DIR)
        assert s.exit_code == 0 and [c.card_id for c in s.cards] == [card]
        assert any(f"card {card} found by its plays' guids" in str(p) for p in s.problems)
    r = subprocess.run(
        [LEDGER, "--db", str(db), "import", str(f.parent), str(copy.parent), "--card-id", str(uuid.uuid4())],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--card-id names one card" in r.stderr


def test_one_run_in_two_card_folders_is_one_card(tmp_path: Path, cases: list[tuple[Case, Path, str]]) -> None:
    """A copy of a run's files under another card folder, in the same import: compared, not a second card."""
    case, f, card = next(c for c in cases if c[0].kind == "whole")
    other = "ffffffff-ffff-4fff-8fff-ffffffffffff"  # after the card: its folder is read second
    for name in (card, other):
        (tmp_path / "rec" / name).mkdir(parents=True)
        shutil.copy(f, tmp_path / "rec" / name / f.name)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        s = import_recordings(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert s.exit_code == 0 and led.card_ids() == [card]
        assert sorted(c.status for c in s.cards) == ["imported", "same card"]
        assert led.export(card) == case.expected
