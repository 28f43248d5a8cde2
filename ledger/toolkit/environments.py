"""Game folders: every ``metadata.json`` under an environment_files tree, found as the toolkit's Arcade finds them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from ledger.core.baselines import entry_from_metadata
from ledger.core.events import BaselineEntry


def scan_environments(root: str | os.PathLike[str]) -> tuple[list[BaselineEntry], list[str]]:
    """Every ``metadata.json`` under ``root`` (recursively, as the toolkit's Arcade scans), sorted by path.

    Returns the entries and one message per file that could not be read (the toolkit skips those too).
    """
    entries: list[BaselineEntry] = []
    problems: list[str] = []
    for path in sorted(Path(root).rglob("metadata.json")):
        try:
            entries.append(entry_from_metadata(path.read_bytes()))
        except (OSError, msgspec.DecodeError, msgspec.ValidationError) as e:
            problems.append(f"{path}: {e}")
    return entries, problems


def scan_games(environments_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """game_id -> ``arc_agi.EnvironmentInfo`` for every ``metadata.json`` under the folder, as the toolkit scans.

    This is ``Arcade._scan_for_environments`` (recursive, ``local_dir`` = the file's folder, unreadable files
    skipped) without constructing an Arcade, whose OPERATION_MODE environment variable could take it online.
    The first file found for a game id wins, as ``Arcade.make`` with an exact version picks the first match.
    """
    from arc_agi.models import EnvironmentInfo

    out: dict[str, Any] = {}
    for meta in Path(environments_dir).rglob("metadata.json"):
        try:
            info = EnvironmentInfo.model_validate_json(meta.read_text(encoding="utf-8"))
        except Exception:  # the toolkit skips any file that fails to load
            continue
        info.local_dir = str(meta.parent)
        out.setdefault(info.game_id, info)
    return out
