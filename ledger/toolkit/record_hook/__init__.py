"""``ledger record``: run a command with every ``arc_agi.Arcade`` it creates attached to the ledger, unchanged.

The command gets, for itself and the Python processes it starts, a PYTHONPATH whose first entry is the ``site``
folder next to this file: its ``sitecustomize`` wraps ``Arcade.__init__`` when ``arc_agi`` is imported (see
``site/sitecustomize.py``), and :mod:`ledger.toolkit.record_hook.child` attaches the ledger. Nothing is installed;
the environment of the ``ledger`` process itself is not changed. Each process that opens a card notes its id in
a file of a private temporary folder, so the recorder can list what it captured.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ENV_DB = "LEDGER_RECORD_DB"
ENV_TAGS = "LEDGER_RECORD_TAGS"
ENV_CARDS = "LEDGER_RECORD_CARDS"
ENV_PATH = "LEDGER_RECORD_PATH"

SITE_DIR = Path(__file__).resolve().parent / "site"


@dataclass(frozen=True, slots=True)
class Recorded:
    """How the command ended and the cards it opened (in order, once each)."""

    returncode: int
    card_ids: list[str]


def ledger_paths() -> list[str]:
    """Where this process imports the ledger and its dependencies from (appended to the command's path)."""
    pkg_parent = str(Path(__file__).resolve().parents[3])  # the folder holding the ledger package
    out = [pkg_parent]
    out += [p for p in sys.path if p and os.path.isdir(p) and p not in out and "site-packages" in p]
    return out


def child_env(db: str, tags: Sequence[str], cards_file: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the recorded command: the hook first on PYTHONPATH, the ledger named."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(SITE_DIR), *filter(None, [env.get("PYTHONPATH")])])
    env[ENV_DB] = db
    env[ENV_TAGS] = json.dumps(list(tags))
    env[ENV_CARDS] = cards_file
    env[ENV_PATH] = os.pathsep.join(ledger_paths())
    return env


def exit_status(returncode: int) -> int:
    """A shell's exit status for a child's return code (128 + N for death by signal N)."""
    return 128 - returncode if returncode < 0 else returncode


def run(db: str, tags: Sequence[str], command: Sequence[str]) -> Recorded:
    """Run ``command`` recorded into ledger ``db``; wait for it, forwarding SIGTERM/SIGHUP.

    Ctrl-C at a terminal reaches the command itself (same process group); this process waits for it to finish,
    so the cards it captured can be listed. Raises ``FileNotFoundError``/``PermissionError`` if the command
    cannot be started.
    """
    with tempfile.TemporaryDirectory(prefix="ledger-record-") as tmp:
        cards_file = os.path.join(tmp, "cards")
        proc = subprocess.Popen(list(command), env=child_env(db, tags, cards_file))

        def forward(signum: int, _frame: object) -> None:
            if proc.poll() is None:
                proc.send_signal(signum)

        saved = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
        saved[signal.SIGINT] = signal.signal(signal.SIGINT, lambda *_: None)
        try:
            rc = proc.wait()
        finally:
            for s, h in saved.items():
                signal.signal(s, h)
        seen: list[str] = []
        if os.path.exists(cards_file):
            for line in Path(cards_file).read_text().split():
                if line not in seen:
                    seen.append(line)
    return Recorded(returncode=exit_status(rc), card_ids=seen)
