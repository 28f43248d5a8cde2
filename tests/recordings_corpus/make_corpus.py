"""Regenerate the bad-input corpus: ``.venv/bin/python tests/recordings_corpus/make_corpus.py``.

Every case is a recordings folder ``<case>/<card_id>/<game_id>-<guid>.jsonl`` made from a real toolkit run (OFFLINE,
``save_recording=True``) and then damaged on purpose. ``expected/<case>.json`` is the toolkit's own
``get_scorecard().model_dump_json()`` for what the importer must recover: for a damaged line that is the same run
played without that line's action (the toolkit's ids replaced by the case's ids). README.md lists each case's
message and exit code; tests/test_import_corpus.py checks them.
"""

from __future__ import annotations

import random
import re
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from tests.toolkit import arcade, step  # noqa: E402

NS = uuid.UUID("6b1f3a52-0d0e-4c4e-9a51-3c1e0c2d7a10")

# cnt3: ACTION1 x2 completes level 1 (x3 with an odd seed), x3 level 2, x2 level 3 (WIN); ACTION3 loses.
# Lines 3, 5 and 6 are ACTION2s that change nothing in the game: without one, the rest is recorded identically.
BASE = [1, 2, 1, 2, 2, 1, 0, 1, 1, 1, 3, 1, 2, 0, 1]  # a level reset, a GAME_OVER, actions after it, a reset


def card_id(case: str) -> str:
    return str(uuid.uuid5(NS, "card/" + case))


def guid(case: str, n: int = 0) -> str:
    return str(uuid.uuid5(NS, f"guid/{case}/{n}"))


def play(moves: list[int], *, frames: bool, game: str = "cnt3") -> tuple[list[bytes], str]:
    """The recording lines and the toolkit's scorecard JSON of one play of ``moves`` (after make's RESET)."""
    with tempfile.TemporaryDirectory() as tmp:
        arc = arcade(recordings_dir=tmp)
        card = arc.open_scorecard()
        env = arc.make(game, scorecard_id=card, save_recording=True, include_frame_data=frames)
        for a in moves:
            step(env, a, 20, 28) if a == 6 else step(env, a)
        expected = arc.get_scorecard(card).model_dump_json()
        (path,) = Path(tmp, card).glob("*.jsonl")
        lines = path.read_bytes().splitlines(keepends=True)
        return [ln.replace(card.encode(), b"CARD").replace(env._guid.encode(), b"GUID") for ln in lines], (
            expected.replace(card, "CARD").replace(env._guid, "GUID")
        )


def write(case: str, lines: list[bytes], *, name_guid: str | None = None, game: str = "cnt3-0000000a") -> Path:
    g = guid(case)
    d = HERE / case / card_id(case)
    d.mkdir(parents=True)
    f = d / f"{game}-{name_guid or g}.jsonl"
    f.write_bytes(b"".join(ln.replace(b"GUID", g.encode()) for ln in lines))
    return f


def expect(case: str, expected: str) -> None:
    (HERE / "expected").mkdir(exist_ok=True)
    text = expected.replace("CARD", card_id(case)).replace("GUID", guid(case))
    (HERE / "expected" / f"{case}.json").write_text(text + "\n")


def without(moves: list[int], line_no: int) -> list[int]:
    """``moves`` without the action recorded on 1-based line ``line_no`` (line 1 is make's RESET)."""
    return moves[: line_no - 2] + moves[line_no - 1 :]


def main() -> None:
    for d in HERE.iterdir():
        if d.is_dir() and d.name != "__pycache__":
            shutil.rmtree(d)

    lines, expected = play(BASE, frames=False)
    write("good", lines)
    expect("good", expected)

    # A run killed while writing its last line (with frames: the cut falls inside the frame).
    flines, _ = play(BASE[:6], frames=True)
    _, fexpected = play(BASE[:5], frames=True)
    last = flines[-1]
    write("truncated", [*flines[:-1], last[: len(last) // 2]])
    expect("truncated", fexpected)

    bad = list(lines)
    bad[2] = b'{"timestamp": "2026-12-02T10:00:00+00:00", "data": {"game_id": "cnt3-0000000a", oops}\n'
    write("not_json", bad)
    expect("not_json", play(without(BASE, 3), frames=False)[1])

    bad = list(lines)
    bad[4] = re.sub(rb'"levels_completed": (\d+)', rb'"levels_completed": "\1"', bad[4])
    assert bad[4] != lines[4]
    write("wrong_types", bad)
    expect("wrong_types", play(without(BASE, 5), frames=False)[1])

    bad = list(lines)
    bad[5] = bad[5].replace(b'"id": "ACTION2"', b'"id": "ACTION9"')
    assert bad[5] != lines[5]
    write("unknown_action", bad)
    expect("unknown_action", play(without(BASE, 6), frames=False)[1])

    rng = random.Random(3)
    garbage = bytes(rng.randrange(256) for _ in range(3000))
    d = HERE / "binary" / card_id("binary")
    d.mkdir(parents=True)
    (d / f"cnt3-0000000a-{guid('binary')}.jsonl").write_bytes(garbage)

    d = HERE / "empty" / card_id("empty")
    d.mkdir(parents=True)
    (d / f"cnt3-0000000a-{guid('empty')}.jsonl").write_bytes(b"")

    rlines, rexpected = play([], frames=True)
    assert len(rlines) == 1
    write("reset_only", rlines)
    expect("reset_only", rexpected)

    write("mismatched", lines, name_guid=guid("mismatched", 1))
    expect("mismatched", expected)

    # The format grows: new keys everywhere, one even after the frame; a reasoning with its own "frame" key
    # (those lines take the slow path, with the same result).
    grown = [
        ln.replace(b'{"timestamp": ', b'{"schema": 2, "timestamp": ', 1)
        .replace(b'"reasoning": null', b'"reasoning": {"why": "x", "frame": [1]}, "cost": 0.5', 1)
        .replace(b'"available_actions": [1, 2, 3, 4]', b'"available_actions": [1, 2, 3, 4], "fps": 5', 1)
        for ln in lines
    ]
    grown[1] = grown[1].replace(b"}}\n", b', "new_field": {"a": [1, 2]}}}\n')
    write("unknown_fields", grown)
    expect("unknown_fields", expected)

    write("crlf", [ln.replace(b"\n", b"\r\n") for ln in lines])
    expect("crlf", expected)


if __name__ == "__main__":
    main()
