"""The ledger's own readers, one a format, asked before the installed ones (:mod:`ledger.formats.readers`)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ledger.formats.arcagi3 import Arcagi3Files, json_object
from ledger.formats.harness import parse_name, sniff
from ledger.formats.readers import Decides, Reader, Streamed

#: A run folder's files are small JSON objects; larger files are not looked into.
_RUN_FILE_BYTES = 16 << 20


@lru_cache(maxsize=64)
def _sniffed(path: Path, _stat: tuple[int, int]) -> str:
    return sniff(path)


def _kind(path: Path) -> str:
    try:
        st = path.stat()
        return _sniffed(path, (st.st_size, st.st_mtime_ns))
    except OSError:
        # Its bytes cannot be read: the name says, and the import reports it unreadable.
        return "harness" if parse_name(path.name) else "toolkit" if path.suffix == ".jsonl" else "unknown"


class ToolkitRecordings:
    """The toolkit's recordings (``save_recording=True``); the folder a file is in names its card."""

    name = "toolkit"
    decides: Decides = "answers"

    def reads(self, path: Path) -> bool:
        return _kind(path) == self.name

    def card(self, path: Path) -> str | None:
        return None


class HarnessRecordings(ToolkitRecordings):
    """ARC-AGI-3-Agents' and arc-agi-3-benchmarking's recordings; the recorder's uuid in the file name is the card."""

    name = "harness"
    decides: Decides = "frames"

    def card(self, path: Path) -> str | None:
        name = parse_name(path.name)
        if name is None:
            raise ValueError(
                "a harness recording by its lines, not under the name its recorder gives it "
                "(<game_id>.<agent>.<uuid>.recording.jsonl): the uuid there is its card and nothing else says it; "
                "give it that name"
            )
        return name.uuid


class RunFolders:
    """arc-agi-3-benchmarking's run folders, given to the harness recording of the same run."""

    name = "run-folder"
    decides: Decides = "usage"

    def reads(self, path: Path) -> bool:
        doc = json_object(path, _RUN_FILE_BYTES)
        return doc is not None and ({"step", "parsed_action"} <= doc.keys() or {"run_id", "game_id"} <= doc.keys())

    def card(self, path: Path) -> str | None:
        return None


def builtin() -> list[Reader | Streamed]:
    return [ToolkitRecordings(), HarnessRecordings(), RunFolders(), Arcagi3Files()]
