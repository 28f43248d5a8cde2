"""A full disk and a read-only ledger: the agent is told at once, nothing already written is damaged.

Disk full two ways: a database capped with ``PRAGMA max_page_count`` on capture's connection (always runs), and
a real full filesystem (a small tmpfs this test mounts, filled with a ballast file; needs root, skipped without).
Read-only two ways: ``PRAGMA query_only`` switched on mid-run, and a ledger on a read-only mount (tests run as
root, which ignores permission bits). Capture raises :class:`CaptureError` saying why; the toolkit's own call
completed and the agent's game goes on exactly as without a ledger; once the fault is gone, capture resumes; verify
passes and what was exported before exports the same. The CLI answers such ledgers with one-line errors.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.domain.events import card_stream
from ledger.errors import CaptureError, StoreError
from tests.toolkit import arcade, step

ROOT = Path(__file__).resolve().parent.parent
LEDGER_CLI = [sys.executable, "-c", "from ledger.cli import main; main()"]
GAME = "cnt3-0000000a"


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (skips the test where mounting is not allowed)."""
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip()}); the max_page_count test covers it")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(folder: Path) -> Path:
    """Write a ballast file until the filesystem is full; returns it (delete it to free the space)."""
    ballast = folder / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as e:
        assert e.errno == 28  # ENOSPC
    with contextlib.suppress(OSError):
        while True:
            os.write(fd, b"\0")
    os.close(fd)
    return ballast


def frame(f: Any) -> tuple:
    return f.state, f.levels_completed, [np.asarray(layer).tolist() for layer in f.frame]


class Game:
    """One cnt3 play with the ledger attached, and the same play on a second Arcade without it, in lockstep."""

    def __init__(self, led: Ledger) -> None:
        self.led = led
        self.arc, self.ref = arcade(), arcade()
        led.attach(self.arc)
        self.card = self.arc.open_scorecard()
        self.env = self.arc.make("cnt3", scorecard_id=self.card, seed=1)
        self.ref_env = self.ref.make("cnt3", scorecard_id=self.ref.open_scorecard(), seed=1)
        self.n = 0

    def step(self) -> None:
        """One action on both; the attached one may raise CaptureError, after the toolkit call completed."""
        self.n += 1
        a = 1 if self.n % 9 == 0 else 2
        expected = frame(step(self.ref_env, a))
        assert frame(step(self.env, a)) == expected

    def toolkit_actions(self) -> int:
        return self.arc.scorecard_manager.scorecards[self.card].cards[GAME].actions[0]

    def ledger_actions(self) -> int:
        return self.led.load_card(self.card, use_cache=False).games[GAME][0].actions

    def until_refused(self, limit: int = 20_000) -> CaptureError:
        """Step until capture refuses; the refused step's toolkit call still happened."""
        for _ in range(limit):
            try:
                self.step()
            except CaptureError as e:
                return e
        pytest.fail(f"the ledger accepted {limit} steps on a full/read-only database")


def snapshot(led: Ledger, card: str) -> tuple[list, str, int]:
    rows = led.store.read_stream(card_stream(card))
    return rows, led.export(card), rows[-1].seq


def assert_intact(led: Ledger, card: str, before: tuple[list, str, int]) -> None:
    """Verify passes and every event and export from before the fault is exactly as it was."""
    rows, exported, seq = before
    report = verify_ledger(led.store)
    assert report.ok, report.errors
    assert led.store.read_stream(card_stream(card))[: len(rows)] == rows
    assert led.export(card, until=seq) == exported


def check_refusal(game: Game, err: CaptureError, says: str) -> None:
    assert says in str(err)
    assert isinstance(err.__cause__, StoreError)
    # The toolkit counted the refused step; the ledger has exactly the steps it acknowledged.
    assert game.toolkit_actions() == game.ledger_actions() + 1


def recovers(game: Game, before: tuple[list, str, int]) -> None:
    for _ in range(5):
        game.step()
    assert game.toolkit_actions() == game.ledger_actions() + 1  # the refused step stays missing, nothing else
    assert_intact(game.led, game.card, before)


def cli(db: Path, *args: str) -> tuple[int, str, str]:
    r = subprocess.run([*LEDGER_CLI, "--db", str(db), *args], capture_output=True, text=True, cwd=ROOT)
    return r.returncode, r.stdout, r.stderr


def assert_one_line_error(result: tuple[int, str, str], says: str) -> None:
    code, _, err = result
    assert code == 1
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("Error: ") and says in last, err


