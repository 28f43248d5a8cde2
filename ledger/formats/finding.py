"""Finding recordings under the paths given to ``ledger import``: which files make which card."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec

from ledger.errors import ImportInputError
from ledger.formats.harness import FORMATS, parse_name
from ledger.formats.import_problems import Problem
from ledger.formats.run_folders import read_run_folder, read_run_meta


def _card_of(f: Path, folder_card: str) -> str:
    name = parse_name(f.name)
    return name.uuid if name is not None else folder_card


def find_recordings(paths: Iterable[str | os.PathLike[str]]) -> tuple[dict[str, list[Path]], list[Problem]]:
    """card_id -> its recording files (sorted by name), from recordings folders, card folders or ``.jsonl`` files.

    A folder holding ``.jsonl`` files is a card folder; its sub-folders holding ``.jsonl`` files are cards too
    (a recordings folder). A harness recording (``{game_id}.{agent}.{uuid}.recording.jsonl``) is a card of its
    own, named by its uuid, wherever it is. A folder with no recording among others that have some is skipped
    with a note (kind ``empty``); raises :class:`ImportInputError` for a path that does not exist or is not a
    ``.jsonl`` file, and when no path holds any recording.
    """
    cards: dict[str, dict[str, Path]] = {}
    problems: list[Problem] = []
    seen: set[Path] = set()
    empty: list[Path] = []
    run_folders_alone: list[tuple[Path, str]] = []

    def add(card_id: str, f: Path) -> None:
        # Linux allows any bytes in a name; Python hands undecodable ones over as lone surrogates, which no
        # stream name or message can carry. Report such a card and go on with the others.
        try:
            card_id.encode("utf-8")
            f.name.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(f).decode("utf-8", "backslashreplace")
            problems.append(Problem(shown, None, "bad_name", "the card folder or file name is not UTF-8: skipped"))
            return
        real = f.resolve()
        if real in seen:
            return
        seen.add(real)
        files = cards.setdefault(card_id, {})
        if f.name in files:
            problems.append(Problem(str(f), None, "duplicate", f"card {card_id} already has {files[f.name]}: ignored"))
            return
        files[f.name] = f

    def jsonl(d: Path) -> list[Path]:
        return sorted(f for f in d.glob("*.jsonl") if f.is_file())

    for raw in paths:
        p = Path(raw)
        if p.is_file():
            if p.suffix != ".jsonl":
                if claimed(p):
                    continue  # an installed reader's (ledger.imports.import_readers imports it)
                raise ImportInputError(
                    f"{p}: not a .jsonl recording. ledger import reads: {'; '.join(FORMATS)}; "
                    "arc-agi-3-benchmarking run folders (run_meta.json, step_NNN.json) beside a harness recording; "
                    "and the usage in joinplank/arc-agi-3-benchmarking's results JSON and costs.json"
                )
            add(_card_of(p, p.resolve().parent.name), p)
        elif p.is_dir():
            found = jsonl(p)
            for f in found:
                add(_card_of(f, p.resolve().name), f)
            for sub in sorted(d for d in p.iterdir() if d.is_dir()):
                inner = jsonl(sub)
                found += inner
                for f in inner:
                    add(_card_of(f, sub.name), f)
            if not found and (p / "run_meta.json").is_file():
                rec, why = recording_of_run(p)
                if rec is not None:
                    problems.append(Problem(str(p), None, "harness", why))
                    add(_card_of(rec, rec.parent.name), rec)
                    continue
                run_folders_alone.append((p, why))
            elif not found and not _reads_some(p):
                empty.append(p)
        else:
            raise ImportInputError(f"{p}: no such file or folder")
    if run_folders_alone and not cards:
        raise ImportInputError("; ".join(f"{p}: {why}" for p, why in run_folders_alone))
    for p, why in run_folders_alone:
        problems.append(Problem(str(p), None, "empty", f"{why}: skipped"))
    if empty and not cards:
        where = "it or in its card folders" if len(empty) == 1 else "any of them or in their card folders"
        raise ImportInputError(f"{', '.join(map(str, empty))}: no recordings (*.jsonl) in {where}")
    for p in empty:
        problems.append(Problem(str(p), None, "empty", "no recordings (*.jsonl) in it or in its card folders: skipped"))
    return {cid: [files[n] for n in sorted(files)] for cid, files in cards.items()}, problems


def claimed(path: Path) -> bool:
    """Whether a reader (:mod:`ledger.formats.readers`: a built-in one, or an installed one) reads ``path``."""
    from ledger.formats.builtin_readers import builtin
    from ledger.formats.readers import ReaderError, installed, reader_for

    try:
        return reader_for(path, builtin()) is not None or reader_for(path, installed()) is not None
    except ReaderError as e:
        raise ImportInputError(str(e)) from e


def _reads_some(folder: Path) -> bool:
    """Whether a reader reads a file in ``folder`` or its sub-folders (as it reads recordings there)."""
    subs = [folder, *(d for d in folder.iterdir() if d.is_dir())]
    return any(claimed(f) for d in subs for f in d.iterdir() if f.is_file() and f.suffix != ".jsonl")


_TIMESTAMP = re.compile(rb'\{"timestamp": "([^"]+)"')
#: Bytes read from a recording's end to find its last line's time.
TAIL_BYTES = 1 << 22


def _time_span(path: Path) -> tuple[datetime, datetime] | None:
    """The times of a harness recording's first and last lines (its lines start with their timestamp)."""
    try:
        with open(path, "rb") as f:
            first = _TIMESTAMP.match(f.readline(1 << 20))
            f.seek(max(0, os.fstat(f.fileno()).st_size - TAIL_BYTES))
            last = _TIMESTAMP.findall(f.read())
        if first is None or not last:
            return None
        return _utc(first.group(1)), _utc(last[-1])
    except (OSError, ValueError):
        return None


def _utc(raw: bytes) -> datetime:
    t = datetime.fromisoformat(raw.decode().replace("Z", "+00:00"))
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def recording_of_run(run_dir: Path) -> tuple[Path | None, str]:
    """The harness recording beside a benchmarking run folder given alone (the folder holds the actions chosen,
    not the frames): the one recording of its game whose lines span the times of its steps; else None, with why."""
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
    """The play guids on the first lines of a recording (empty when none is readable)."""
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
