"""`ledger record`: how a run ends when nothing was captured, when the command fails, when the recorder alone is
signalled, and when the command's Python cannot load the ledger (a second interpreter, made by a fixture)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger import Ledger
from tests.rest_agent import LEDGER

HARNESS = Path(__file__).resolve().parent / "swarm_harness.py"


def record(db: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LEDGER, "--db", str(db), "record", "--", *command], capture_output=True, text=True, timeout=300
    )


def cards_in(db: Path) -> list[str]:
    with Ledger.open(db) as led:
        return list(led.card_ids())


def test_a_command_that_opens_no_card_exits_1_with_its_last_error_line(db_path: Path) -> None:
    script = "import sys; print('listing games'); sys.stderr.write('offline: cannot reach the game list\\n')"
    r = record(db_path, sys.executable, "-c", script)
    assert r.returncode == 1, r.stderr
    assert "no card captured" in r.stderr
    assert "the command's last error line: offline: cannot reach the game list" in r.stderr
    assert r.stdout == "listing games\n"  # the command's stdout is its own


def test_a_harness_that_logs_its_error_to_stdout_has_it_quoted(db_path: Path) -> None:
    """arc-agi-3-benchmarking logs to stdout ("No games available to play") and exits 0: that line is quoted, and
    the command's stdout still reaches ours whole and in order."""
    script = (
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, format='%(asctime)s | %(levelname)s | %(message)s')\n"
        "print('http://127.0.0.1:8001/api/games')\n"
        "logging.getLogger().error('No games available to play. Check API connection.')\n"
        "print('bye')\n"
    )
    r = record(db_path, sys.executable, "-c", script)
    assert r.returncode == 1, r.stderr
    assert r.stderr.rstrip().endswith("| ERROR | No games available to play. Check API connection."), r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "http://127.0.0.1:8001/api/games" and lines[-1] == "bye" and len(lines) == 3


def test_a_command_that_plays_over_http_itself_is_pointed_to_serve(db_path: Path) -> None:
    """A REST client (no arc_agi.Arcade: joinplank's arc-agi-3-benchmarking) opens no card the recorder can see:
    it says which request the command sent and that `ledger serve` captures such a client."""
    script = (
        "import urllib.request\n"
        "try:\n"
        "    urllib.request.urlopen('http://127.0.0.1:9/api/scorecard/open', data=b'{}', timeout=5)\n"
        "except OSError as e:\n"
        "    print('could not open a scorecard:', e)\n"
    )
    r = record(db_path, sys.executable, "-c", script)
    assert r.returncode == 1, r.stderr
    assert (
        "ledger record: the command plays over HTTP itself (POST 127.0.0.1:9/api/scorecard/open), without the "
        "toolkit: a REST client is captured by the server it plays against; point it at `ledger serve`"
    ) in r.stderr, r.stderr
    r = record(db_path, sys.executable, "-c", "import sys; sys.exit('offline')")
    assert "plays over HTTP" not in r.stderr


def test_a_failing_command_keeps_its_status_and_its_last_error_line_is_repeated(db_path: Path) -> None:
    r = record(db_path, sys.executable, "-c", "import sys; sys.stderr.write('agent: bad key\\n'); sys.exit(7)")
    assert r.returncode == 7, r.stderr
    assert "no card captured" in r.stderr and r.stderr.rstrip().endswith("last error line: agent: bad key")


def test_the_error_line_quoted_is_the_error_not_a_warning_printed_after_it(db_path: Path) -> None:
    script = (
        "import atexit, sys, warnings\n"
        "atexit.register(lambda: warnings.warn('pkg_resources is deprecated as an API', FutureWarning))\n"
        "sys.stderr.write('INFO:agents: starting\\n')\n"
        "def main():\n    raise ValueError('game ls20 not in the game list')\n"
        "main()\n"
    )
    r = record(db_path, sys.executable, "-c", script)
    assert r.returncode == 1 and "FutureWarning: pkg_resources is deprecated" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("the command's last error line: ValueError: game ls20 not in the game list")


