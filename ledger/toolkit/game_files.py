"""Game folders read and games started as the toolkit does, without ``import arc_agi`` (0.6-0.9 s of matplotlib, flask
and requests that re-simulation never uses), with ``arcengine`` alone. A ``metadata.json`` is read here only when every
field has its plain JSON type; any other goes to the toolkit's model. The game file is run again for every game started,
as before 0.9.8, so a game that changes its own class starts the same way whatever was started before."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from ledger.domain.baselines import entry_from_metadata
from ledger.domain.events import BaselineEntry


class GameInfo(msgspec.Struct, frozen=True):
    game_id: str
    class_name: str
    local_dir: str


class _Metadata(msgspec.Struct):
    """``EnvironmentInfo``'s fields, each of the one JSON type the toolkit's model reads unchanged."""

    game_id: str
    title: str | None = None
    default_fps: int | None = None
    tags: list[str] | None = None
    private_tags: list[str] | None = None
    level_tags: list[list[str]] | None = None
    baseline_actions: list[int] | None = None
    date_downloaded: str | None = None
    class_name: str | None = None
    local_dir: str | None = None


_DECODER = msgspec.json.Decoder(_Metadata)
#: A date and time every release's model reads (a subset of what it accepts; anything else goes to the model).
_PLAIN_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?")


class GameStartError(Exception):
    """A game's code did not load, or did not answer its first RESET."""


def scan_environments(root: str | os.PathLike[str]) -> tuple[list[BaselineEntry], list[str]]:
    """Every ``metadata.json`` under ``root`` as Arcade scans, sorted by path, and a message per unreadable file."""
    entries: list[BaselineEntry] = []
    problems: list[str] = []
    for path in sorted(Path(root).rglob("metadata.json")):
        try:
            entries.append(entry_from_metadata(path.read_bytes()))
        except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
            problems.append(f"{path}: {e}")
    return entries, problems


def scan_games(environments_dir: str | os.PathLike[str]) -> dict[str, GameInfo]:
    """game_id -> :class:`GameInfo` per ``metadata.json``, the first per id winning (as ``Arcade.make``)."""
    if importlib.util.find_spec("arc_agi") is None:  # found without importing it
        raise ImportError("arc_agi is not installed")
    out: dict[str, GameInfo] = {}
    root = Path(environments_dir)
    if not root.is_dir():
        return out
    for meta in root.rglob("metadata.json"):
        try:
            text = meta.read_text(encoding="utf-8")
        except (OSError, UnicodeError):
            continue  # the toolkit skips a file it cannot read
        info = _read(text, str(meta.parent))
        if info is not None:
            out.setdefault(info.game_id, info)
    return out


def _read(text: str, folder: str) -> GameInfo | None:
    try:
        m = _DECODER.decode(text)
    except msgspec.DecodeError:
        m = None
    if m is not None and (m.date_downloaded is None or _plain_time(m.date_downloaded)):
        return GameInfo(m.game_id, _class_name(m.game_id) if m.class_name is None else m.class_name, folder)
    return _read_by_toolkit(text, folder)


def _plain_time(s: str) -> bool:
    if not _PLAIN_TIME.fullmatch(s):
        return False
    try:
        datetime.fromisoformat(s)
    except ValueError:
        return False
    return True


def _class_name(game_id: str) -> str:
    """The model's default: the first four characters of the game id, the first one upper case."""
    return game_id[:1].upper() + game_id[1:4]


def _read_by_toolkit(text: str, folder: str) -> GameInfo | None:
    from arc_agi.models import EnvironmentInfo

    try:
        info = EnvironmentInfo.model_validate_json(text)
    except Exception:  # the toolkit skips any file that fails to load
        return None
    return GameInfo(info.game_id, info.class_name or "", folder)


def start(info: GameInfo, seed: int | None) -> tuple[Any, Any]:
    """(the game, its answer to the first RESET), as ``LocalEnvironmentWrapper(environment_info, seed=seed)``."""
    from arcengine import ActionInput, ARCBaseGame, GameAction

    if not info.class_name:
        raise GameStartError(f"class_name is not set for {info.game_id}")
    folder = Path(info.local_dir)
    files = [folder / f"{info.class_name.lower()}.py", folder / f"{info.class_name}.py"]
    game_file = next((p for p in files if p.exists()), None)
    if game_file is None:
        raise GameStartError(f"game source file not found (looked in {', '.join(str(p) for p in files)})")
    try:
        source = game_file.read_text(encoding="utf-8")
    except (OSError, UnicodeError) as e:
        raise GameStartError(f"cannot read {game_file}: {e}") from e
    spec = importlib.util.spec_from_loader(f"arc_agi_3.{info.game_id}", loader=None)
    assert spec is not None  # a spec with no loader is always made
    module = importlib.util.module_from_spec(spec)
    try:
        # Compiled apart from this module's own `from __future__ import annotations`, which a plain exec passes on
        # (the toolkit's loader has none): a game's annotations are evaluated, as a dataclass in it needs.
        exec(compile(source, "<string>", "exec", dont_inherit=True), module.__dict__)
    except Exception as e:  # the game file itself fails: the toolkit logs it and has no game
        raise GameStartError(f"{game_file} fails to run: {type(e).__name__}: {e}") from e
    cls: Any = getattr(module, info.class_name, None)
    if not isinstance(cls, type):
        raise GameStartError(f"class {info.class_name} not found in {game_file}")
    if not issubclass(cls, ARCBaseGame):
        raise GameStartError(f"class {info.class_name} in {game_file} is not an ARCBaseGame")
    try:
        kwargs: dict[str, Any] = (
            {"seed": seed} if seed is not None and "seed" in inspect.signature(cls).parameters else {}
        )
        game = cls(**kwargs)
        answer = game.perform_action(ActionInput(id=GameAction.RESET), raw=True)
    except Exception as e:  # the toolkit logs it and has no game, or no answer to RESET
        raise GameStartError(f"{info.class_name} does not start: {type(e).__name__}: {e}") from e
    answer.game_id = info.game_id
    return game, answer


class LocalGame:
    """A started game answering as ``LocalEnvironmentWrapper`` does (``step``: None when the game raises)."""

    def __init__(self, info: GameInfo, seed: int | None) -> None:
        self.game_id = info.game_id
        self.game, self.observation_space = start(info, seed)

    def step(self, action: Any, data: dict[str, Any] | None = None) -> Any:
        from arcengine import ActionInput

        try:
            # As the wrapper builds it (reasoning given: the fields the model counts as set are the same).
            answer = self.game.perform_action(ActionInput(id=action, data=data or {}, reasoning=None), raw=True)
        except Exception:  # the wrapper logs it and answers nothing
            return None
        answer.game_id = self.game_id
        self.observation_space = answer
        return answer


def missing() -> str | None:
    try:
        import arc_agi  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


def game_action(action_id: int) -> Any:
    """The engine's ``GameAction`` of an action number (0 RESET, 1..7); ValueError for any other."""
    from arcengine import GameAction

    return GameAction.from_id(action_id)
