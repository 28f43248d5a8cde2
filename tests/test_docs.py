"""The documentation cannot go stale (in the style of sqlite-utils' ``tests/test_docs.py``).

- docs/cli.md, the reference of every command and option, is generated from the commands
  (``scripts/cli_reference.py``): it must equal what the generator writes now, and every command and option has
  help text to put there.
- The examples in README.md and docs/*.md run as written. A ```` ```sh ```` block's ``ledger ...`` lines run in bash
  against a ledger the demo filled (``LEDGER_DB``), beside a signing key ``team.key`` and a ``checkpoints`` folder.
  A ```` ```console ```` block's ``$ ...`` lines run the same way, in a folder that also holds ``environment_files``
  (the demo's and the test games), ``recordings`` (a toolkit recording), ``harness`` (agents-harness recordings),
  ``empty`` (a folder without games), ``v2.json`` (the baselines file docs/baselines.md shows) and ``main.py`` (a
  Swarm-like harness, ``tests/swarm_harness.py``, for ``ledger record``), plus what ``PAGE_INPUTS`` makes for its
  page (docs/import.md: toolkit runs in card folders ``runs``, laid flat in ``Downloads``, pasted out of order in
  ``pasted``, and ``live``, a harness run the page's ledger captured live; docs/commands.md:
  ``tampered.sqlite``, the page's ledger with a row rewritten behind the triggers; docs/capture.md: a card
  captured from a server, in the page's ledger and, still open, in ``open.sqlite``). They print the lines that follow
  them (stdout, then stderr), ids, hashes, keys, times and interpreter paths aside (a ``...`` line stands for any
  lines; in docs/ pages every number is also set aside: their transcripts show the output's shape); a transcript
  whose output ends with ``[exit N]`` must exit with N, any other with 0. ``$ COMMAND &`` starts a job (a server) in
  the background and shows the first lines it prints; ``$ kill -INT %1`` stops it as Ctrl-C does (it must exit 130);
  port 8001 in a transcript stands for a free port, ``/opt/py313/bin/python`` for a Python of another version with
  only the toolkit installed (the ``foreign_python`` venv); a transcript that names it, or ``run.sh`` (docs/record.md:
  a shell script that starts main.py on it, made for that transcript), is skipped on a machine without one. The
  transcripts of one page run in order, against one demo ledger. A block of another language (plain
  ```` ``` ````, ``text``) may not hold a ``$ ledger`` transcript unless the line before the block is
  ``<!-- not run: REASON -->``; blocks indented under a list item count as any other.
  ``CARD`` and any card id stand for the demo's card (docs/capture.md: the server card), a 64-hex hash for
  the demo ledger's head. A ```` ```python ```` block runs in a fresh folder and must assert something.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from ledger.cli import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: Every hand-written page; docs/cli.md is generated and checked against its generator instead.
PAGES = {"README.md": README} | {
    f"docs/{p.name}": p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "cli.md"
}
BIN = Path(sys.executable).parent
#: A documented command that does not finish in this time fails (a server runs as a job: `$ COMMAND &`).
TIMEOUT = 120


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command below ``cmd`` (itself excluded), with its path of names."""
    if isinstance(cmd, click.Group):
        # A lazily listed command (ledger.cli.common.LedgerGroup) is imported here, as its module defines it.
        for name in sorted(cmd.list_commands(click.Context(cmd))):
            sub = cmd.loaded(name) if hasattr(cmd, "loaded") else cmd.commands[name]
            assert sub is not None, name
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


def test_cli_reference_is_current() -> None:
    # In a fresh interpreter: running the CLI in this process (other tests do) adds the shared options to commands.
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"{done.stderr}(docs/cli.md is stale: run .venv/bin/python scripts/cli_reference.py)"


def test_cli_reference_names_every_command_and_option() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for path, _ in COMMANDS:
        assert f"## `{_label(path)}`" in text, f"docs/cli.md has no section for `{_label(path)}`"
    for path, _, param in OPTIONS:
        assert f"`{_long_flag(param)}`" in text, f"docs/cli.md does not name {_long_flag(param)} of {_label(path)}"


