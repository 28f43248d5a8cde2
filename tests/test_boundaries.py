"""The hostile-input sweep: every command, over every mistake and hostile input a new user makes (and a few
more), run as a user runs it (the installed `ledger`, in a child process, on real files). No output may contain
"Traceback", and every exit code is 0, 1 or 2 (130 is Ctrl-C, tested in test_interrupt_and_extras.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.domain.events import card_stream
from tests.cli_run import REPO, append_open_card, import_copies, ledger

ENV_DIR = REPO / "tests" / "environment_files"


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every kind of --db the sweep uses, and files to feed commands."""
    root = tmp_path_factory.mktemp("boundaries")
    good = str(root / "good.sqlite")
    import_copies(good, root / "rec", ["run-a1", "run-a2", "run-b"])
    append_open_card(good, "left-open", datetime.now(UTC) - timedelta(hours=5), tags=["t"])
    with Ledger.open(good) as led:
        card_head = led.store.read_stream(card_stream("run-b"))[-1].hash
    newer = root / "newer.sqlite"
    newer.write_bytes(Path(good).read_bytes())
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    unrelated = root / "unrelated.sqlite"
    with sqlite3.connect(unrelated) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    garbage = root / "garbage.sqlite"
    garbage.write_bytes(b"\x00\xffnot a database\n" * 100)
    (root / "folder.sqlite").mkdir()
    bad_json = root / "bad.json"
    bad_json.write_text('{"entries": [{"game_id": 3}]')
    bad_rec = root / "badrec" / "card-x"
    bad_rec.mkdir(parents=True)
    (bad_rec / "zz01-00000001-g.jsonl").write_bytes(b"\xff\xfe{not json\n" + b"[]\n")
    return {
        "root": str(root),
        "good": good,
        "card_head": card_head,
        "newer": str(newer),
        "unrelated": str(unrelated),
        "garbage": str(garbage),
        "folder": str(root / "folder.sqlite"),
        "missing": str(root / "typo.sqlite"),
        "bad_json": str(bad_json),
        "bad_rec": str(bad_rec.parent),
    }


BAD_IDS = ["", "%", "_", "run-", "run-a", "zzz", "x" * 5000, "\u202eevil", "run-b\n", "-", "'; DROP TABLE events; --"]


