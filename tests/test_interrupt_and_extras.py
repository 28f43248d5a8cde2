"""Ctrl-C exits 130 and says what is committed; without the `arc` extra the toolkit
commands name the extra to install; progress bars on a terminal are throttled (import) or appear (verify)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.cli.progress import VERIFY_PROGRESS_FROM
from ledger.domain.events import ActionTaken, CardOpened, PlayStarted, card_stream
from tests.cli_run import CORPUS_CARD, LEDGER, REPO, import_copies, ledger, no_traceback, own_guid

ENV_DIR = REPO / "tests" / "environment_files"


def _many_cards(root: Path, n: int) -> Path:
    """``n`` card folders under ``root``, each a copy of a real toolkit recording."""
    src = next(CORPUS_CARD.iterdir())
    text = src.read_text()
    for i in range(n):
        d = root / str(uuid.uuid5(uuid.NAMESPACE_URL, f"card-{i:05d}"))  # named by card id, as the toolkit does
        d.mkdir(parents=True)
        copy, name = own_guid(text, src.name, d.name)  # a play belongs to one card
        (d / name).write_text(copy)
    return root


def test_ctrl_c_exits_130_and_says_how_many_cards_are_committed(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    rec = _many_cards(tmp_path / "rec", 800)
    assert ledger("--db", db, "init").returncode == 0
    proc = subprocess.Popen(
        [LEDGER, "--db", db, "import", str(rec)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        # Interrupt once some cards are in (the ledger is readable while the import writes).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.3)
            with Ledger.open(db, readonly=True) as led:
                if len(led.card_ids()) >= 20:
                    break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in out + err and "Aborted!" not in err
    last = err.strip().splitlines()[-1]
    with Ledger.open(db, readonly=True) as led:
        committed = len(led.card_ids())
    assert 20 <= committed < 800
    assert last == (
        f"import: {committed} of 800 card(s) committed, {800 - committed} not yet (each card is all or nothing); "
        "run it again to finish"
    )
    r = ledger("--db", db, "import", str(rec), "--json")
    totals = json.loads(r.stdout)["totals"]
    assert r.returncode == 0 and totals["already_imported"] == committed and totals["imported"] == 800 - committed
    assert ledger("--db", db, "verify").returncode == 0


@pytest.mark.heavy
def test_ctrl_c_stops_the_search_of_a_recordings_actions_and_writes_nothing_of_its_card(tmp_path: Path) -> None:
    """A harness recording imported with the game code is searched line by line before its card is written: Ctrl-C
    stops the search there (it used to wait for the whole search, then write the card and exit 0)."""
    import random as rnd

    from arcengine import GameAction

    from tests.harness_recorder import Recorder, convert, environments
    from tests.toolkit import arcade

    envs = environments(tmp_path / "envs")
    rng = rnd.Random(5)
    arc = arcade(envs)
    env = arc.make("lsx3-0000003c", scorecard_id=arc.open_scorecard())
    rec = Recorder(tmp_path / "rec", "lsx3-0000003c.random.3000", rng)
    for _ in range(3000):
        done = env.observation_space.state.name in ("GAME_OVER", "WIN")
        rec.record(
            json.loads(convert(env.step(GameAction.from_id(0 if done else rng.randint(1, 4)))).model_dump_json())
        )
    db = str(tmp_path / "l.sqlite")
    proc = subprocess.Popen(
        [LEDGER, "--db", db, "import", str(rec.path), "--environments", str(envs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(3)  # the file is read and the game started; its 3,000 lines take several times that to search
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in out + err
    assert err.strip().splitlines()[-1].startswith("import: 0 of 1 card(s) committed, 1 not yet")
    with Ledger.open(db, readonly=True) as led:
        assert led.card_ids() == []


# -- the `arc` extra ----------------------------------------------------------------------------------------------

#: Run the CLI as an install without the toolkit: importing arc_agi or arcengine fails exactly as when they are not
#: installed (ModuleNotFoundError from the import system), whatever site-packages holds.
_WITHOUT_TOOLKIT = """
import sys
from importlib.abc import MetaPathFinder