def test_the_generator_sees_a_stale_page(tmp_path: Path) -> None:
    # The staleness check itself: a page one character off is reported.
    assert _generator().render() != _generator().render().replace("ledger", "ledgr", 1)


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[_label(p) for p, _ in COMMANDS])
def test_command_has_help(path: tuple[str, ...], cmd: click.Command) -> None:
    assert (cmd.help or "").strip(), f"`{_label(path)}` has no help text (its docstring)"


@pytest.mark.parametrize(
    "path,param", [(p, o) for p, _, o in OPTIONS], ids=[f"{_label(p)} {_long_flag(o)}" for p, _, o in OPTIONS]
)
def test_option_has_help(path: tuple[str, ...], param: click.Option) -> None:
    assert (param.help or "").strip(), f"the option {_long_flag(param)} of `{_label(path)}` has no help text"


def test_the_walk_finds_nested_commands() -> None:
    # The walk itself, so that a group's subcommands cannot silently escape the checks above.
    assert ("baselines", "import") in [p for p, _ in COMMANDS]
    assert any(_long_flag(o) == "--db" for p, _, o in OPTIONS if p == ())


def test_the_readme_stays_short_and_points_to_every_page() -> None:
    assert len(README.splitlines()) <= 120, "README.md grew past 120 lines: move the detail to a docs/ page"
    for page in PAGES:
        if page.startswith("docs/"):
            assert f"({page})" in README, f"README.md does not link {page}"


def _anchors(text: str) -> set[str]:
    """The anchors GitHub makes of a page's headings (fenced blocks aside): lower case, punctuation dropped."""
    text = re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_links_reach_their_page_and_heading(page: str) -> None:
    # Pages are merged and renamed; a link to the old name or an old heading would fail only the reader.
    here = (ROOT / page).parent
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", PAGES[page]):
        if re.match(r"[a-z]+:", link):
            continue
        name, _, anchor = link.partition("#")
        target = (here / name).resolve() if name else ROOT / page
        headings = _anchors(target.read_text(encoding="utf-8")) if target.suffix == ".md" and target.exists() else None
        if not target.exists() or (anchor and headings is not None and anchor not in headings):
            broken.append(link)
    assert not broken, f"{page} links to no page or no heading: {', '.join(broken)}"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_no_history_in_the_docs(page: str) -> None:
    # The docs say what the tool does now; what changed lives in CHANGELOG.md.
    found = re.findall(r"\bissue \d+|\(before[:, ]|\bbefore: ", PAGES[page], flags=re.I)
    assert not found, f"{page} tells history ({found}): say what is true now, and put changes in CHANGELOG.md"


# -- the examples ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its page, language and lines, the line it starts on, and the line before it."""

    page: str
    lang: str
    line: int
    lines: list[str]
    before: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(text: str, page: str = "README.md") -> list[Block]:
    """The fenced blocks of ``text``, those indented under a list item included (their lines dedented)."""
    out: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^( *)```(\S*)\s*$", lines[i])
        if m is None:
            i += 1
            continue
        start = i
        indent = m.group(1)
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(f"{indent}```"):
            body.append(lines[i].removeprefix(indent))
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        out.append(Block(page, m.group(2), start + 1, body, before.strip()))
        i += 1
    return out


ALL_BLOCKS = [b for page, text in PAGES.items() for b in blocks(text, page)]


@dataclass(frozen=True)
class DemoLedger:
    """A ledger the demo filled, in its own folder with the inputs the docs name, and what placeholders stand for."""

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


