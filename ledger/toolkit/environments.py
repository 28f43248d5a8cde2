"""Game folders: every ``metadata.json`` under an environment_files tree, found as the toolkit's Arcade finds them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from ledger.domain.baselines import entry_from_metadata
from ledger.domain.events import BaselineEntry


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


def scan_games(environments_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`ledger.toolkit.game_files.scan_games`, imported only when called."""
    from ledger.toolkit.game_files import scan_games as scan

    return scan(environments_dir)
