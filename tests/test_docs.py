"""The README cannot go stale (in the style of sqlite-utils' ``tests/test_docs.py``).

- Every command of the ``ledger`` group, walked recursively, and every option of it has help text and is named in
  README.md: a command as ``ledger NAME`` (a subcommand also as ``ledger GROUP ...`name` ...`` on one line), an
  option on a line that names its command or in a section whose heading names it.
- The README's examples run as written. A ```` ```sh ```` block's ``ledger ...`` lines run in bash against a ledger
  the demo filled (``LEDGER_DB``); a ```` ```console ```` block's ``$ ledger ...`` lines run the same way and print
  the lines that follow them, ids, hashes and times aside (a ``...`` line stands for any lines). In both, ``CARD``
  and any card id stand for the demo's card, and a 64-hex hash for the demo ledger's head. A ```` ```python ````
  block runs in a fresh folder (the example plays a bundled game, OFFLINE).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from ledger.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
#: A README command that does not finish in this time fails (a server example belongs in a plain ``` block).
TIMEOUT = 120


def walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command below ``cmd`` (itself excluded), with its path of names."""
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield (*path, name), sub
            yield from walk(sub, (*path, name))


COMMANDS = list(walk(cli))
OPTIONS = [
    (path, cmd, param)
    for path, cmd in [((), cli), *COMMANDS]
    for param in cmd.params
    if isinstance(param, click.Option) and not param.hidden
]


def _label(path: tuple[str, ...]) -> str:
    return " ".join(("ledger", *path))


def _long_flag(param: click.Option) -> str:
    return max((*param.opts, *param.secondary_opts), key=len)


def _names(path: tuple[str, ...]) -> re.Pattern[str]:
    """``ledger export`` also matches ``ledger export/replay``; ``ledger baselines list`` also a line holding
    ``ledger baselines`` and `` `list` ``."""
    *parent, name = path
    if not parent:
        return re.compile(rf"\bledger (?:[\w-]+/)*{re.escape(name)}(?![\w-])")
    group = re.escape(" ".join(parent))
    return re.compile(
        rf"\bledger {group} (?:[\w-]+/)*{re.escape(name)}(?![\w-])|\bledger {group}\b.*`{re.escape(name)}(?![\w-])"
    )


def _documentation(path: tuple[str, ...]) -> str:
    """The README text about a command: each line naming it, and each section whose heading names it."""
    if not path:
        return README
    pattern = _names(path)
    lines = [line for line in README.splitlines() if pattern.search(line)]
    for section in re.split(r"^(?=## )", README, flags=re.M):
        heading = section.split("\n", 1)[0]
        if pattern.search(heading):
            lines.append(section)
    return "\n".join(lines)


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[_label(p) for p, _ in COMMANDS])
def test_command_is_in_the_readme(path: tuple[str, ...]) -> None:
    assert _names(path).search(README), f"README.md does not mention the command `{_label(path)}`"


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[_label(p) for p, _ in COMMANDS])
def test_command_has_help(path: tuple[str, ...], cmd: click.Command) -> None:
    assert (cmd.help or "").strip(), f"`{_label(path)}` has no help text (its docstring)"


@pytest.mark.parametrize(
    "path,param", [(p, o) for p, _, o in OPTIONS], ids=[f"{_label(p)} {_long_flag(o)}" for p, _, o in OPTIONS]
)
def test_option_is_in_the_readme(path: tuple[str, ...], param: click.Option) -> None:
    # Any of its spellings will do (the README may write `-o FILE` for --output).
    flags = [*param.opts, *param.secondary_opts]
    text = _documentation(path)
    assert any(re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", text) for f in flags), (
        f"README.md does not mention the option {_long_flag(param)} of `{_label(path)}` (on a line naming the "
        "command, or in a section whose heading names it)"
    )


@pytest.mark.parametrize(
    "path,param", [(p, o) for p, _, o in OPTIONS], ids=[f"{_label(p)} {_long_flag(o)}" for p, _, o in OPTIONS]
)
def test_option_has_help(path: tuple[str, ...], param: click.Option) -> None:
    assert (param.help or "").strip(), f"the option {_long_flag(param)} of `{_label(path)}` has no help text"


def test_the_walk_finds_nested_commands() -> None:
    # The walk itself, so that a group's subcommands cannot silently escape the checks above.
    assert ("baselines", "import") in [p for p, _ in COMMANDS]
    assert any(_long_flag(o) == "--db" for p, _, o in OPTIONS if p == ())
    # A command's documentation is the part of the README about it, not the whole README.
    assert "--expect-head" in _documentation(("verify",)) and "--seed" not in _documentation(("verify",))


# -- the examples ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One fenced block of the README: its language and lines, and the line it starts on."""

    lang: str
    line: int
    lines: list[str]


def blocks(text: str = README) -> list[Block]:
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if m is None:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        out.append(Block(m.group(1), start + 1, body))
        i += 1
    return out