def _cases(p: dict[str, str]) -> list[list[str]]:
    good, root = p["good"], p["root"]
    db = ["--db", good]
    cases: list[list[str]] = [["--version"], ["--help"], ["nosuchcommand"], ["--db"]]
    commands = ["init", "cards", "events", "close", "export", "replay", "verify", "demo", "import", "baselines",
                "rescore", "audit", "copy", "view", "bundle", "compare", "record", "serve"]  # fmt: skip
    cases += [[c, "--help"] for c in commands]
    cases += [[c, "--no-such-option"] for c in commands]
    for ref in BAD_IDS:
        for c in ("events", "export", "replay", "audit", "close"):
            cases.append([*db, c, ref])
        cases.append([*db, "rescore", ref, "--baselines", "nope"])
    for until in ("0", "-1", "999999", "99999999999999999999999", "1.5", "x"):
        cases += [[*db, "export", "run-b", "--until", until], [*db, "replay", "run-b", "--until", until]]
    for out in (root, f"{root}/no/such/dir/x.json", "/proc/ledger.json", "/proc/version", "/sys/x.json", ""):
        cases.append([*db, "export", "run-b", "-o", out])
    for head in ("", "abc", "z" * 64, p["card_head"], "0" * 64):
        cases += [[*db, "verify", "--expect-head", head], [*db, "audit", "run-b", "--expect-head", head]]
    cases += [
        [*db, "cards", "--since", "yesterday"],
        [*db, "cards", "--since", "9999999d"],
        [*db, "cards", "--limit", "0"],
        [*db, "cards", "--limit", "-3"],
        [*db, "cards", "--sort", "nope"],
        [*db, "cards", "--tag", ""],
        [*db, "cards", "--game", "%"],
        [*db, "cards", "--open", "--json"],
        [*db, "cards", "--closed"],
        [*db, "events", "left", "--json"],
        [*db, "replay", "left-open"],
        ["cards", "--db", good, "--durability", "fsync"],
        [*db, "audit", "run-b", "--environments", f"{root}/nowhere"],
        [*db, "audit", "run-b", "--environments", p["bad_json"]],
        [*db, "audit", "run-b", "--environments", root],
        [*db, "export", "run-b", "--baselines", "nope"],
        [*db, "export", "run-b", "--indent", "99"],
        [*db, "replay", "run-b", "--baselines", "cafe", "--match", "base"],
        [*db, "baselines", "import", p["bad_json"]],
        [*db, "baselines", "import", f"{root}/nowhere.json"],
        [*db, "baselines", "import", str(ENV_DIR), "--label", "cafe"],
        [*db, "baselines", "import", str(ENV_DIR), "--label", "bad label with spaces"],
        [*db, "baselines", "show", "nope"],
        [*db, "baselines", "diff", "a", "b"],
        [*db, "rescore"],
        [*db, "rescore", "--all", "--baselines", "nope"],
        [*db, "import", f"{root}/nowhere"],
        [*db, "import", p["bad_rec"]],
        [*db, "import", p["bad_rec"], "--strict", "--json"],
        [*db, "copy", "--to", good],
        [*db, "copy", "--to", p["folder"]],
        [*db, "demo", "--seed", "x"],
        [*db, "close", "run-b"],
        [*db, "compare"],
        [*db, "bundle", "-o", "/proc/x"],
    ]
    # Databases that are not a usable ledger, under every read command (the storage side of item 1 and item 2).
    for where in (p["newer"], p["unrelated"], p["garbage"], p["folder"], p["missing"], "sqlite:///:memory:",
                  "postgresql+psycopg://postgres@127.0.0.1:notaport/test", "nosuchdriver://x/y"):  # fmt: skip
        for c in (["cards"], ["events", "run-b"], ["export", "run-b"], ["replay", "run-b"], ["verify"],
                  ["audit", "run-b"], ["baselines", "list"], ["close", "run-b"], ["cards", "--db", where]):  # fmt: skip
            cases.append(["--db", where, *c])
    return cases


#: Runs many command lines in one child process, each exactly as ``ledger ARGS`` would (Click's standalone main:
#: its error handling, exit codes and output), so the whole matrix takes seconds, not minutes. An exception that
#: escapes is printed the way the interpreter prints it, "Traceback" and all.
_BATCH = """
import contextlib, io, json, sys, traceback
from ledger.cli import cli
out = []
for args in json.load(sys.stdin):
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            cli.main(args, prog_name="ledger")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    out.append([args, code, stdout.getvalue() + stderr.getvalue()])
json.dump(out, sys.__stdout__)
"""


def _failures(results: list[tuple[list[str], int, str]]) -> str:
    bad = [(a, c, o[-1500:]) for a, c, o in results if "Traceback" in o or c not in (0, 1, 2)]
    return "\n\n".join(f"{a}: exit {c}\n{o}" for a, c, o in bad)


def _check_untouched(places: dict[str, str]) -> None:
    # Nothing hostile wrote into the ledger: it still verifies, with its four cards.
    r = ledger("--db", places["good"], "verify")
    assert r.returncode == 0, r.stdout
    with Ledger.open(places["good"], readonly=True) as led:
        assert sorted(led.card_ids()) == ["left-open", "run-a1", "run-a2", "run-b"]
    with sqlite3.connect(places["unrelated"]) as conn:  # an unrelated database is left as it was
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]
    assert not Path(places["missing"]).exists()


