"""`ledger import` as a command: usage errors, the summary, --json, the progress bar, and SIGKILL mid-import."""

from __future__ import annotations

import json
import os
import pty
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain.events import CardOpened, card_stream, decode
from tests.test_import import recording_arcade
from tests.toolkit import ENV_DIR, play_random_card, step

LEDGER = Path(sys.executable).parent / "ledger"


def invoke(db: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--db", str(db), "import", *args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """24 recorded cards with frames, and the toolkit's JSON of each."""
    rec = tmp_path_factory.mktemp("rec")
    arc = recording_arcade(rec, True)
    rng = random.Random(404)
    expected = {}
    for _ in range(24):
        card = play_random_card(arc, rng, steps=rng.randint(30, 60))
        expected[card] = arc.get_scorecard(card).model_dump_json()
    return rec, expected


def test_usage_errors(tmp_path: Path) -> None:
    db = tmp_path / "l.sqlite"
    code, _, err = invoke(db, str(tmp_path / "nope"))
    assert code == 2 and "does not exist" in err
    (tmp_path / "notes.txt").write_text("x")
    code, _, err = invoke(db, str(tmp_path / "notes.txt"))
    said = f"Error: {tmp_path / 'notes.txt'}: not a .jsonl recording. ledger import reads: "
    assert code == 2 and err.startswith(said) and err.count("\n") == 1
    assert "<game_id>.<agent>.<uuid>.recording.jsonl" in err and "run folders (run_meta.json" in err
    (tmp_path / "emptydir").mkdir()
    code, _, err = invoke(db, str(tmp_path / "emptydir"))
    assert (code, err) == (2, f"Error: {tmp_path / 'emptydir'}: no recordings (*.jsonl) in it or in its card folders\n")
    (tmp_path / "card").mkdir()
    (tmp_path / "card" / "g-x.jsonl").write_text("")
    code, _, err = invoke(db, str(tmp_path / "card"), "--environments", str(tmp_path / "emptydir"))
    assert (code, err) == (2, f"Error: {tmp_path / 'emptydir'}: no metadata.json in it (an environment_files tree)\n")
    code, _, err = invoke(db)
    assert code == 2 and "Missing argument 'PATH...'" in err


def test_an_empty_folder_among_the_paths_is_skipped_with_a_note(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec", False)
    card = arc.open_scorecard()
    step(arc.make("cnt3", scorecard_id=card), 1)
    (tmp_path / "empty").mkdir()
    code, out, err = invoke(tmp_path / "l.sqlite", str(tmp_path / "empty"), str(tmp_path / "rec"))
    assert code == 0, err
    assert f"Note: {tmp_path / 'empty'}: no recordings (*.jsonl) in it or in its card folders: skipped\n" in err
    assert out.startswith(f"imported          {card}: 1 file")
    (tmp_path / "empty2").mkdir()
    code, _, err = invoke(tmp_path / "l.sqlite", str(tmp_path / "empty"), str(tmp_path / "empty2"))
    assert (code, err.splitlines()[-1]) == (
        2,
        f"Error: {tmp_path / 'empty'}, {tmp_path / 'empty2'}: no recordings (*.jsonl) in any of them or in their "
        "card folders",
    )


def test_summary_text_and_json(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec", False)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    for a in [1, 1, 3, 1]:
        step(env, a)
    (f,) = (tmp_path / "rec" / card).glob("*.jsonl")
    with f.open("ab") as out:
        out.write(b'{"timestamp": "2026-12-02T10:00:00+00:00", "da')  # killed mid-write
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, str(tmp_path / "rec"), "--environments", str(ENV_DIR))
    assert code == 0
    assert err == f"Warning: {f}:6: truncated last line (46 bytes, no newline): skipped\n"
    lines = out.splitlines()
    # RESET, 2 actions, GAME_OVER, an ignored action: 1 play, CardOpened + 9 events + progress + close.
    assert lines[0] == (
        f"imported          {card}: 1 file, 5 lines, 1 play, 10 events; 1 line after a play's end, not counted"
    )
    assert (
        lines[1] == "1 card: 1 imported, 0 updated, 0 already imported, 0 not imported; 1 play, 10 events from 5 lines"
    )
    assert lines[2] == "skipped 1 line: 1 truncated last line"
    assert re.fullmatch(r"read \d+(\.\d)? (bytes|KB) in \d+\.\d\d s \(\d+(\.\d)? (KB|MB|bytes)/s\)", lines[3]), lines[3]
    assert len(lines) == 4
    code, out, err = invoke(db, str(tmp_path / "rec"), "--json")
    assert code == 0 and err == ""
    s = json.loads(out)
    assert s["totals"] == {
        "cards": 1,
        "imported": 0,
        "updated": 0,
        "already_imported": 1,
        "not_imported": 0,
        "plays": 0,
        "events": 0,
        "lines": 0,
        "not_counted": 0,
        "same_card": 0,
        "differs": 0,
    }
    assert s["cards"][0]["status"] == "already imported" and s["exit_code"] == 0
    assert s["problems"] == [
        {
            "path": str(f),
            "line": 6,
            "kind": "truncated",
            "message": "truncated last line (46 bytes, no newline): skipped",
        }
    ]
    assert s["skipped"] == {"truncated last line": 1}
    code, out, _ = invoke(db, str(tmp_path / "rec"), "-q")
    assert out.splitlines()[0].startswith("1 card: 0 imported, 0 updated, 1 already imported")


def test_an_unreadable_metadata_json_is_reported_and_skipped(tmp_path: Path) -> None:
    env = tmp_path / "env"
    shutil.copytree(ENV_DIR, env)
    (env / "cnt3" / "0000000a" / "metadata.json").write_text("{not json")
    arc = recording_arcade(tmp_path / "rec", False)
    card = arc.open_scorecard()
    step(arc.make("clk2", scorecard_id=card), 6, 20, 28)
    code, _, err = invoke(tmp_path / "l.sqlite", str(tmp_path / "rec"), "--environments", str(env))
    assert code == 0
    (line,) = err.splitlines()
    assert line.startswith(f"Warning: {env / 'cnt3' / '0000000a' / 'metadata.json'}: ")
    assert line.endswith(": skipped (the toolkit skips it too)")
    with Ledger.open(tmp_path / "l.sqlite") as led:
        assert sorted(led.baselines(led.load_card(card).baselines_id)) == sorted(
            i.game_id for i in arc.available_environments if not i.game_id.startswith("cnt3")
        )


def test_without_environments_says_what_it_means(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec", False)
    card = arc.open_scorecard()
    step(arc.make("cnt3", scorecard_id=card), 1)
    code, _, err = invoke(tmp_path / "l.sqlite", str(tmp_path / "rec"))
    assert code == 0
    assert "Note: no --environments: the new cards have no baseline set" in err
    r = CliRunner().invoke(cli, ["--db", str(tmp_path / "l.sqlite"), "export", card])
    assert "No Matching EnvironmentInfo found for cnt3-0000000a" in r.stdout


def _run_on_pty(args: list[str]) -> str:
    """Run ``ledger`` with stderr on a terminal; return what the terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(LEDGER), *args], stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        seen += data
    proc.wait(timeout=60)
    os.close(master)
    assert proc.returncode == 0
    return seen.decode(errors="replace")


def test_progress_bar_only_on_a_terminal(tmp_path: Path, recordings: tuple[Path, dict[str, str]]) -> None:
    rec, _ = recordings
    shown = _run_on_pty(["--db", str(tmp_path / "a.sqlite"), "import", str(rec)])
    assert "importing" in shown and " MB" in shown and "100%" in shown
    assert "importing" not in _run_on_pty(["--db", str(tmp_path / "b.sqlite"), "import", str(rec), "--quiet"])
    piped = subprocess.run(
        [str(LEDGER), "--db", str(tmp_path / "c.sqlite"), "import", str(rec)], capture_output=True, text=True
    )
    assert piped.returncode == 0 and "importing" not in piped.stderr


def _kill_import_after(db: Path, rec: Path, cards: int) -> bool:
    """Start an import and SIGKILL it once ``cards`` cards are in the ledger; True if it was still running."""
    with Ledger.open(db) as watch:
        proc = subprocess.Popen(
            [str(LEDGER), "--db", str(db), "import", str(rec), "--environments", str(ENV_DIR), "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and len(watch.card_ids()) < cards:
            time.sleep(0.002)
        running = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return running


def _check_consistent(db: Path, expected: dict[str, str]) -> int:
    """Every card in the ledger is whole (the toolkit's JSON, one CardOpened); returns how many are in it."""
    with Ledger.open(db) as led:
        assert verify_ledger(led.store).ok
        ids = led.card_ids()
        for c in ids:
            assert led.export(c) == expected[c]
            bodies, _, _ = led.store.read_bodies(card_stream(c))
            assert sum(type(decode(b)) is CardOpened for b in bodies) == 1
        return len(ids)


def _kill_rounds(tmp_path: Path, recordings: tuple[Path, dict[str, str]], kill_at: list[int]) -> None:
    rec, expected = recordings
    db = tmp_path / "l.sqlite"
    Ledger.open(db).close()  # migrated up front, so the test's reads never race the child's migration
    interrupted = 0
    for n in kill_at:
        running = _kill_import_after(db, rec, n)
        present = _check_consistent(db, expected)
        assert present >= n
        interrupted += running and present < len(expected)
    # The first kill comes when one card of 24 is in: the import is still far from done.
    assert interrupted >= 1
    done = subprocess.run(
        [str(LEDGER), "--db", str(db), "import", str(rec), "--environments", str(ENV_DIR), "--json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert _check_consistent(db, expected) == len(expected)
    totals = json.loads(done.stdout)["totals"]
    assert totals["imported"] + totals["already_imported"] == len(expected)
    with Ledger.open(tmp_path / "clean.sqlite") as clean:
        from ledger.imports.importing import import_recordings

        import_recordings(clean, [rec], environments=ENV_DIR)
        with Ledger.open(db) as led:
            for c in expected:
                assert len(led.store.read_bodies(card_stream(c))[0]) == len(clean.store.read_bodies(card_stream(c))[0])


def test_sigkill_mid_import_then_the_next_import_finishes(
    tmp_path: Path, recordings: tuple[Path, dict[str, str]]
) -> None:
    _kill_rounds(tmp_path, recordings, [1, 12])


@pytest.mark.heavy
def test_sigkill_at_random_points(tmp_path: Path, recordings: tuple[Path, dict[str, str]]) -> None:
    rng = random.Random(8)
    _kill_rounds(tmp_path, recordings, [1, *sorted(rng.randint(2, 23) for _ in range(7))])


def test_lines_that_make_no_play_are_refused_under_strict_and_a_warning_otherwise(tmp_path: Path) -> None:
    """A recording whose first line says ``"full_reset": false`` starts no play: none of its lines count."""
    from tests.cli_run import CORPUS_CARD

    card = tmp_path / CORPUS_CARD.name
    card.mkdir()
    (src,) = CORPUS_CARD.iterdir()
    lines = src.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    assert first["data"]["full_reset"] is True
    first["data"]["full_reset"] = False
    (card / src.name).write_text(json.dumps(first) + "\n" + "".join(lines[1:]))

    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, str(card), "--strict")
    assert code == 2 and f"{len(lines)} line(s) make no play (--strict): nothing of this card imported" in out, out
    assert "Traceback" not in err and 'says "full_reset": true' in err, err
    with Ledger.open(db) as led:
        assert not led.store.read_stream(card_stream(CORPUS_CARD.name))
    code, out, err = invoke(db, str(card))
    assert code == 1 and f"Warning: {card / src.name}: {len(lines)} line(s) make no play" in err, err
    assert "0 plays" in out, out


def test_an_import_of_toolkit_recordings_loads_no_reader_of_other_formats(tmp_path: Path) -> None:
    # Start-up is part of an import's time: the harnesses' readers, the run folders' and what they need (pickle and
    # tempfile for a long recording's lines) are loaded when a file of theirs is found, not by every import.
    corpus = Path(__file__).resolve().parent / "recordings_corpus" / "good"
    code = (
        "import sys\n"
        "from ledger.cli import main\n"
        f"sys.argv = ['ledger', '--db', {str(tmp_path / 'l.sqlite')!r}, 'import', {str(corpus)!r}, '--quiet']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "names = ('ledger.formats.harness', 'ledger.formats.frame_lines', 'ledger.formats.run_folders', 'pickle',\n"
        "         'tempfile')\n"
        "print('loaded:', *(m for m in names if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.splitlines()[-1] == "loaded:", r.stdout + r.stderr