@dataclass(frozen=True)
class DemoLedger:
    """A ledger the demo filled, in its own folder, and what the README's placeholders stand for."""

    folder: Path
    db: Path
    card_id: str
    head: str

    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "LEDGER_DB": str(self.db)}

    def substitute(self, command: str) -> str:
        command = re.sub(r"\bCARD\b", self.card_id, command)
        command = re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", self.card_id, command)
        command = re.sub(r"\b[0-9a-f]{64}\b", self.head, command)
        # `.venv/bin/ledger` as the README says after `make demo`: the ledger of this environment.
        return re.sub(r"(?<![\w/])\.venv/bin/ledger\b", "ledger", command)

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", self.substitute(command)],
            cwd=self.folder,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )


def make_demo_ledger(folder: Path) -> DemoLedger:
    """A ledger holding what ``ledger demo`` plays, in ``folder``."""
    from ledger import Ledger
    from ledger.services.verify import verify_ledger
    from ledger.toolkit.demo import run_demo

    db = folder / "ledger.sqlite"
    with Ledger.open(db) as led:
        card_id = run_demo(led)
        head = verify_ledger(led.store).head
    return DemoLedger(folder, db, card_id, head)


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory: pytest.TempPathFactory) -> DemoLedger:
    """One demo ledger for every ```sh line (they may add to it)."""
    return make_demo_ledger(tmp_path_factory.mktemp("readme"))


@pytest.fixture
def fresh_demo_ledger(tmp_path: Path) -> DemoLedger:
    """A demo ledger of its own for each ```console block: its output counts the events."""
    return make_demo_ledger(tmp_path)


SH = [(b, line) for b in blocks() if b.lang in ("sh", "bash") for line in b.lines if line.startswith("ledger ")]
CONSOLE = [b for b in blocks() if b.lang == "console"]
PYTHON = [b for b in blocks() if b.lang == "python"]


def test_the_readme_has_runnable_examples() -> None:
    assert SH and CONSOLE and PYTHON, "README.md lost its ```sh, ```console or ```python examples (they keep it true)"


@pytest.mark.parametrize("block,line", SH, ids=[f"README.md:{b.line} {c}" for b, c in SH])
def test_shell_example_runs(demo_ledger: DemoLedger, block: Block, line: str) -> None:
    done = demo_ledger.run(line)
    assert done.returncode == 0, (
        f"README.md:{block.line}: `{line}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
    )


#: What differs from run to run: card ids, hashes (whole or cut short), times, durations.
_VOLATILE = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<id>"),
    (re.compile(r"[0-9a-f]{64}"), "<hash>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"), "<time>"),
    (re.compile(r"\d+(?:\.\d+)? s\b"), "<seconds>"),
    (re.compile(r"sqlite:///\S+"), "<db>"),
]


def normalize(line: str) -> str:
    for pattern, stand_in in _VOLATILE:
        line = pattern.sub(stand_in, line)
    return line.rstrip()


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` equals ``expected`` line by line, volatile parts aside; a ``...`` line matches any lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and normalize(expected[0]) == normalize(actual[0]) and matches(expected[1:], actual[1:])


def _sessions(block: Block) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


@pytest.mark.parametrize("block", CONSOLE, ids=[f"README.md:{b.line}" for b in CONSOLE])
def test_console_example_prints_what_the_readme_shows(fresh_demo_ledger: DemoLedger, block: Block) -> None:
    for command, expected in _sessions(block):
        done = fresh_demo_ledger.run(command)
        actual = (done.stdout + done.stderr).splitlines()
        assert done.returncode == 0, f"README.md:{block.line}: `{command}` exited {done.returncode}:\n" + "\n".join(
            actual
        )
        assert matches(expected, actual), (
            f"README.md:{block.line}: `{command}` prints\n" + "\n".join(actual) + "\nbut the README shows\n"
            "" + "\n".join(expected)
        )


def test_matches_sees_a_difference() -> None:
    assert matches(["OK: 26 events", "...", "head <x>"], ["OK: 26 events", "a", "b", "head <x>"])
    assert not matches(["OK: 26 events"], ["OK: 25 events"])
    assert matches(["card 0a0b0c0d-0000-4000-8000-000000000000"], ["card 771f80a0-91c7-4879-a003-9d6eed0f1b0d"])


@pytest.mark.parametrize("block", PYTHON, ids=[f"README.md:{b.line}" for b in PYTHON])
def test_python_example_runs(tmp_path: Path, block: Block) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(block.lines)],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "LEDGER_DB"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"README.md:{block.line}: the Python example fails:\n{done.stdout}{done.stderr}"


def test_the_layout_section_names_every_folder() -> None:
    """The README's "Layout" tree has one line per folder of the package (the demo games' own folders aside)."""
    section = re.split(r"^(?=## )", README, flags=re.M)
    layout = next((s for s in section if s.startswith("## Layout")), "")
    tree = next((b for b in blocks(layout) if b.lang == ""), None)
    assert tree is not None, 'README.md has no "## Layout" section with the package tree'
    named = {line.split()[0] for line in tree.lines if line.strip()}
    package = ROOT / "ledger"
    folders = [
        d
        for d in sorted(package.rglob("*"))
        if d.is_dir() and d.name != "__pycache__" and "demo_games" not in d.relative_to(package).parts[:-1]
    ]
    missing = [str(d.relative_to(ROOT)) for d in folders if f"{d.name}/" not in named]
    assert not missing, f'the README\'s "Layout" tree has no line for: {", ".join(missing)}'