def test_every_command_over_hostile_input_prints_no_traceback(places: dict[str, str]) -> None:
    cases = _cases(places)
    r = subprocess.run(
        [sys.executable, "-c", _BATCH],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    results = [(a, c, o) for a, c, o in json.loads(r.stdout)]
    assert len(results) == len(cases)
    assert not _failures(results), _failures(results)
    _check_untouched(places)


#: The issue's own repros, each as its own `ledger` process (as the user typed them).
def _issue_cases(p: dict[str, str]) -> list[list[str]]:
    good, root = p["good"], p["root"]
    return [
        ["--db", p["newer"], "cards"],
        ["--db", good, "export", "run-b", "-o", root],
        ["--db", good, "export", "run-b", "-o", "/proc/ledger.json"],
        ["--db", "postgresql+psycopg://postgres@127.0.0.1:notaport/test", "cards"],
        ["--db", "sqlite:///:memory:", "cards"],
        ["--db", p["missing"], "cards"],
        ["--db", p["unrelated"], "cards"],
        ["--db", good, "audit", "run-b", "--expect-head", p["card_head"]],
        ["--db", good, "replay", "run-b", "--until", "100"],
        ["--db", good, "replay", "run-b", "--until", "999999"],
        ["--db", good, "baselines", "import", str(ENV_DIR), "--label", "1626a58f"],
        ["--db", good, "export", "run-"],
        ["--db", good, "cards"],
        ["--db", good, "close", "left", "--reason", "nonsense"],
        ["cards", "--db", good],
        ["--version"],
    ]


def test_the_issues_repros_print_no_traceback(places: dict[str, str]) -> None:
    cases = _issue_cases(places)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda a: (a, ledger(*a)), cases))
    assert not _failures([(a, r.returncode, r.stdout + r.stderr) for a, r in results])
    _check_untouched(places)


def _output_and_server_cases(p: dict[str, str], busy: int) -> list[list[str]]:
    """bundle's outputs, view/serve on a busy or impossible address, record's mistakes, retract's bad input."""
    good, root = p["good"], p["root"]
    db = ["--db", good]
    cases: list[list[str]] = []
    for out in ("/proc/foo", "/proc/self/x/y", "/sys/x", f"{p['bad_json']}/site", f"{root}/no/such/dir", root, ""):
        cases += [[*db, "bundle", "run-b", "-o", out], [*db, "bundle", "--all", "-o", out]]
    cases += [[*db, "bundle", ref, "-o", f"{root}/b"] for ref in BAD_IDS]
    cases += [[*db, "compare", ref, "run-b"] for ref in BAD_IDS]
    for c in (["view"], ["serve", "--environments", str(ENV_DIR)]):
        cases += [
            [*db, *c, "--port", str(busy)],
            [*db, *c, "--host", "256.0.0.1", "--port", "0"],
            [*db, *c, "--port", "-1"],
            [*db, *c, "--port", "70000"],
            [*db, *c, "--host", "", "--port", str(busy)],
        ]
    cases += [
        [*db, "record"],
        [*db, "record", "--", "/no/such/program"],
        [*db, "record", "--", p["bad_json"]],
        [*db, "retract", "run-b"],
        [*db, "retract", "run-b", "--reason", ""],
        [*db, "retract", "left-open", "--reason", "x"],
        *[[*db, "retract", ref, "--reason", "x"] for ref in BAD_IDS],
        ["--db", p["garbage"], "retract", "run-b", "--reason", "x"],
        ["--db", p["folder"], "retract", "run-b", "--reason", "x"],
        ["--db", p["missing"], "bundle", "--all", "-o", f"{root}/m"],
        ["--db", p["folder"], "view", "--port", str(busy)],
    ]
    return cases


@pytest.mark.heavy
def test_bundle_view_serve_record_and_retract_print_no_traceback(places: dict[str, str]) -> None:
    import socket

    with socket.socket() as taken:  # a port another program holds: view and serve must say so and stop
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        cases = _output_and_server_cases(places, taken.getsockname()[1])
        r = subprocess.run(
            [sys.executable, "-c", _BATCH],
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "COLUMNS": "200"},
        )
    assert r.returncode == 0, r.stderr[-3000:]
    results = [(a, c, o) for a, c, o in json.loads(r.stdout)]
    assert len(results) == len(cases)
    assert not _failures(results), _failures(results)
    for args, code, out in results:
        if "bundle" in args and code != 0:
            assert out.startswith("Error: ") and len(out.strip().splitlines()) == 1, (args, out)
    # A busy port: the same one line and exit code from both servers.
    busy = [(c, o) for a, c, o in results if "--port" in a and a[a.index("--port") + 1] not in ("0", "-1", "70000")]
    busy = [(c, o) for (c, o) in busy if "Address already in use" in o]
    assert len(busy) == 4 and {c for c, _ in busy} == {2}, busy
    assert all(o.startswith("Error: cannot serve on ") and o.count("\n") == 1 for _, o in busy), busy
    _check_untouched(places)
