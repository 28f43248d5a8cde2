"""The ledger's own readers, one a format, asked before the installed ones (:mod:`ledger.formats.readers`), and what
tells their files apart: the recorders' file names and the first lines' shape (:func:`sniff`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from ledger.formats.arcagi3 import Arcagi3Files, json_object
from ledger.formats.readers import Decides, Reader, Streamed

#: A run folder's files are small JSON objects; larger files are not looked into.
_RUN_FILE_BYTES = 16 << 20

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_NAME = re.compile(rf"^(?P<game>[^.]+)\.(?P<agent>.+)\.(?P<uuid>{_UUID})\.recording\.jsonl$")
RUN_DIR = re.compile(rf"^(?P<prefix>.+)\.(?P<run>{_UUID})$")
STATES = frozenset(("NOT_PLAYED", "NOT_FINISHED", "WIN", "GAME_OVER"))
ACTION_NAMES = {"RESET": 0, **{f"ACTION{i}": i for i in range(1, 8)}}


@dataclass(frozen=True, slots=True)
class HarnessName:
    game_id: str
    agent: str
    uuid: str

    @property
    def prefix(self) -> str:
        """``{game_id}.{agent}``: the benchmarking harness's run folders start with it."""
        return f"{self.game_id}.{self.agent}"


def parse_name(name: str) -> HarnessName | None:
    m = _NAME.match(name)
    if m is None:
        return None
    return HarnessName(m["game"], m["agent"], m["uuid"].lower())


any_json = msgspec.json.Decoder()


def decodes(decoder: msgspec.json.Decoder[Any], raw: bytes) -> bool:
    try:
        decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


#: What ``ledger import`` reads, for the error on anything else.
FORMATS = (
    "the toolkit's recordings (<recordings_dir>/<card_id>/<game_id>-<guid>.jsonl, lines "
    '{"timestamp", "data": {"game_id", "state", "levels_completed", "action_input": {"id": "ACTION1"}, ...}})',
    "the ARC-AGI-3-Agents harness's recordings (<game_id>.<agent>.<uuid>.recording.jsonl, lines "
    '{"timestamp", "data": FrameData} and side lines)',
)
_SNIFF_LINES = 20


class _Sniff(msgspec.Struct):
    timestamp: str
    data: msgspec.Raw


_sniff = msgspec.json.Decoder(_Sniff)
_NAMED_ACTION = re.compile(rb'"action_input":\s*\{"id":\s*"')


def sniff(path: Path) -> str:
    """``toolkit``, ``harness`` or ``unknown``, from the first lines' shape; the name decides only what they cannot."""
    harness_name = parse_name(path.name) is not None
    by_name = "harness" if harness_name else "toolkit" if path.suffix == ".jsonl" else "unknown"
    records = 0
    with open(path, "rb") as f:
        for _ in range(_SNIFF_LINES):
            raw = f.readline(1 << 24)
            if not raw:
                break
            if not decodes(any_json, raw.strip()):
                continue
            records += 1
            try:
                rec = _sniff.decode(raw.strip())
            except (msgspec.DecodeError, RecursionError):
                continue  # JSON, but not a {"timestamp", "data"} record
            d = bytes(rec.data)
            if not d.startswith(b"{"):
                continue
            head = d[: 1 << 16]
            if b'"state"' in head and b'"game_id"' in head:
                fpos, spos = head.find(b'"frame"'), head.find(b'"state"')
                # FrameData.model_dump writes the frame before the state; the toolkit writes it last from 0.9.4 on,
                # first before that, with the action's name (``"id": "RESET"``) where FrameData has its number.
                framedata = 0 <= fpos < spos and not _NAMED_ACTION.search(d[spos:])
                return "harness" if harness_name or framedata else "toolkit"
    if records == 0:
        # No recording at all, unless empty or its first record is still being written (the reader says so).
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        writing = head.lstrip().startswith(b'{"timestamp"') and b"\n" not in head
        return by_name if writing or not head.strip() else "unknown"
    return "harness" if harness_name else "unknown"


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