def _docs_inputs(folder: Path) -> None:
    """What the docs' transcripts name: game files, a toolkit recording, harness recordings, a baselines file."""
    from arc_agi import Arcade, OperationMode
    from arcengine import GameAction

    from ledger.capture.demo import DEMO_GAMES
    from tests.harness_recorder import environments, run_swarm

    env_dir = folder / "environment_files"
    shutil.copytree(DEMO_GAMES, env_dir)
    environments(env_dir)
    arc = Arcade(
        operation_mode=OperationMode.OFFLINE, environments_dir=str(env_dir), recordings_dir=str(folder / "recordings")
    )
    card = arc.open_scorecard(tags=["docs"])
    env = arc.make("dm01", scorecard_id=card, save_recording=True)
    for action in [GameAction.ACTION1] * 3 + [GameAction.RESET] + [GameAction.ACTION2] * 4:
        env.step(action)
    arc.close_scorecard(card)
    run_swarm(folder / "harness", ["vis5"], seed=3, env_dir=env_dir, max_actions=20, llm=True)
    (folder / "empty").mkdir()
    # The stand-in for the ARC-AGI-3-Agents' main.py that `ledger record` runs: a Swarm-like harness.
    shutil.copy2(ROOT / "tests" / "swarm_harness.py", folder / "main.py")
    baselines_file = next(b for b in ALL_BLOCKS if b.page == "docs/baselines.md" and b.lang == "json")
    (folder / "v2.json").write_text("\n".join(baselines_file.lines) + "\n", encoding="utf-8")


def make_demo_ledger(folder: Path, *, inputs: bool = False) -> DemoLedger:
    """A ledger holding what ``ledger demo`` plays, in ``folder`` (with the docs' input files if ``inputs``)."""
    from ledger import Ledger
    from ledger.app.verify import verify_ledger
    from ledger.capture.demo import run_demo

    db = folder / "ledger.sqlite"
    with Ledger.open(db) as led:
        card_id = run_demo(led.repository)
        head = verify_ledger(led.store).head
    if inputs:
        _docs_inputs(folder)
    return DemoLedger(folder, db, card_id, head)


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory: pytest.TempPathFactory) -> DemoLedger:
    """One demo ledger for every ```sh line (they may add to it), beside the signing key and the folder
    docs/evidence.md's publishing example uses (``team.key`` and ``checkpoints``, made as that page makes them)."""
    ledger = make_demo_ledger(tmp_path_factory.mktemp("readme"))
    made = ledger.run("ledger keygen team.example/ledger -o team.key && mkdir -p checkpoints")
    assert made.returncode == 0, made.stderr
    return ledger


@pytest.fixture(scope="module")
def docs_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs' input files, made once; each transcript gets a copy beside a fresh demo ledger."""
    folder = tmp_path_factory.mktemp("docs-inputs")
    _docs_inputs(folder)
    return folder


def _import_page_inputs(ledger: DemoLedger) -> None:
    """docs/import.md: two toolkit runs in their card folders (``runs``) and the same files laid flat
    (``Downloads``); a run's file pasted out of order (``pasted/<card>``); a harness run the page's ledger captured
    live (``live``)."""
    import random

    from ledger import Ledger
    from tests.harness_recorder import run_swarm
    from tests.toolkit import arcade, record_runs

    runs = record_runs(ledger.folder / "runs", 3, random.Random(14))
    longest = max(runs, key=lambda r: len(r.lines))
    (ledger.folder / "Downloads").mkdir()
    for run in runs:
        if run is not longest:
            shutil.copy2(ledger.folder / "runs" / run.card / run.name, ledger.folder / "Downloads" / run.name)
    # Line 5 repeats line 4, line 7 goes back in time: two lines no recorder writes.
    lines = longest.lines
    pasted = ledger.folder / "pasted" / longest.card
    pasted.mkdir(parents=True)
    (pasted / longest.name).write_bytes(b"".join([*lines[:4], lines[3], lines[5], lines[4], *lines[6:]]))
    shutil.rmtree(ledger.folder / "runs" / longest.card)
    env_dir = ledger.folder / "environment_files"
    with Ledger.open(ledger.db) as led:
        arc = arcade(env_dir)
        capture = led.attach(arc)
        run_swarm(ledger.folder / "live", ["vis5"], 25, env_dir=env_dir, max_actions=25, arc=arc)
        capture.detach()