def test_database_full_max_page_count(db_path: Path) -> None:
    with Ledger.open(db_path) as led:
        game = Game(led)
        for _ in range(40):
            game.step()
        before = snapshot(led, game.card)
        con = led.store._write_dbapi()  # the connection every append of this process goes through
        (pages,) = con.execute("PRAGMA page_count").fetchone()
        con.execute(f"PRAGMA max_page_count={pages}")
        err = game.until_refused()
        check_refusal(game, err, "database or disk is full")
        # Refused again and again while full, each time said.
        with pytest.raises(CaptureError, match="disk is full"):
            game.step()
        assert game.toolkit_actions() == game.ledger_actions() + 2
        con.execute("PRAGMA max_page_count=1073741823")
        for _ in range(5):
            game.step()
        assert game.toolkit_actions() == game.ledger_actions() + 2
        assert_intact(led, game.card, before)


def test_filesystem_full(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "2m") as folder:
        db = folder / "ledger.sqlite"
        with Ledger.open(db) as led:
            game = Game(led)
            for _ in range(40):
                game.step()
            before = snapshot(led, game.card)
            ballast = fill(folder)
            err = game.until_refused()
            check_refusal(game, err, "database or disk is full")

            # While the disk is full, the CLI still reads; what must write fails with one line.
            code, out, stderr = cli(db, "export", game.card)
            assert (code, stderr) == (0, "") and out == led.export(game.card) + "\n"
            code, out, stderr = cli(db, "verify")
            assert code == 0 and out.startswith("OK: ") and stderr == ""
            assert cli(db, "cards", "--json")[0] == 0
            assert_one_line_error(cli(db, "demo"), "database or disk is full")
            assert_one_line_error(cli(folder / "new.sqlite", "init"), "database or disk is full")

            ballast.unlink()
            recovers(game, before)


def test_read_only_mid_run(db_path: Path) -> None:
    with Ledger.open(db_path) as led:
        game = Game(led)
        for _ in range(20):
            game.step()
        before = snapshot(led, game.card)
        con = led.store._write_dbapi()
        con.execute("PRAGMA query_only=ON")
        err = game.until_refused()
        check_refusal(game, err, "attempt to write a readonly database")
        con.execute("PRAGMA query_only=OFF")
        recovers(game, before)


def test_ledger_on_a_read_only_mount(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "4m") as folder:
        db = folder / "ledger.sqlite"
        with Ledger.open(db) as led:
            game = Game(led)
            for _ in range(20):
                game.step()
            arc_close = game.arc.close_scorecard(game.card).model_dump_json()
            before = snapshot(led, game.card)
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        # An agent cannot attach: it is told before it plays, with the reason.
        with pytest.raises(StoreError, match="read-only"):
            Ledger.open(db)
        # Read commands still read it (opened read-only, immutable: WAL's -shm cannot be created there) ...
        code, out, err = cli(db, "export", game.card)
        assert (code, err, out) == (0, "", arc_close + "\n")
        for args in (["cards"], ["verify"], ["replay", game.card], ["audit", game.card], ["events", game.card]):
            code, out, err = cli(db, *args)
            assert code == 0 and "Traceback" not in err, (args, err)
        # ... what must write is told why it cannot.
        assert_one_line_error(cli(db, "demo"), "read-only")
        assert_one_line_error(cli(db, "init"), "read-only")
        assert_one_line_error(cli(folder / "new.sqlite", "init"), "read-only")
        subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
        with Ledger.open(db) as led:
            assert_intact(led, game.card, before)
            assert led.export(game.card) == arc_close


def test_a_card_the_ledger_could_not_open_is_refused_not_silently_dropped(db_path: Path) -> None:
    with Ledger.open(db_path) as led:
        con = led.store._write_dbapi()
        arc = arcade()
        led.attach(arc)
        con.execute("PRAGMA query_only=ON")
        with pytest.raises(CaptureError, match="attempt to write a readonly database"):
            arc.open_scorecard()
        (card,) = arc.scorecard_manager.scorecards  # the toolkit did open it
        con.execute("PRAGMA query_only=OFF")
        # Every later call on that card says the ledger does not have it (it used to record nothing, silently).
        with pytest.raises(CaptureError, match=f"card {card} is not in the ledger: recording its opening failed"):
            arc.make("cnt3", scorecard_id=card)
        assert led.card_ids() == []
        # A card opened once the ledger is writable again is captured as usual.
        fine = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=fine)
        step(env, 1)
        assert led.export(fine) == arc.get_scorecard(fine).model_dump_json()