def test_a_command_killed_by_a_signal_exits_128_plus_n(db_path: Path) -> None:
    r = record(db_path, sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert r.returncode == 128 + signal.SIGKILL and "no card captured" in r.stderr


@pytest.mark.parametrize("option", ["-I", "-E", "-S", "-uI"])
def test_a_python_told_to_ignore_pythonpath_or_site_is_refused_before_the_run(db_path: Path, option: str) -> None:
    r = record(db_path, sys.executable, option, str(HARNESS), "--steps", "5")
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and cards_in(db_path) == []
    assert f"does not load ledger record's hook (with {option} it ignores PYTHONPATH or site)" in r.stderr


def test_a_python_run_by_env_with_a_cleared_environment_is_refused_before_the_run(db_path: Path) -> None:
    r = record(db_path, "env", "-i", "-u", "HOME", sys.executable, str(HARNESS), "--steps", "5")
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and cards_in(db_path) == []
    assert "does not load ledger record's hook (its PYTHONPATH is cleared or ignored)" in r.stderr


@pytest.mark.heavy
def test_interpreter_options_with_values_do_not_hide_the_script(db_path: Path) -> None:
    r = record(db_path, sys.executable, "-W", "ignore", "-X", "dev", str(HARNESS), "--steps", "5")
    assert r.returncode == 0, r.stderr[-3000:]
    printed = r.stdout.strip().splitlines()[-1]
    with Ledger.open(db_path) as led:
        assert led.export(json.loads(printed)["card_id"]) == printed


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        out += [int(p) for p in Path(task).read_text().split()]
    return out


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.heavy
def test_a_signal_to_the_recorder_alone_stops_the_command_and_each_card_is_accounted_for(
    db_path: Path, sig: signal.Signals
) -> None:
    cmd = [*LEDGER, "--db", str(db_path), "record", "--", sys.executable, str(HARNESS), "--hang", "--steps", "20"]
    # A session of its own: nothing but the signal sent below reaches the recorder or the command.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    card_id = proc.stdout.readline().strip()  # the harness is playing on an open card
    (child,) = _children(proc.pid)
    time.sleep(0.5)  # (not a timed assertion: lets the threads reach their slow, endless phase)
    assert os.getpgid(child) == child != os.getpgid(proc.pid)  # the command has a process group of its own
    os.kill(proc.pid, sig)  # the recorder alone
    _, err = proc.communicate(timeout=60)
    # Python's SIGTERM kills (143); SIGINT is the harness's KeyboardInterrupt, whose status is the harness's own.
    assert proc.returncode != 0 and (sig != signal.SIGTERM or proc.returncode == 143), err[-3000:]
    assert f"it ended with status {proc.returncode}" in err
    assert not _group_alive(child)  # the command did not play on, unrecorded
    assert f"passed {sig.name} on to the command" in err
    assert f"card {card_id}   score" in err and "left open" in err
    with Ledger.open(db_path) as led:
        card = led.load_card(card_id)
        assert not card.closed and card.total_actions > 0


# -- a second interpreter (the ``foreign_python`` fixture of tests/conftest.py) --------------------------


def test_the_second_interpreter_really_lacks_the_ledger(foreign_python: str, tmp_path: Path) -> None:
    for module in ("msgspec", "ledger", "sqlalchemy"):  # (run away from the checkout, which holds `ledger/`)
        r = subprocess.run([foreign_python, "-c", f"import {module}"], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr
    assert subprocess.run([foreign_python, "-c", "import arc_agi"]).returncode == 0


@pytest.mark.parametrize("how", ["interpreter", "env", "script"])
def test_a_python_that_cannot_load_the_ledger_is_refused_before_the_run(
    db_path: Path, foreign_python: str, tmp_path: Path, how: str
) -> None:
    if how == "interpreter":
        command = [foreign_python, str(HARNESS), "--steps", "5"]
    elif how == "env":
        command = ["env", "SWARM=1", foreign_python, str(HARNESS), "--steps", "5"]
    else:  # an executable script whose #! line names that Python
        script = tmp_path / "main.py"
        script.write_text(f"#!{foreign_python}\nimport runpy\nrunpy.run_path({str(HARNESS)!r}, run_name='__main__')\n")
        script.chmod(0o755)
        command = [str(script), "--steps", "5"]
    r = record(db_path, *command)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""  # the harness never ran
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert f"interpreter {foreign_python}, Python 3.13" in line and "cannot load the ledger" in line
    assert f"the ledger runs on {sys.executable}, Python {sys.version.split()[0]}" in line
    assert cards_in(db_path) == []


def test_an_arcade_in_a_python_started_by_the_command_is_named_and_never_plays_unrecorded(
    db_path: Path, foreign_python: str
) -> None:
    # A shell between the recorder and the Python: the interpreter cannot be known before the run.
    r = record(db_path, "sh", "-c", f'"{foreign_python}" "{HARNESS}" --steps 5; exit 0')
    assert r.returncode == 1, r.stderr[-3000:]
    assert "an Arcade of process" in r.stderr and f"at {foreign_python}) was NOT recorded" in r.stderr
    assert "msgspec" in r.stderr
    assert "the command's last error line:" in r.stderr
    assert r.stdout == "" and cards_in(db_path) == []  # the Arcade refused to play: no card exists anywhere


SWALLOWING_HARNESS = """
import logging, sys
from datetime import UTC, datetime
from arc_agi import Arcade, OperationMode
from arcengine import GameAction
from ledger import Ledger
from ledger.domain.events import CardRetracted, card_stream

env_dir, db = sys.argv[1], sys.argv[2]
arc = Arcade(operation_mode=OperationMode.OFFLINE, environments_dir=env_dir, logger=logging.getLogger("quiet"))
card_id = arc.open_scorecard()
env = arc.make("cnt3", scorecard_id=card_id)
env.step(GameAction.ACTION1)
with Ledger.open(db) as other:  # another writer goes first on the card's stream: the next step cannot be recorded
    other.append(card_stream(card_id), [CardRetracted(ts=datetime.now(UTC), reason="interference")], None)
try:
    env.step(GameAction.ACTION1)
except Exception as e:  # a harness that plays on whatever happens
    print("harness: swallowed", type(e).__name__, file=sys.stderr)
arc.close_scorecard(card_id)
print(card_id)
"""


def test_a_capture_failure_the_harness_swallows_still_fails_the_run(db_path: Path, tmp_path: Path) -> None:
    script = tmp_path / "swallow.py"
    script.write_text(SWALLOWING_HARNESS)
    env_dir = Path(__file__).resolve().parent / "environment_files"
    r = record(db_path, sys.executable, str(script), str(env_dir), str(db_path))
    assert r.returncode == 1, r.stderr[-3000:]
    card_id = r.stdout.strip().splitlines()[-1]
    assert f"card {card_id}   score" in r.stderr
    assert "the ledger did NOT record everything the command did: 1 capture failure(s)" in r.stderr
    assert "version conflict" in r.stderr
    assert "the command's last error line: harness: swallowed CaptureError" in r.stderr