def _tampered_ledger(ledger: DemoLedger) -> None:
    """docs/commands.md: ``tampered.sqlite``, a copy of the page's ledger whose demo card's tenth event
    was rewritten behind the triggers (its body an integer), as tests/test_tamper_columns.py rewrites rows."""
    from tests.test_tamper_columns import rewrite_row

    rewrite_row(ledger.db, ledger.folder / "tampered.sqlite", ledger.card_id, "body", 12345, snapshots=False)


def _server_card(ledger: DemoLedger) -> DemoLedger:
    """docs/capture.md: a card captured from a server (the toolkit's REST server on 127.0.0.1, a COMPETITION
    client with no game files, as tests/test_remote_truth.py plays it), in the page's ledger; ``open.sqlite`` is a
    copy taken while it was open. ``CARD`` and any card id stand for that card on this page."""
    from dataclasses import replace

    from arc_agi import OperationMode
    from arcengine import GameAction

    from ledger import Ledger
    from tests.test_audit import copy_ledger
    from tests.test_online_capture import server
    from tests.test_remote_truth import bare_client

    with server() as srv, Ledger.open(ledger.db) as led:
        arc = bare_client(srv.url, OperationMode.COMPETITION, ledger.folder / "no-games")
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        assert env is not None
        for _ in range(3):
            env.step(GameAction.ACTION1)
        copy_ledger(ledger.db, ledger.folder / "open.sqlite")
        arc.close_scorecard(card)
    return replace(ledger, card_id=card)


#: What a page's transcripts need beyond the docs' inputs, made beside its demo ledger (after the demo ran); a
#: function that returns a ledger changes what the page's placeholders stand for.
PAGE_INPUTS: dict[str, Callable[[DemoLedger], DemoLedger | None]] = {
    "docs/import.md": _import_page_inputs,
    "docs/commands.md": _tampered_ledger,
    "docs/capture.md": _server_card,
}


def page_ledger(page: str, folder: Path, inputs: Path) -> DemoLedger:
    """The demo ledger of ``page``, made in ``folder`` with a copy of the docs' inputs beside it and what
    ``PAGE_INPUTS`` makes for the page."""
    for item in inputs.iterdir():
        shutil.copytree(item, folder / item.name) if item.is_dir() else shutil.copy2(item, folder / item.name)
    ledger = make_demo_ledger(folder)
    return PAGE_INPUTS[page](ledger) or ledger if page in PAGE_INPUTS else ledger


SH = [(b, line) for b in ALL_BLOCKS if b.lang in ("sh", "bash") for line in b.lines if line.startswith("ledger ")]
CONSOLE = [b for b in ALL_BLOCKS if b.lang == "console"]
PYTHON = [b for b in ALL_BLOCKS if b.lang == "python"]
NOT_RUN = re.compile(r"^<!-- not run: .+ -->$")


def test_the_docs_have_runnable_examples() -> None:
    assert SH and CONSOLE and PYTHON, "the docs lost their ```sh, ```console or ```python examples (they keep it true)"
    pages_with_console = {b.page for b in CONSOLE}
    for page in (
        "README.md",
        "docs/tutorial.md",
        "docs/import.md",
        "docs/audit.md",
        "docs/baselines.md",
        "docs/capture.md",
        "docs/record.md",
    ):
        assert page in pages_with_console, f"{page} has no ```console transcript that runs"


#: The languages of the blocks that run; a transcript in any other (plain, ``text``) would not.
RUN = ("console", "sh", "bash", "python")


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b.lang not in RUN], ids=lambda b: b.where)
def test_every_transcript_runs(block: Block) -> None:
    # A `$ ledger` transcript in a plain block would never be run, so it could go stale unseen.
    transcript = [line for line in block.lines if line.startswith("$ ledger") or line.startswith("$ .venv/bin/ledger")]
    assert not transcript or NOT_RUN.match(block.before), (
        f"{block.where}: a `$ ledger` transcript in a plain ``` block: make it ```console (it then runs), or put "
        "`<!-- not run: REASON -->` on the line before it"
    )


