"""The help is the way in: `ledger --help` groups the commands by job, one whole line each; `ledger` alone says
where to start; every command's help opens with one line and ends with 2-3 examples, and every example runs
against a demo ledger (beside the docs' inputs: game files, recordings, a harness run, a baselines file); each
command shows only the options it uses, with one metavar per kind of value."""

from __future__ import annotations

import inspect
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest

from ledger.cli import COMMANDS, JOBS, START, SUBCOMMANDS_OPEN, cli
from tests.cli_run import in_process, ledger
from tests.test_docs import BIN, TIMEOUT, _docs_inputs, make_demo_ledger, walk

ALL = list(walk(cli))


def _name(path: tuple[str, ...]) -> str:
    return " ".join(path)


def examples(cmd: click.Command) -> list[str]:
    """The example lines that end ``cmd``'s help (its "Examples:" paragraph), comments kept."""
    text = inspect.cleandoc(cmd.help or "")
    assert "\nExamples:\n" in text, "no Examples paragraph"
    tail = text.rsplit("\nExamples:\n", 1)[1]
    return [line.strip() for line in tail.splitlines() if line.strip() and line.strip() != "\b"]


# -- ledger --help and ledger ------------------------------------------------------------------------------------


def test_help_lists_every_command_under_its_job_with_its_whole_summary() -> None:
    r = ledger("--help")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    sections = [line[:-1] for line in lines if line and not line.startswith(" ") and line.endswith(":")]
    assert sections[: len(JOBS)] == list(JOBS.values()) and "Commands" not in sections
    assert sections.index("Options") == len(JOBS)  # the commands first, as uv lists them
    for name, entry in COMMANDS.items():
        rows = [line for line in lines if line.split()[:1] == [name]]
        assert len(rows) == 1, name
        # The whole summary on the command's own line: never cut, never wrapped.
        assert rows[0].split(None, 1)[1] == entry.summary, rows[0]
        under = max(i for i, line in enumerate(lines[: lines.index(rows[0])]) if line[:-1] in JOBS.values())
        assert lines[under] == f"{JOBS[entry.job]}:", (name, lines[under])
    assert "..." not in r.stdout.split("\n", 1)[1]  # the usage line aside
    assert {e.job for e in COMMANDS.values()} == set(JOBS)


def test_ledger_alone_says_where_to_start() -> None:
    r = ledger()
    assert r.returncode == 0 and r.stdout.strip() == START
    for command in ("ledger demo", "ledger cards", "ledger replay CARD", "ledger --help"):
        assert command in r.stdout


# -- every command's help --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path,cmd", ALL, ids=[_name(p) for p, _ in ALL])
def test_help_opens_with_one_line_and_ends_with_examples(path: tuple[str, ...], cmd: click.Command) -> None:
    r = in_process(*path, "--help")
    assert r.returncode == 0, r.stderr
    first = r.stdout.split("\n\n")[1].strip()
    assert "\n" not in first and first.endswith("."), first
    assert first.rstrip(".") == (cmd.short_help or first.rstrip(".")), first
    shown = examples(cmd)
    assert 2 <= len(shown) <= 3, shown
    assert all(line.startswith("ledger ") for line in shown), shown
    # The examples are the end of the help text, before the options.
    assert r.stdout.index("Examples:") > r.stdout.index(first)
    assert r.stdout.split("Examples:")[1].split("\n\n")[1].strip().startswith("ledger ")


def test_each_summary_is_said_once() -> None:
    # The table holds the first line, the docstring the rest: no command repeats its summary.
    for name, entry in COMMANDS.items():
        cmd = cli.loaded(name)
        assert cmd is not None and cmd.callback is not None
        assert entry.summary not in (inspect.getdoc(cmd.callback) or ""), name


# -- every example runs ------------------------------------------------------------------------------------------

#: What a command's examples need made first, in the folder they run in.
SETUP = {
    "checkpoint": ["ledger keygen team.example/ledger -o team.key"],
    "prove": ["ledger keygen team.example/ledger -o team.key", "ledger checkpoint --key team.key -o checkpoint.txt"],
    "check": [
        "ledger keygen team.example/ledger -o team.key",
        "ledger checkpoint --key team.key -o checkpoint.txt",
        "ledger prove CARD --checkpoint checkpoint.txt -o card.evidence.json",
    ],
    "consistency": [
        "ledger keygen team.example/ledger -o team.key",
        "ledger checkpoint --key team.key -o old.txt",
        "ledger demo --seed 3",
        "ledger checkpoint --key team.key -o new.txt",
    ],
    "witness": [
        "ledger keygen team.example/ledger -o team.key",
        "ledger keygen witness.example/w1 --witness -o w1.key",
        "ledger checkpoint --key team.key -o checkpoint.txt",
    ],
    "compare": ["ledger demo --seed 2"],
}
#: Commands that serve until Ctrl-C: each example must start serving, then stop on SIGINT with exit 130.
SERVERS = {"serve", "view"}


def _open_card(db: Path) -> str:
    from ledger import Ledger
    from ledger.domain.events import CardOpened, card_stream

    card = "0a0a0a0a-0000-4000-8000-000000000001"
    with Ledger.open(db) as led:
        opened = CardOpened(ts=datetime.now(UTC), card_id=card, tags=["left-open"])
        led.store.append(card_stream(card), [opened], expected_version=0)
    return card


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("help-inputs")
    _docs_inputs(folder)
    return folder


