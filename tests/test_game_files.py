"""Game folders read and games started without the toolkit (ledger/toolkit/game_files.py) exactly as the toolkit's
own ``Arcade`` scan and ``LocalEnvironmentWrapper`` do: the same games found, the same class names, the same state
after the first RESET and after every action, the same refusals; and re-simulation does not import ``arc_agi``."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.toolkit import game_files
from ledger.toolkit.game_states import fingerprint
from tests.harness_recorder import HARNESS_GAMES, game_dir

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = (ROOT / "tests" / "environment_files", HARNESS_GAMES, ROOT / "ledger" / "capture" / "demo_games")
_quiet = logging.getLogger("test.game_files")
_quiet.setLevel(logging.CRITICAL)


def _toolkit_scan(folder: Path) -> dict[str, tuple[str, str]]:
    """game_id -> (class_name, local_dir) as ``Arcade._scan_for_environments`` reads the folder."""
    from arc_agi.models import EnvironmentInfo

    out: dict[str, tuple[str, str]] = {}
    for meta in folder.rglob("metadata.json"):
        try:
            info = EnvironmentInfo.model_validate_json(meta.read_text(encoding="utf-8"))
        except Exception:
            continue
        out.setdefault(info.game_id, (info.class_name or "", str(meta.parent)))
    return out


def _ours(folder: Path) -> dict[str, tuple[str, str]]:
    return {g: (i.class_name, i.local_dir) for g, i in game_files.scan_games(folder).items()}


def _answer(r: Any) -> tuple[Any, ...]:
    if r is None:
        return (None,)
    frames = [f.tolist() if hasattr(f, "tolist") else f for f in r.frame]
    return (str(r.state), r.levels_completed, r.win_levels, bool(r.full_reset), frames, list(r.available_actions))


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_test_games_are_found_as_the_toolkit_finds_them(folder: Path) -> None:
    assert _ours(folder) == _toolkit_scan(folder) != {}


@pytest.mark.heavy
def test_every_game_starts_and_steps_as_the_toolkits_wrapper_runs_it() -> None:
    from arc_agi import LocalEnvironmentWrapper
    from arcengine import GameAction

    for folder in FOLDERS:
        for game_id, info in game_files.scan_games(folder).items():
            for seed in (None, 0, 1, 7):
                theirs = LocalEnvironmentWrapper(
                    environment_info=_info(info), logger=_quiet, scorecard_id="t", seed=seed
                )
                mine = game_files.LocalGame(info, seed)
                assert theirs._game is not None
                assert _answer(mine.observation_space) == _answer(theirs.observation_space), (game_id, seed)
                assert mine.observation_space.game_id == game_id
                assert fingerprint(mine.game) == fingerprint(theirs._game), (game_id, seed)
                for a in (1, 2, 3, 4, 5, 0, 6, 7, 1):
                    data = {"x": 3, "y": 5} if a == 6 else None
                    act = GameAction.from_id(a)
                    assert _answer(mine.step(act, data)) == _answer(theirs.step(act, data)), (game_id, seed, a)
                    assert fingerprint(mine.game) == fingerprint(theirs._game), (game_id, seed, a)


#: A game written as some public ones are (pw14): a dataclass, whose annotations the toolkit's loader evaluates.
DATACLASS_GAME = """
from dataclasses import dataclass, field

from arcengine import ARCBaseGame, Camera, Level, Sprite


@dataclass
class Tally:
    presses: int = 0
    seen: list[int] = field(default_factory=list)