# A block's lines build on each other (README's checkpoint, then the proof against it), so a block is one test:
# its lines run in order in one process, whichever test process pytest-xdist gives it.
SH_BLOCKS = sorted({b.where: b for b, _ in SH}.values(), key=lambda b: b.where)


@pytest.mark.parametrize("block", SH_BLOCKS, ids=lambda b: b.where)
def test_shell_example_runs(demo_ledger: DemoLedger, block: Block) -> None:
    for line in (c for b, c in SH if b is block):
        done = demo_ledger.run(line)
        assert done.returncode == 0, f"{block.where}: `{line}` exited {done.returncode}:\n{done.stdout}{done.stderr}"


#: What differs from run to run: card ids, hashes, keys and signatures, times, durations, paths, schema revisions.
_VOLATILE = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<id>"),
    (re.compile(r"[0-9a-f]{64}"), "<hash>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"), "<time>"),
    (re.compile(r"\d+(?:\.\d+)? s\b"), "<seconds>"),
    # A rate's unit follows its size (a loaded machine reads the same file in KB/s where a quiet one shows MB/s).
    (re.compile(r"\d+(?:\.\d+)? (?:bytes|KB|MB|GB)/s\b"), "<rate>"),
    (re.compile(r"sqlite:///\S+"), "<db>"),
    (re.compile(r"schema \S+ \(head\)"), "schema <revision> (head)"),
    # An interpreter's path on this machine (the reader's is elsewhere).
    (re.compile(r"/[^\s()]*/python[\d.]*\b"), "<python>"),
    # Keys and signatures (a signed-note verifier key's key hash, base64 keys, hashes and signatures).
    (re.compile(r"\+[0-9a-f]{8}\+"), "+<keyhash>+"),
    (re.compile(r"[A-Za-z0-9+/]{40,}={0,2}"), "<base64>"),
]
#: In docs/ pages only: every number (a transcript there shows the shape of the output, not its figures).
_NUMBER = (re.compile(r"[0-9a-f]{12}|\d+(?:[.,]\d+)*"), "N")


def normalize(line: str, *, shape: bool = False) -> str:
    for pattern, stand_in in _VOLATILE:
        line = pattern.sub(stand_in, line)
    if shape:
        line = _NUMBER[0].sub(_NUMBER[1], line)
        line = re.sub(r" +", " ", line)
    return line.rstrip()


def matches(expected: list[str], actual: list[str], *, shape: bool = False) -> bool:
    """``actual`` equals ``expected`` line by line, volatile parts aside; a ``...`` line matches any lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[i:], shape=shape) for i in range(len(actual) + 1))
    return (
        bool(actual)
        and normalize(expected[0], shape=shape) == normalize(actual[0], shape=shape)
        and matches(expected[1:], actual[1:], shape=shape)
    )


def _sessions(block: Block) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for line in block.lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


#: The port a transcript's server listens on; the test gives it a free one instead.
DOCS_PORT = "8001"
#: A Python of another version than the ledger's; the test uses the one the machine has (``foreign_python``).
OTHER_PYTHON = "/opt/py313/bin/python"
#: The files a transcript runs that start OTHER_PYTHON, written with the machine's when a transcript names them:
#: docs/record.md's ``run.sh``, a shell script that starts the page's main.py on it.
OTHER_PYTHON_INPUTS = {"run.sh": f"{OTHER_PYTHON} main.py\n"}


def names_other_python(command: str) -> bool:
    """Whether a transcript's command starts OTHER_PYTHON, itself or through one of OTHER_PYTHON_INPUTS."""
    return OTHER_PYTHON in command or any(re.search(rf"\b{re.escape(n)}\b", command) for n in OTHER_PYTHON_INPUTS)


def other_python_for(block: Block, request: pytest.FixtureRequest) -> str:
    """The machine's Python of another version (the ``foreign_python`` venv); ``block`` skips without one."""
    from tests.second_python import other_python

    if other_python() is None:
        pytest.skip(f"{block.where}: no second Python (3.13) on this machine")
    python: str = request.getfixturevalue("foreign_python")
    return python