def _serve(command: str, folder: Path, env: dict[str, str]) -> tuple[int, str]:
    """Start a server example, wait for its first line, Ctrl-C it: its exit code and what it printed."""
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {command}"], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out = b""
    try:
        sel = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in out and proc.poll() is None and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                out += os.read(key.fileobj.fileno(), 4096)  # type: ignore[union-attr]
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        return proc.wait(timeout=TIMEOUT), out.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("path,cmd", ALL, ids=[_name(p) for p, _ in ALL])
@pytest.mark.heavy
def test_every_example_runs(path: tuple[str, ...], cmd: click.Command, inputs: Path, tmp_path: Path) -> None:
    for item in inputs.iterdir():
        shutil.copytree(item, tmp_path / item.name) if item.is_dir() else shutil.copy2(item, tmp_path / item.name)
    demo = make_demo_ledger(tmp_path)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "LEDGER_DB": str(demo.db)}
    cards = {"CARD": demo.card_id, "CARD1": demo.card_id, "HEAD": demo.head}
    if path == ("close",):
        cards["CARD"] = _open_card(demo.db)

    def run(line: str) -> subprocess.CompletedProcess[str]:
        command = re.sub(r"\b(CARD\d?|HEAD)\b", lambda m: cards[m.group(1)], line)
        return subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT
        )

    for line in SETUP.get(_name(path), []):
        done = run(line)
        assert done.returncode == 0, f"setup `{line}`: {done.stdout}{done.stderr}"
    if path == ("compare",):
        listed = run("ledger cards --tag demo --json").stdout
        cards["CARD2"] = next(c for c in re.findall(r'"card_id": "([^"]+)"', listed) if c != demo.card_id)
    for line in examples(cmd):
        if path[0] in SERVERS and line.split()[1] == path[0]:
            # Any free port: the one an example names may be taken on this machine.
            command = re.sub(r" --port \d+", "", line.split("#")[0]).strip() + " --port 0"
            code, printed = _serve(command, tmp_path, env)
            assert code == 130, f"`{line}` exited {code}: {printed}"
            assert "http://" in printed, printed
            continue
        done = run(line)
        assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stdout}{done.stderr}"


# -- options: only those a command uses, one metavar per kind ----------------------------------------------------


def _opens(path: tuple[str, ...]) -> str:
    return SUBCOMMANDS_OPEN.get(_name(path), COMMANDS[path[0]].opens)


def _leaves() -> list[tuple[tuple[str, ...], click.Command]]:
    return [(p, c) for p, c in ALL if not isinstance(c, click.Group)]


@pytest.mark.parametrize("path,cmd", _leaves(), ids=[_name(p) for p, _ in _leaves()])
def test_db_and_durability_only_where_used(path: tuple[str, ...], cmd: click.Command) -> None:
    shown = in_process(*path, "--help").stdout
    opens = _opens(path)
    assert ("--db PATH|URL" in shown) == bool(opens), (path, opens)
    assert ("--durability" in shown) == (opens == "write"), (path, opens)


def test_an_option_a_command_does_not_use_is_refused(tmp_path: Path) -> None:
    r = in_process("keygen", "x", "-o", str(tmp_path / "x.key"), "--db", "mysql://bad")
    assert r.returncode == 2 and "No such option '--db'" in r.stderr and not (tmp_path / "x.key").exists()
    r = in_process("cards", "--durability", "full")
    assert r.returncode == 2 and "No such option '--durability'" in r.stderr
    # Given before the command, --db still names the ledger of every command that opens one.
    r = in_process("--db", str(tmp_path / "none.sqlite"), "cards")
    assert r.returncode == 1 and "no ledger at" in r.stderr


def test_the_commands_that_open_a_ledger_are_those_said_to() -> None:
    # A command that opens no ledger reads neither ctx.obj["db"] nor open_ledger; every other one does.
    for path, cmd in _leaves():
        source = inspect.getsource(cmd.callback)  # type: ignore[arg-type]
        uses = "open_ledger(" in source or 'ctx.obj["db"]' in source or "read_only(" in source
        assert uses == bool(_opens(path)), path


#: Options that share a name but take another kind of value on purpose: a site is a folder, a key or a checkpoint a
#: file; close's reason is one of two words, retract's any text.
KINDS_APART = {("bundle", "--output"), ("retract", "--reason")}
#: Click's own names for a kind of value, each said otherwise everywhere (DIR, FILE, N, a word for what it is).
CLICK_NAMES = {"DIRECTORY", "PATH", "INTEGER", "INTEGER RANGE", "FLOAT", "TEXT"}


def test_one_metavar_per_kind_of_value() -> None:
    seen: dict[str, dict[str, tuple[str, ...]]] = {}
    for path, cmd in ALL:
        ctx = click.Context(cmd)
        for param in cmd.params:
            if not isinstance(param, click.Option) or param.is_flag or param.hidden:
                continue
            name = max(param.opts, key=len)
            metavar = param.make_metavar(ctx)
            if (path[-1], name) in KINDS_APART:
                continue
            assert metavar not in CLICK_NAMES, (path, name, metavar)
            seen.setdefault(name, {})[metavar] = path
    mixed = {name: kinds for name, kinds in seen.items() if len(kinds) > 1}
    assert mixed == {}, mixed
    assert seen["--output"] == {"FILE": seen["--output"]["FILE"]}
