"""``ledger record``: run a command with every ``arc_agi.Arcade`` it creates attached to the ledger, unchanged. The
command's PYTHONPATH starts with the ``site`` folder beside this file, whose ``sitecustomize`` wraps
``Arcade.__init__``; its processes note their cards and failures, a JSON line each, in a private temporary file."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

ENV_DB = "LEDGER_RECORD_DB"
ENV_TAGS = "LEDGER_RECORD_TAGS"
ENV_CARDS = "LEDGER_RECORD_CARDS"
ENV_PATH = "LEDGER_RECORD_PATH"

SITE_DIR = Path(__file__).resolve().parent / "site"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True, slots=True)
class Uncaptured:
    pid: int
    python: str
    version: str
    reason: str

    def describe(self) -> str:
        return (
            f"an Arcade of process {self.pid} (Python {self.version} at {self.python}) was NOT recorded: {self.reason}"
        )


@dataclass(frozen=True, slots=True)
class Recorded:
    """How the command ended, the cards it opened (in order, once each) and what it did not let be recorded."""

    returncode: int
    card_ids: list[str]
    uncaptured: list[Uncaptured] = field(default_factory=list)
    last_error: str | None = None
    signals: list[str] = field(default_factory=list)
    #: Capture failures logged in the command ("process N: message").
    failures: list[str] = field(default_factory=list)
    #: (card id, who captures it): cards this run's capture left to another capture of the same ledger.
    aside: list[tuple[str, str]] = field(default_factory=list)
    #: The first request a process of the command sent to the ARC API over HTTP itself ("POST host:port/path").
    http: str | None = None


def ledger_paths() -> list[str]:
    pkg_parent = str(Path(__file__).resolve().parents[3])  # the folder holding the ledger package
    out = [pkg_parent]
    out += [p for p in sys.path if p and os.path.isdir(p) and p not in out and "site-packages" in p]
    return out


def child_env(db: str, tags: Sequence[str], cards_file: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *filter(None, [env.get("PYTHONPATH")])])
    env[ENV_DB] = db
    env[ENV_TAGS] = json.dumps(list(tags))
    env[ENV_CARDS] = cards_file
    env[ENV_PATH] = os.pathsep.join(ledger_paths())
    return env


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class _Tee:
    """Copies one of the command's outputs to ours as it comes, keeping its last 64 KiB for its last error line."""

    def __init__(self, source: IO[bytes], stream: str) -> None:
        self._fd = source.fileno()
        self._stream = stream
        self._tail = b""
        self._thread = threading.Thread(target=self._pump, name=f"ledger-record-{stream}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        ours = getattr(sys, self._stream)
        out = getattr(ours, "buffer", None)
        while chunk := os.read(self._fd, 65536):
            self._tail = (self._tail + chunk)[-65536:]
            try:
                if out is not None:
                    out.write(chunk)
                    out.flush()
                elif ours is not None:
                    ours.write(chunk.decode("utf-8", "replace"))
                    ours.flush()
            except (OSError, ValueError):  # our own output is gone: keep draining so the command never blocks
                out = ours = None

    def text(self, timeout: float = 5.0) -> str:
        """What the command wrote last (waiting a little for processes the command left holding the pipe)."""
        self._thread.join(timeout)
        return self._tail.decode("utf-8", "replace")


def last_error_of(stderr: str, stdout: str) -> str | None:
    """The command's last error line: stderr's if it reads as one, else stdout's (harnesses log there), else any."""
    err, out = last_error_line(stderr), last_error_line(stdout)
    for line in (err, out):
        if line is not None and _ERROR.search(line):
            return line
    return err if err is not None else out


_WARNING = re.compile(r"(^|[\s:])\w*Warning:|^\W*warn(ing)?\b", re.IGNORECASE)
_ERROR = re.compile(r"error|exception|fail|fatal|cannot|can't|could not|denied|refused|not found|no such", re.I)


def last_error_line(text: str) -> str | None:
    """The exception line ending the last traceback, else the last error-like line (never a warning), else the last."""
    lines: list[str] = []
    after_warning = False
    exception: int | None = None
    in_traceback = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        indented = raw[:1].isspace()
        if _WARNING.search(line):
            after_warning = True
            continue
        if after_warning and indented:
            continue
        after_warning = False
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
            continue
        if in_traceback:
            if indented:
                continue
            in_traceback = False
            exception = len(lines)
        lines.append(line)
    if not lines:
        return None
    errors = [i for i, ln in enumerate(lines) if _ERROR.search(ln)]
    if exception is not None:
        errors.append(exception)
    return lines[max(errors)] if errors else lines[-1]


def read_notes(path: str) -> Recorded:
    cards: list[str] = []
    lost: list[Uncaptured] = []
    failures: list[str] = []
    aside: list[tuple[str, str]] = []
    http: str | None = None
    text = Path(path).read_text(encoding="utf-8", errors="replace") if os.path.exists(path) else ""
    for line in text.splitlines():
        try:
            note: dict[str, Any] = json.loads(line)
        except ValueError:
            continue  # a process killed mid-write: its other lines still count
        if isinstance(note.get("card"), str):
            if note["card"] not in cards:
                cards.append(note["card"])
        elif isinstance(note.get("aside"), str):
            # The run's card all the same: another capture of the same ledger records it.
            if note["aside"] not in cards:
                cards.append(note["aside"])
            if note["aside"] not in [c for c, _ in aside]:
                aside.append((note["aside"], str(note.get("by"))))
        elif isinstance(note.get("http"), str):
            http = http or note["http"]
        elif "failed" in note:
            failures.append(f"process {note.get('pid')}: {note['failed']}")
        elif "uncaptured" in note:
            lost.append(
                Uncaptured(
                    pid=int(note.get("pid") or 0),
                    python=str(note.get("python")),
                    version=str(note.get("version")),
                    reason=str(note["uncaptured"]),
                )
            )
    return Recorded(0, cards, lost, failures=failures, aside=aside, http=http)


def run(db: str, tags: Sequence[str], command: Sequence[str]) -> Recorded:
    """Run ``command`` recorded into ``db`` and wait; ``FileNotFoundError``/``PermissionError`` if it cannot start."""
    with tempfile.TemporaryDirectory(prefix="ledger-record-") as tmp:
        cards_file = os.path.join(tmp, "cards")
        proc: subprocess.Popen[bytes] | None = None
        pending: list[int] = []
        forwarded: list[str] = []

        def forward(signum: int, _frame: object) -> None:
            forwarded.append(signal.Signals(signum).name)
            if proc is None:
                pending.append(signum)
            elif proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # the group ended between the two calls
                    os.killpg(proc.pid, signum)

        saved = {s: signal.signal(s, forward) for s in FORWARDED}
        try:
            env = child_env(db, tags, cards_file)
            # Both outputs go through pipes: a Python command would hold its stdout back in blocks otherwise.
            env.setdefault("PYTHONUNBUFFERED", "1")
            proc = subprocess.Popen(
                list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0
            )
            assert proc.stderr is not None and proc.stdout is not None
            tees = (_Tee(proc.stderr, "stderr"), _Tee(proc.stdout, "stdout"))
            for signum in pending:
                os.killpg(proc.pid, signum)
            rc = proc.wait()
        finally:
            for s, h in saved.items():
                signal.signal(s, h)
        last = last_error_of(tees[0].text(), tees[1].text())
        notes = read_notes(cards_file)
    return replace(notes, returncode=exit_status(rc), last_error=last, signals=forwarded)
