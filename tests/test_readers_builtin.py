"""Every format ``ledger import`` reads is a reader (``ledger.formats.builtin_readers``) asked of every file by one
dispatch, and a file is read for what it holds, whatever its name: a toolkit recording under another name is
imported as the same card; a harness recording under a name that is not its recorder's is refused, saying why."""

from __future__ import annotations

import ast
import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli import cli
from ledger.formats.builtin_readers import builtin
from tests.test_import import recording_arcade
from tests.toolkit import ENV_DIR, play_random_card

PACKAGE = Path(__file__).resolve().parent.parent / "ledger"


def invoke(db: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--db", str(db), "import", *args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


def test_each_format_is_a_builtin_reader_asked_in_order() -> None:
    readers = builtin()
    assert [r.name for r in readers] == ["toolkit", "harness", "run-folder", "arcagi3"]
    assert [getattr(r, "decides", None) for r in readers] == ["answers", "frames", "usage", None]
    assert all(callable(r.reads) for r in readers)


def _calls(name: str) -> set[str]:
    """The modules of the package that call ``name`` (as a function or a method)."""
    out = set()
    for f in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                called = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
                if called == name:
                    out.add(str(f.relative_to(PACKAGE.parent)))
    return out


def test_no_format_is_decided_outside_the_readers() -> None:
    # The content sniffing is the recording readers'; asking the readers is the one dispatch's.
    assert _calls("sniff") == {"ledger/formats/builtin_readers.py"}
    assert _calls("reader_for") == {"ledger/formats/finding.py"}
    assert _calls("installed") == {"ledger/formats/finding.py"}
    defined = {
        n.name
        for f in PACKAGE.rglob("*.py")
        for n in ast.walk(ast.parse(f.read_text()))
        if isinstance(n, ast.FunctionDef)
    }
    assert not defined & {"claimed", "claimed_files", "_unknown_formats", "named_run_folders", "_reads_some"}


@pytest.fixture(scope="module")
def one_card(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A toolkit card folder of one recording, and the toolkit's scorecard of it."""
    rec = tmp_path_factory.mktemp("rec")
    arc = recording_arcade(rec, True)
    card = play_random_card(arc, random.Random(5), games=[arc_game(arc)], steps=30)
    return rec / card, arc.get_scorecard(card).model_dump_json()


def arc_game(arc: object) -> str:
    return sorted(e.game_id for e in arc.get_environments())[0]  # type: ignore[attr-defined]


def test_a_toolkit_recording_under_another_name_is_read_by_its_content(
    tmp_path: Path, one_card: tuple[Path, str]
) -> None:
    folder, expected = one_card
    card = folder.name
    (original,) = folder.iterdir()
    renamed = tmp_path / "a" / card / "run.log"
    renamed.parent.mkdir(parents=True)
    shutil.copy(original, renamed)
    code, out, err = invoke(tmp_path / "l.sqlite", str(renamed.parent), "--environments", str(ENV_DIR))
    assert code == 0 and out.startswith(f"imported          {card}: 1 file"), (out, err)
    # What its lines say differs from its name: said, as for any misnamed recording.
    assert "do not make the file name ('run.log')" in err, err
    with Ledger.open(tmp_path / "l.sqlite") as led:
        assert led.export(card) == expected
    # Given by name, without the .jsonl the toolkit gives it: the same card, already there.
    code, out, _ = invoke(tmp_path / "l.sqlite", str(renamed))
    assert code == 0 and out.startswith(f"already imported  {card}: 1 file"), out


def _harness_line(guid: str, second: int) -> str:
    # FrameData.model_dump: the frame before the state, the action by its number.
    data = {
        "game_id": "ls20-016295f7601e",
        "frame": [[[0, 1], [1, 0]]],
        "state": "NOT_FINISHED",
        "levels_completed": 0,
        "win_levels": 7,
        "action_input": {"id": 0, "data": {}},
        "guid": guid,
        "full_reset": True,
        "available_actions": [1, 2, 3, 4],
    }
    return json.dumps({"timestamp": f"2026-04-01T03:04:{second:02}.000000+00:00", "data": data}) + "\n"


@pytest.mark.parametrize("name", ["ls20-016295f7601e-g1.jsonl", "agent-run.log"])
def test_a_harness_recording_not_under_its_recorders_name_is_refused_saying_why(tmp_path: Path, name: str) -> None:
    card = "0d8b7e55-43f1-4f6e-8a2e-7b58e4a5c3a1"
    f = tmp_path / card / name
    f.parent.mkdir()
    f.write_text("".join(_harness_line("g1", s) for s in range(3)))
    for args in ([str(f.parent)], [str(f)], [str(f), "--strict"]):
        code, out, err = invoke(tmp_path / "l.sqlite", *args)
        assert code == 2, (args, out, err)
        assert f"Error: {f}: a harness recording by its lines, not under the name its recorder gives it " in err
        assert f"not imported      {card}: 1 of its files refused ({name}): nothing of it imported" in out
    with Ledger.open(tmp_path / "l.sqlite") as led:
        assert led.card_ids() == []
    # Under its recorder's name it is a card of its own (the uuid in the name).
    named = tmp_path / "h" / f"ls20-016295f7601e.agent.{card}.recording.jsonl"
    named.parent.mkdir()
    shutil.copy(f, named)
    code, out, err = invoke(tmp_path / "l.sqlite", str(named))
    assert out.startswith(f"imported          {card}: 1 file"), (out, err)


@pytest.mark.heavy
def test_asking_the_readers_keeps_memory_flat_as_recordings_grow(tmp_path: Path) -> None:
    """Which reader reads a file is told from its first lines: a recording ten times longer costs no more memory."""
    import tracemalloc

    from ledger.formats.finding import find_recordings

    card = "0d8b7e55-43f1-4f6e-8a2e-7b58e4a5c3a1"
    peaks = []
    for n in (20_000, 200_000):
        folder = tmp_path / str(n)
        (folder / card).mkdir(parents=True)
        line = _harness_line("g1", 0)
        with open(folder / card / "ls20-016295f7601e-g1.jsonl", "w") as f:
            f.writelines(line for _ in range(n))
        with open(folder / f"ls20-016295f7601e.agent.{card}.recording.jsonl", "w") as f:
            f.writelines(line for _ in range(n))
        tracemalloc.start()
        try:
            found = find_recordings([folder])
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert sorted(r.name for r in found.readers.values()) == ["harness", "harness"]
    assert peaks[1] < 1.5 * peaks[0] + (1 << 20), peaks