class NotInstalled(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("arc_agi", "arcengine"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
from ledger.cli import main
sys.argv = ["ledger", *sys.argv[1:]]
main()
"""


def _without_toolkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _WITHOUT_TOOLKIT, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.heavy
def test_toolkit_commands_name_the_extra_when_it_is_not_installed(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    import_copies(db, tmp_path / "rec", ["one"])
    for args in (["demo"], ["audit", "one", "--environments", str(ENV_DIR)]):
        r = _without_toolkit("--db", db, *args)
        no_traceback(r)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert "pip install 'arc-scorecard-ledger[arc]'" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    # everything that does not run games still works without the toolkit
    r = _without_toolkit("--db", db, "audit", "one")
    assert r.returncode == 0 and "SKIP resimulation" in r.stdout, r.stdout + r.stderr
    for args in (["cards"], ["export", "one"], ["replay", "one"], ["events", "one"], ["verify"]):
        r = _without_toolkit("--db", db, *args)
        assert r.returncode == 0, (args, r.stderr)


# -- progress on a terminal -------------------------------------------------------------------------------------


def _on_a_terminal(args: list[str], interrupt_on: bytes | None = None) -> tuple[int, bytes, float]:
    """Run ``ledger ARGS`` with stderr on a pseudo-terminal: (exit code, what the terminal got, seconds).

    ``interrupt_on``: send SIGINT (Ctrl-C) as soon as the terminal shows these bytes.
    """
    master, slave = pty.openpty()
    t0 = time.monotonic()
    proc = subprocess.Popen([LEDGER, *args], stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    got = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            got += chunk
            if interrupt_on is not None and interrupt_on in got:
                proc.send_signal(signal.SIGINT)
                interrupt_on = None
        elif proc.poll() is not None:
            break
    proc.wait(timeout=120)
    os.close(master)
    return proc.returncode, got, time.monotonic() - t0


def test_the_import_bar_redraws_a_few_times_a_second_not_per_line(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    rec = _many_cards(tmp_path / "rec", 300)
    code, tty, seconds = _on_a_terminal(["--db", db, "import", str(rec)])
    assert code == 0, tty[-500:]
    # The bar's own draws: the terminal also shows a carriage return for every newline written after it.
    redraws = tty.count(b"importing  [")
    assert redraws >= 2
    # one redraw per 0.2 s at most (plus the first and the last), however many lines went by
    assert redraws <= seconds / 0.2 + 2, (redraws, seconds)


@pytest.mark.heavy
def test_verify_of_a_large_ledger_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    from datetime import UTC, datetime, timedelta

    t0 = datetime.now(UTC) - timedelta(minutes=1)
    with Ledger.open(db) as led:
        stream = card_stream("big")
        led.store.append(
            stream,
            [CardOpened(ts=t0, card_id="big"), PlayStarted(ts=t0, game_id="wkex-0000000f", guid="g", seed=0)],
            expected_version=0,
        )
        version = 2
        batch = [
            ActionTaken(ts=t0, game_id="wkex-0000000f", guid="g", action=2, levels_completed=0, state="NOT_FINISHED")
        ] * 20_000
        while version < VERIFY_PROGRESS_FROM:
            led.store.append(stream, batch, expected_version=version)
            version += len(batch)
    code, tty, _ = _on_a_terminal(["--db", db, "verify"])
    assert code == 0 and b"verifying" in tty and b"100%" in tty
    r = ledger("--db", db, "verify")  # stderr is a pipe: no bar
    assert r.returncode == 0 and r.stderr == ""
    # Ctrl-C in the middle of it: exit 130, one line, no traceback
    code, tty, _ = _on_a_terminal(["--db", db, "verify"], interrupt_on=b"verifying")
    text = tty.decode("utf-8", "replace")
    assert code == 130, text[-800:]
    assert "Traceback" not in text and "Aborted!" not in text
    assert (
        text.strip()
        .splitlines()[-1]
        .endswith("the ledger holds everything committed before Ctrl-C and nothing half-written")
    )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped interrupt, on purpose
def test_ctrl_c_that_lands_in_a_weakref_callback_still_exits_130() -> None:
    """Python drops a KeyboardInterrupt raised inside a weakref callback ("Exception ignored in ..."): the command
    must not run on to exit 0 as if nothing was asked."""
    import gc
    import weakref

    import click
    from click.testing import CliRunner

    from ledger.cli import cli

    ran_on: list[bool] = []

    @click.command("interrupted-in-a-callback")
    def interrupted_in_a_callback() -> None:
        class Thing:
            pass

        thing = Thing()
        keep = weakref.ref(thing, lambda _ref: os.kill(os.getpid(), signal.SIGINT))
        del thing
        gc.collect()
        # The Ctrl-C dropped in the callback is delivered again a moment later and ends this sleep at once; only a
        # command that ran on would reach the line after it (a loaded machine delays the delivery, never skips it).
        time.sleep(30)
        ran_on.append(keep() is None)

    cli.add_command(interrupted_in_a_callback)
    try:
        result = CliRunner().invoke(cli, ["interrupted-in-a-callback"])
    finally:
        cli.commands.pop("interrupted-in-a-callback")
    assert ran_on == []  # dropped where it landed, delivered again: the command stopped right after the callback
    assert result.exit_code == 130, result.output
    assert "nothing half-written" in result.output


CTRL_C_IN_A_CALLBACK = """
import signal, sys, time, weakref
import click
from ledger.cli import cli, main

@click.command("interrupted-in-a-callback")
def interrupted_in_a_callback():
    class Thing:
        pass
    thing = Thing()
    # As importlib's callback that releases a module lock at the end of an import: Ctrl-C lands inside it.
    keep = weakref.ref(thing, lambda _ref: signal.raise_signal(signal.SIGINT))
    del thing
    time.sleep(30)
    print("ran on to its end")

cli.add_command(interrupted_in_a_callback)
sys.argv = ["ledger", "interrupted-in-a-callback"]
main()
"""


def test_ctrl_c_inside_a_callback_ends_the_command_at_once_in_one_line() -> None:
    """A Ctrl-C that lands in a weakref callback or a finalizer (importlib runs one at the end of every import) is
    dropped by Python with "Exception ignored ... Traceback": it must end the command as one that lands anywhere
    else does: at once, exit 130, one line."""
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", CTRL_C_IN_A_CALLBACK], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - start < 20, "the command ran on after Ctrl-C"
    assert r.returncode == 130, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr and "ran on" not in r.stdout, r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith("nothing half-written"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