@dataclass
class Job:
    """A transcript's ``$ COMMAND &``: a process of its own, its output (stdout and stderr) in a file."""

    proc: subprocess.Popen[bytes]
    log: Path

    def lines(self, folder: Path) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").replace(str(folder), ".").splitlines()


def start_job(ledger: DemoLedger, command: str, expected: list[str], port: int | None) -> Job:
    """Start ``command`` in the background; return once it printed the lines ``expected`` shows (and, when the
    block names a port, once that port accepts connections), or once it ended."""
    import socket
    import time

    log = ledger.folder / f"job-{len(list(ledger.folder.glob('job-*.log')))}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", "exec " + ledger.substitute(command)],
            cwd=ledger.folder,
            env=ledger.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    job = Job(proc, log)
    wanted = len([line for line in expected if line.strip() != "..."])
    deadline = time.monotonic() + TIMEOUT
    while proc.poll() is None and time.monotonic() < deadline:
        if len(job.lines(ledger.folder)) >= wanted:
            if port is None:
                break
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
        time.sleep(0.05)
    return job


# A page's transcripts build on each other (a key made in one is used in the next), so a page is one test: its
# transcripts run in the page's order in one process, whichever test process pytest-xdist gives it.
CONSOLE_PAGES = sorted({b.page for b in CONSOLE})
#: Pages whose transcripts need the second Python's venv (built once, a minute): the heavy tier's.
OTHER_PYTHON_PAGES = {b.page for b in CONSOLE if any(names_other_python(c) for c, _ in _sessions(b))}


@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=pytest.mark.heavy) if p in OTHER_PYTHON_PAGES else p for p in CONSOLE_PAGES]
)
def test_console_examples_print_what_the_docs_show(
    docs_inputs: Path, tmp_path: Path, page: str, request: pytest.FixtureRequest
) -> None:
    ledger = page_ledger(page, tmp_path, docs_inputs)
    for block in CONSOLE:
        if block.page == page:
            _console_example(ledger, block, request)


def _console_example(ledger: DemoLedger, block: Block, request: pytest.FixtureRequest) -> None:
    """Run one transcript's commands on its page's ledger; each prints what the page shows and exits as it says."""
    from tests.rest_agent import free_port

    shape = block.page != "README.md"
    port = free_port() if any(re.search(rf"\b{DOCS_PORT}\b", c) for c, _ in _sessions(block)) else None
    job: Job | None = None
    try:
        for command, expected in _sessions(block):
            if port is not None:
                command = re.sub(rf"\b{DOCS_PORT}\b", str(port), command)
            if names_other_python(command):
                python = other_python_for(block, request)
                command = command.replace(OTHER_PYTHON, python)
                for name, text in OTHER_PYTHON_INPUTS.items():
                    (ledger.folder / name).write_text(text.replace(OTHER_PYTHON, python), encoding="utf-8")
            if command.endswith(" &"):
                assert job is None, f"{block.where}: one job per transcript"
                job = start_job(ledger, command[:-2], expected, port)
                actual = job.lines(ledger.folder)
                assert job.proc.poll() is None, f"{block.where}: `{command}` ended:\n" + "\n".join(actual)
                assert matches(expected, actual, shape=shape), (
                    f"{block.where}: `{command}` prints\n" + "\n".join(actual) + "\nbut the page shows\n"
                    + "\n".join(expected)
                )  # fmt: skip
                continue
            if command == "kill -INT %1":
                assert job is not None and not expected, f"{block.where}: `kill -INT %1` stops the job started above"
                job.proc.send_signal(signal.SIGINT)
                ended = job.proc.wait(timeout=TIMEOUT)
                assert ended == 128 + signal.SIGINT, (
                    f"{block.where}: the job did not stop as Ctrl-C stops it (exit {ended}):\n"
                    + "\n".join(job.lines(ledger.folder))
                )
                continue
            done = ledger.run(command)
            # The page's folder is wherever the test runs: shown as "." (where the reader runs the commands).
            actual = (done.stdout + done.stderr).replace(str(ledger.folder), ".").splitlines()
            # A transcript of a failure ends with "[exit N]": the status it must exit with (else 0).
            status = re.fullmatch(r"\[exit (\d+)\]", expected[-1].strip()) if expected else None
            if status:
                expected = expected[:-1]
            want = int(status.group(1)) if status else 0
            assert done.returncode == want, f"{block.where}: `{command}` exited {done.returncode}:\n" + "\n".join(
                actual
            )
            assert matches(expected, actual, shape=shape), (
                f"{block.where}: `{command}` prints\n" + "\n".join(actual) + "\nbut the page shows\n"
                + "\n".join(expected)
            )  # fmt: skip
        assert job is None or job.proc.poll() is not None, f"{block.where}: a job left running: end with `kill -INT %1`"
    finally:
        if job is not None and job.proc.poll() is None:
            os.killpg(job.proc.pid, signal.SIGKILL)
            job.proc.wait()


