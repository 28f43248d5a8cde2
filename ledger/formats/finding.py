"""What the paths given to ``ledger import`` hold: each file asked of the readers, the recordings grouped into cards."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import msgspec

from ledger.errors import ImportInputError
from ledger.formats.builtin_readers import FORMATS, builtin
from ledger.formats.import_problems import Problem
from ledger.formats.readers import Reader, ReaderError, Streamed, installed, reader_for

#: Why a ``.jsonl`` file no reader reads makes no card.
UNREAD = f"not a recording the ledger reads. It reads: {'; '.join(FORMATS)}"


@dataclass(slots=True)
class Found:
    cards: dict[str, list[Path]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    readers: dict[Path, Streamed] = field(default_factory=dict)
    refused: dict[Path, str] = field(default_factory=dict)
    #: The files a reader of :class:`ledger.formats.readers.Decided` reads (joinplank's, a plugin's).
    read: list[tuple[Reader, Path]] = field(default_factory=list)
    #: The run folders given, resolved: the recording of their run must use them.
    runs: frozenset[Path] = frozenset()
    #: An installed reader that does not load, found while a folder was walked (its files are not read).
    reader_error: str | None = None


class _Asker:
    """Asks the built-in readers, then the installed ones, loaded only when needed (a broken plugin stops no other)."""

    def __init__(self) -> None:
        self.mine = builtin()
        self.theirs: list[Reader] | None = None
        self.error: str | None = None

    def __call__(self, f: Path, given: bool) -> Reader | Streamed | None:
        try:
            r = reader_for(f, self.mine)
            if r is None and self.error is None:
                self.theirs = installed() if self.theirs is None else self.theirs
                r = reader_for(f, self.theirs)
        except ReaderError as e:
            if given:
                raise ImportInputError(str(e)) from e
            self.error = str(e)
            return None
        return r


def find_recordings(paths: Iterable[str | os.PathLike[str]]) -> Found:
    """Every file given or under the folders given, asked which reader reads it (see docs/import.md, 'Which card').
    Raises :class:`ImportInputError` for a missing path, a file given that no reader reads, or nothing read at all."""
    found = Found()
    ask = _Asker()
    seen: set[Path] = set()
    empty: list[Path] = []
    runs: set[Path] = set()
    run_folders_alone: list[tuple[Path, str]] = []

    def add(card_id: str, f: Path) -> None:
        # Linux allows any bytes in a name; Python hands undecodable ones over as lone surrogates, which no
        # stream name or message can carry. Report such a card and go on with the others.
        try:
            card_id.encode("utf-8")
            f.name.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(f).decode("utf-8", "backslashreplace")
            msg = "the card folder or file name is not UTF-8: skipped"
            found.problems.append(Problem(shown, None, "bad_name", msg))
            return
        files = cards.setdefault(card_id, {})
        if f.name in files:
            msg = f"card {card_id} already has {files[f.name]}: ignored"
            found.problems.append(Problem(str(f), None, "duplicate", msg))
            return
        files[f.name] = f

    def take(f: Path, r: Reader | Streamed | None, folder_card: str) -> str:
        """``recording``, ``read`` (a reader of Decided), ``run`` (a run folder's file) or ``""`` (not read)."""
        decides = getattr(r, "decides", None)
        if decides == "usage":
            return "run"
        if r is None and f.suffix != ".jsonl":
            return ""
        what = "read" if r is not None and decides is None else "recording"
        real = f.resolve()
        if real in seen:
            return what
        seen.add(real)
        if what == "read":
            found.read.append((r, f))  # type: ignore[arg-type]
            return what
        try:
            card = r.card(f) if r is not None else None  # type: ignore[union-attr]
        except ValueError as e:  # its lines say its format, and its name does not say its card
            card, found.refused[f] = None, str(e)
        add(card or folder_card, f)
        if r is None:
            found.refused[f] = UNREAD
        else:
            found.readers[f] = r  # type: ignore[assignment]
        return "recording"

    cards: dict[str, dict[str, Path]] = {}
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            r = ask(p, True)
            if getattr(r, "decides", None) == "usage":
                p = p.parent  # a run folder's file: the run folder it is in
            elif r is None and p.suffix != ".jsonl":
                raise ImportInputError(
                    f"{p}: not a .jsonl recording. ledger import reads: {'; '.join(FORMATS)}; "
                    "arc-agi-3-benchmarking run folders (run_meta.json, step_NNN.json) beside a harness recording; "
                    "and the usage in joinplank/arc-agi-3-benchmarking's results JSON and costs.json"
                )
            else:
                take(p, r, p.resolve().parent.name)
                continue
        if not p.is_dir():
            raise ImportInputError(f"{p}: no such file or folder")
        said: set[str] = set()
        for d, name in [(p, p.resolve().name), *((d, d.name) for d in sorted(p.iterdir()) if d.is_dir())]:
            for f in sorted(x for x in d.iterdir() if x.is_file()):
                what = take(f, ask(f, False), name)
                said.add("alone" if what == "run" and d == p else what)
        if "alone" in said:
            runs.add(p.resolve())
        if "recording" in said:
            continue
        if "alone" in said:
            rec, why = recording_of_run(p)
            if rec is not None:
                found.problems.append(Problem(str(p), None, "harness", why))
                take(rec, ask(rec, False), rec.parent.name)
                continue
            run_folders_alone.append((p, why))
        elif "read" not in said:
            empty.append(p)
    found.reader_error = ask.error
    found.runs = frozenset(runs)
    if run_folders_alone and not cards:
        raise ImportInputError("; ".join(f"{p}: {why}" for p, why in run_folders_alone))
    for p, why in run_folders_alone:
        found.problems.append(Problem(str(p), None, "empty", f"{why}: skipped"))
    if empty and not cards:
        where = "it or in its card folders" if len(empty) == 1 else "any of them or in their card folders"
        raise ImportInputError(f"{', '.join(map(str, empty))}: no recordings (*.jsonl) in {where}")
    for p in empty:
        msg = "no recordings (*.jsonl) in it or in its card folders: skipped"
        found.problems.append(Problem(str(p), None, "empty", msg))
    found.cards = {cid: [files[n] for n in sorted(files)] for cid, files in cards.items()}
    return found


_TIMESTAMP = re.compile(rb'\{"timestamp": "([^"]+)"')
#: Bytes read from a recording's end to find its last line's time.
TAIL_BYTES = 1 << 22


def _time_span(path: Path) -> tuple[datetime, datetime] | None:
    from ledger.formats.run_folders import utc

    try:
        with open(path, "rb") as f:
            first = _TIMESTAMP.match(f.readline(1 << 20))
            f.seek(max(0, os.fstat(f.fileno()).st_size - TAIL_BYTES))
            last = _TIMESTAMP.findall(f.read())
        if first is None or not last:
            return None
        return utc(first.group(1).decode()), utc(last[-1].decode())
    except (OSError, ValueError):
        return None


def recording_of_run(run_dir: Path) -> tuple[Path | None, str]:
    """The recording beside a run folder given alone: its game's one whose lines span its steps (else None, why)."""
    from ledger.formats.run_folders import read_run_folder, read_run_meta  # a run folder's reading, when one is given

    meta = read_run_meta(run_dir)
    steps = read_run_folder(run_dir)
    game = (meta.game_id if meta is not None else None) or run_dir.name.split(".", 1)[0]
    said = "a benchmarking run folder (run_meta.json, step files): it holds the actions chosen, not the frames"
    if not steps:
        return None, f"{said}, and no step file with a parsed_action"
    slack = timedelta(seconds=1)
    found = []
    for rec in sorted(run_dir.parent.glob(f"{game}.*.recording.jsonl")):
        span = _time_span(rec)
        if span is not None and span[0] - slack <= steps[0].ts and steps[-1].ts <= span[1] + slack:
            found.append(rec)
    if len(found) == 1:
        return found[0], f"{said}: imported with the recording of its game whose lines span its steps, {found[0].name}"
    seen = (
        f"{len(found)} recordings of game {game} beside it span its steps"
        if found
        else (
            f"no recording of game {game} beside it spans its steps ({steps[0].ts.isoformat()} to "
            f"{steps[-1].ts.isoformat()})"
        )
    )
    return None, f"{said}; {seen}: import the run's recording ({game}.<agent>.<uuid>.recording.jsonl)"


class _GuidData(msgspec.Struct):
    guid: str | None = None


class _GuidLine(msgspec.Struct):
    data: _GuidData


_guid_line = msgspec.json.Decoder(_GuidLine)
#: Lines read from a file's head to learn which plays it holds.
HEAD_LINES = 50


def head_guids(path: Path) -> set[str]:
    out: set[str] = set()
    try:
        with open(path, "rb") as f:
            for _ in range(HEAD_LINES):
                raw = f.readline(1 << 24)
                if not raw:
                    break
                try:
                    g = _guid_line.decode(raw.strip()).data.guid
                except (msgspec.DecodeError, RecursionError):
                    continue
                if g:
                    out.add(g)
    except OSError:
        pass
    return out
