"""Running ``ledger``: the installed program in a child process, as a user does, or the same command line through
Click's runner in this process (no Python started per call) where a child process would add nothing to the test."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger import Ledger
from ledger.domain.events import ActionTaken, CardOpened, PlayStarted, card_stream

LEDGER = str(Path(sys.executable).parent / "ledger")
REPO = Path(__file__).resolve().parent.parent
CORPUS_CARD = next((REPO / "tests" / "recordings_corpus" / "good").iterdir())


def ledger(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` in a child process; stdout and stderr captured as text."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    full_env.pop("LEDGER_DB", None)
    if env and "LEDGER_DB" in env:
        full_env["LEDGER_DB"] = env["LEDGER_DB"]
    kwargs.setdefault("timeout", 120)
    return subprocess.run([LEDGER, *args], capture_output=True, text=True, env=full_env, **kwargs)


def in_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` through Click's runner: the exit code, stdout and stderr the program gives, each apart, with
    the environment :func:`ledger` gives it. What the program would print as a traceback is raised here instead."""
    from click.testing import CliRunner

    from ledger.cli import cli

    full_env: dict[str, str | None] = {"COLUMNS": "200", "LEDGER_DB": None, **(env or {})}
    r = CliRunner(env=full_env).invoke(cli, list(args), prog_name="ledger", catch_exceptions=False)
    return subprocess.CompletedProcess(["ledger", *args], r.exit_code, r.stdout, r.stderr)


def no_traceback(r: subprocess.CompletedProcess[str]) -> None:
    """Fail with the whole output when a command printed a traceback or exited other than 0, 1, 2."""
    both = r.stdout + r.stderr
    assert "Traceback" not in both, both
    assert r.returncode in (0, 1, 2), (r.returncode, both)


def import_copies(db: str, root: Path, names: list[str], shift_hours: list[int] | None = None) -> None:
    """Import copies of a real toolkit recording as cards named ``names`` (``--card-id``), each copy's play given
    a guid of its own (a play belongs to one card).

    ``shift_hours`` moves each copy's timestamps so that it opened that many hours ago (a known order and age).
    """
    for i, name in enumerate(names):
        dst = root / name
        dst.mkdir(parents=True)
        for f in CORPUS_CARD.iterdir():
            text, fname = own_guid(f.read_text(), f.name, name)
            if shift_hours:
                text = _shift(text, shift_hours[i])
            (dst / fname).write_text(text)
        r = in_process("--db", db, "import", str(dst), "--card-id", name)
        assert r.returncode == 0, r.stdout + r.stderr


def own_guid(text: str, file_name: str, salt: str) -> tuple[str, str]:
    """A copy of a toolkit recording (its text and file name) whose play has a guid made from ``salt``."""
    import json
    import uuid

    old = json.loads(text.splitlines()[0])["data"]["guid"]
    new = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{old}/{salt}"))
    return text.replace(old, new), file_name.replace(old, new)


def _shift(text: str, hours: int) -> str:
    import json

    out = []
    lines = text.splitlines()
    first = datetime.fromisoformat(json.loads(lines[0])["timestamp"])
    delta = datetime.now(UTC) - timedelta(hours=hours) - first
    for line in lines:
        obj = json.loads(line)
        ts = datetime.fromisoformat(obj["timestamp"]) + delta
        obj["timestamp"] = ts.isoformat()
        out.append(json.dumps(obj))
    return "\n".join(out) + "\n"


def append_open_card(db: str, card_id: str, opened: datetime, actions: int = 3, tags: list[str] | None = None) -> None:
    """A card an agent opened at ``opened``, played ``actions`` actions on a minute apart, and never closed
    (killed): the events capture writes, with those times."""
    with Ledger.open(db) as led:
        evs: list[Any] = [
            CardOpened(ts=opened, card_id=card_id, tags=tags),
            PlayStarted(ts=opened, game_id="wkex-0000000f", guid="g-1", seed=0),
        ]
        evs += [
            ActionTaken(
                ts=opened + timedelta(minutes=i + 1),
                game_id="wkex-0000000f",
                guid="g-1",
                action=2,
                levels_completed=0,
                state="NOT_FINISHED",
            )
            for i in range(actions)
        ]
        led.store.append(card_stream(card_id), evs, expected_version=0)