class Dcls(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self.tally = Tally()
        self.evaluated = Tally.__annotations__["presses"] is int
        level = Level(sprites=[Sprite(pixels=[[3]], name="p", x=0, y=0)], grid_size=(8, 8))
        super().__init__(game_id="dcls", levels=[level], camera=Camera(width=8, height=8), available_actions=[1])

    def step(self) -> None:
        self.tally.presses += 1
        self.tally.seen.append(self.action.id.value)
        self.complete_action()
"""


def test_a_game_with_a_dataclass_starts_as_the_toolkits_wrapper_starts_it(tmp_path: Path) -> None:
    from arc_agi import LocalEnvironmentWrapper
    from arcengine import GameAction

    info = game_dir(tmp_path, "dcls", DATACLASS_GAME)
    theirs = LocalEnvironmentWrapper(environment_info=_info(info), logger=_quiet, scorecard_id="t", seed=0)
    mine = game_files.LocalGame(info, 0)
    assert theirs._game is not None and theirs._game.evaluated and mine.game.evaluated
    for _ in range(3):
        act = GameAction.ACTION1
        assert _answer(mine.step(act, None)) == _answer(theirs.step(act, None))
    assert fingerprint(mine.game) == fingerprint(theirs._game)
    assert mine.game.tally.seen == theirs._game.tally.seen == [0, 1, 1, 1]


def _info(info: game_files.GameInfo) -> Any:
    from arc_agi.models import EnvironmentInfo

    return EnvironmentInfo(game_id=info.game_id, class_name=info.class_name, local_dir=info.local_dir)


#: metadata.json bodies: plain ones read here, and every other kind handed to the toolkit's model (read or skipped).
METADATA: dict[str, Any] = {
    "plain": {"game_id": "aaaa-01", "title": "A", "tags": ["x"], "baseline_actions": [3, 4]},
    "dated": {"game_id": "aaab-01", "date_downloaded": "2025-08-01T10:20:30.123456Z"},
    "dated_offset": {"game_id": "aaac-01", "date_downloaded": "2025-08-01T10:20:30+02:00"},
    "date_with_space": {"game_id": "aaad-01", "date_downloaded": "2025-08-01 10:20:30"},
    "date_garbage": {"game_id": "aaae-01", "date_downloaded": "yesterday"},
    "date_bad_month": {"game_id": "aaaf-01", "date_downloaded": "2025-13-01T10:20:30Z"},
    "date_number": {"game_id": "aaag-01", "date_downloaded": 1700000000},
    "fps_string": {"game_id": "aaah-01", "default_fps": "5"},
    "fps_float": {"game_id": "aaai-01", "default_fps": 5.5},
    "tags_wrong": {"game_id": "aaaj-01", "tags": "x"},
    "private_tags_wrong": {"game_id": "aaak-01", "private_tags": [1]},
    "baselines_strings": {"game_id": "aaal-01", "baseline_actions": ["3"]},
    "class_named": {"game_id": "aaam-01", "class_name": "Other"},
    "class_empty": {"game_id": "aaan-01", "class_name": ""},
    "class_null": {"game_id": "aaao-01", "class_name": None},
    "short_id": {"game_id": "ab"},
    "empty_id": {"game_id": ""},
    "no_id": {"title": "no id"},
    "id_number": {"game_id": 12},
    "extra_fields": {"game_id": "aaap-01", "whatever": {"a": [1]}},
    "local_dir_given": {"game_id": "aaaq-01", "local_dir": "/elsewhere"},
    "duplicate_first": {"game_id": "dupe-01", "class_name": "First"},
    "not_an_object": [1, 2],
}


def test_metadata_of_every_kind_is_read_as_the_toolkit_reads_it(tmp_path: Path) -> None:
    for name, body in METADATA.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metadata.json").write_text(json.dumps(body), encoding="utf-8")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "metadata.json").write_text('{"game_id": "brok-01",', encoding="utf-8")
    (tmp_path / "bom").mkdir()
    (tmp_path / "bom" / "metadata.json").write_bytes(b'\xef\xbb\xbf{"game_id": "boms-01"}')
    (tmp_path / "latin1").mkdir()
    (tmp_path / "latin1" / "metadata.json").write_bytes(b'{"game_id": "lat\xe9-01"}')
    (tmp_path / "zz_duplicate_second").mkdir()
    (tmp_path / "zz_duplicate_second" / "metadata.json").write_text('{"game_id": "dupe-01", "class_name": "Second"}')
    theirs = _toolkit_scan(tmp_path)
    assert _ours(tmp_path) == theirs
    assert "aaab-01" in theirs and "aaae-01" not in theirs  # both kinds are in the folder


@pytest.mark.parametrize(
    "source",
    [
        "this is not python",
        "X = 1\n",
        "class Brk1:\n    pass\n",
        "from arcengine import ARCBaseGame\n"
        "class Brk1(ARCBaseGame):\n    def __init__(self):\n        raise ValueError('no')\n",
        "raise RuntimeError('at import')\n",
    ],
    ids=["syntax", "no_class", "not_a_game", "constructor_raises", "module_raises"],
)
def test_a_game_that_does_not_start_is_refused_as_the_toolkit_refuses_it(tmp_path: Path, source: str) -> None:
    from arc_agi import LocalEnvironmentWrapper

    info = game_dir(tmp_path, "brk1", source)
    with pytest.raises(game_files.GameStartError):
        game_files.LocalGame(info, 0)
    try:
        w = LocalEnvironmentWrapper(environment_info=_info(info), logger=_quiet, scorecard_id="t", seed=0)
    except Exception:
        return
    assert w._game is None or w.observation_space is None


def test_resimulation_does_not_import_the_toolkit(tmp_path: Path) -> None:
    from tests.harness_recorder import environments

    envs = environments(tmp_path / "envs")
    code = (
        "import sys\n"
        "from ledger.toolkit.game_files import scan_games\n"
        "from ledger.toolkit.seeds import start_game\n"
        "from ledger.toolkit.seeds import seed_classes\n"
        f"infos = scan_games({str(envs)!r})\n"
        "start_game(infos['lsx3-0000003c'])\n"
        "seed_classes(infos['clk2-0000000b'])\n"
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('arc_agi', 'matplotlib', 'flask')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert r.stdout.strip() == ""
