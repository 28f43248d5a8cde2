"""A full or closed standard output: every command that prints says so in one line and exits 2 (a full disk,
``> /dev/full``), or stops quietly with exit 141 (a closed pipe, as under ``| head``); never a traceback, never the
interpreter's "Exception ignored" at exit. Real child processes, the real /dev/full, a real pipe whose reader
is gone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.errors import CLOSED_PIPE
from tests.cli_run import LEDGER, REPO, ledger
from tests.toolkit import ENV_DIR

CORPUS = REPO / "tests" / "recordings_corpus"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, Path]:
    """A ledger with the demo's card, a baseline set and a signing key; (db, card, folder)."""
    root = tmp_path_factory.mktemp("full")
    path = str(root / "l.sqlite")
    assert ledger("--db", path, "demo").returncode == 0
    assert ledger("--db", path, "demo", "--seed", "1").returncode == 0
    card, other = (c["card_id"] for c in json.loads(ledger("--db", path, "cards", "--json").stdout))
    shutil.copytree(ENV_DIR / "cnt3", root / "envs" / "cnt3")
    assert ledger("--db", path, "baselines", "import", str(root / "envs"), "--label", "b1").returncode == 0
    assert ledger("--db", path, "keygen", "k", "-o", str(root / "k.key")).returncode == 0
    cp = ledger("--db", path, "checkpoint", "--key", str(root / "k.key"), "-o", str(root / "cp.txt"))
    assert cp.returncode == 0, cp.stderr
    return path, f"{card} {other}", root


def commands(db: str, cards: str, root: Path) -> list[list[str]]:
    """Every command that prints on standard output, with arguments it accepts."""
    card, other = cards.split()
    d = ["--db", db]
    return [
        ["--help"],
        ["--version"],
        ["cards", "--help"],
        [*d, "cards"],
        [*d, "cards", "--json"],
        [*d, "export", card],
        [*d, "replay", card],
        [*d, "replay", card, "--json"],
        [*d, "events", card],
        [*d, "audit", card],
        [*d, "audit", card, "--json"],
        [*d, "verify"],
        [*d, "compare", card, other],
        [*d, "rescore", card, "--baselines", "b1"],
        [*d, "baselines", "list"],
        [*d, "baselines", "import", str(root / "envs")],
        [*d, "baselines", "show", "b1"],
        [*d, "checkpoint", "--key", str(root / "k.key")],
        [*d, "prove", card, "--checkpoint", str(root / "cp.txt")],
        [*d, "init"],
        [*d, "rebuild-summary"],
        [*d, "copy", "--to", str(root / "copy.sqlite")],
        [*d, "demo", "--seed", "3"],
        [*d, "import", str(CORPUS / "good"), "--environments", str(ENV_DIR)],
    ]


def _run(args: list[str], stdout: int, root: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("LEDGER_DB", None)
    return subprocess.run([LEDGER, *args], stdout=stdout, stderr=subprocess.PIPE, env=env, timeout=120, check=False)


@pytest.mark.heavy
def test_a_full_output_is_one_line_and_exit_2(db: tuple[str, str, Path]) -> None:
    path, card, root = db
    bad = []
    with open("/dev/full", "wb") as full:
        for args in commands(path, card, root):
            r = _run(args, full.fileno(), root)
            err = r.stderr.decode()
            if r.returncode == 0 and not err:
                continue  # printed nothing (nothing to fail on)
            lines = err.strip().splitlines()
            if (
                r.returncode != 2
                or "Traceback" in err
                or "Exception ignored" in err
                or lines[-1] != "Error: cannot write to standard output (/dev/full): No space left on device"
            ):
                bad.append((args, r.returncode, err[-600:]))
    assert bad == [], "\n".join(map(str, bad))


@pytest.mark.heavy
def test_a_closed_pipe_stops_quietly(db: tuple[str, str, Path]) -> None:
    path, card, root = db
    bad = []
    for args in commands(path, card, root):
        read, write = os.pipe()
        os.close(read)
        try:
            r = _run(args, write, root)
        finally:
            os.close(write)
        err = r.stderr.decode()
        # Whatever the command had to say on stderr before it printed; nothing about the pipe, no traceback; 141,
        # the code no verdict uses (ledger/errors.py), even where 1 would mean FAIL.
        if r.returncode != CLOSED_PIPE or "Traceback" in err or "Exception ignored" in err or "Broken pipe" in err:
            bad.append((args, r.returncode, err[-600:]))
    assert bad == [], "\n".join(map(str, bad))


def test_a_pipe_closed_mid_output_stops_the_same_way(tmp_path: Path) -> None:
    # Output many times a pipe's buffer, its reader gone after 10 bytes: the same quiet 141 as a pipe closed before
    # the first byte (above), whatever the size.
    from ledger import Ledger
    from ledger.app.synthetic import write_cards

    path = str(tmp_path / "big.sqlite")
    with Ledger.open(path) as led:
        write_cards(led, 600)
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_DB"}
    for args in (["cards"], ["cards", "--json"], ["cards", "--sort", "score"]):
        with subprocess.Popen(
            [LEDGER, "--db", path, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        ) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            assert len(proc.stdout.read(10)) == 10
            proc.stdout.close()
            err = proc.stderr.read().decode()
            assert proc.wait(timeout=120) == CLOSED_PIPE, (args, err)
        assert "Traceback" not in err and "Exception ignored" not in err and "Broken pipe" not in err, (args, err)