def test_matches_sees_a_difference() -> None:
    assert matches(["OK: 26 events", "...", "head <x>"], ["OK: 26 events", "a", "b", "head <x>"])
    assert not matches(["OK: 26 events"], ["OK: 25 events"])
    assert matches(["card 0a0b0c0d-0000-4000-8000-000000000000"], ["card 771f80a0-91c7-4879-a003-9d6eed0f1b0d"])
    # The shape of an output: its numbers aside, but not its words or its lines.
    assert matches(["imported 2 files, 456 lines"], ["imported 1 files, 9 lines"], shape=True)
    assert not matches(["imported 2 files, 456 lines"], ["imported 1 files, 9 lines"])
    assert not matches(["imported 2 files"], ["refused 2 files"], shape=True)
    # An interpreter's path is the machine's, not the output's.
    assert matches(
        ["interpreter python (/home/me/.venv/bin/python), Python"], ["interpreter python (/w/v/bin/python3.12), Python"]
    )
    assert not matches(["interpreter python (/home/me/.venv/bin/python)"], ["interpreter ruby (/usr/bin/ruby)"])


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.where)
def test_python_example_runs(tmp_path: Path, block: Block) -> None:
    assert any(line.lstrip().startswith("assert ") for line in block.lines), (
        f"{block.where}: a Python example must assert what it shows (an example that checks nothing can go stale)"
    )
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(block.lines)],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "LEDGER_DB"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, f"{block.where}: the Python example fails:\n{done.stdout}{done.stderr}"


def test_json_examples_parse() -> None:
    for block in (b for b in ALL_BLOCKS if b.lang == "json"):
        json.loads("\n".join(block.lines))


def test_the_architecture_page_names_every_folder() -> None:
    """docs/architecture.md: one line per folder of the package (the demo games' own folders aside)."""
    tree = next((b for b in blocks(PAGES["docs/architecture.md"]) if b.lang == ""), None)
    assert tree is not None, "docs/architecture.md has no package tree"
    named = {line.split()[0] for line in tree.lines if line.strip()}
    package = ROOT / "ledger"
    folders = [
        d
        for d in sorted(package.rglob("*"))
        if d.is_dir() and d.name != "__pycache__" and "demo_games" not in d.relative_to(package).parts[:-1]
    ]
    missing = [str(d.relative_to(ROOT)) for d in folders if f"{d.name}/" not in named]
    assert not missing, f"docs/architecture.md's tree has no line for: {', '.join(missing)}"


def test_the_architecture_page_names_real_functions() -> None:
    """Every dotted ``ledger.`` name in docs/architecture.md's flow imports and resolves to an attribute."""
    import importlib

    text = PAGES["docs/architecture.md"]
    flow = text[text.index("## One action") :]
    names = sorted(set(re.findall(r"\bledger(?:\.\w+)+", flow)))
    assert len(names) >= 10, names
    for name in names:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ModuleNotFoundError:
                continue
            for attr in parts[cut:]:
                assert hasattr(obj, attr), f"docs/architecture.md names {name}, but {attr} is not there"
                obj = getattr(obj, attr)
            break
        else:
            raise AssertionError(f"docs/architecture.md names {name}, which does not import")
