"""Read commands never write, bad databases get one clear line, `init` repairs the append-only triggers.

Every case runs the `ledger` command line (through Click's runner) on real SQLite files and on the real PostgreSQL
server; the lazy imports are checked in a process of their own, by what it has imported, never by timing.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from ledger import Ledger
from ledger.app.listing import CardFilter, list_cards
from ledger.cli import common
from ledger.errors import StoreError
from ledger.store.base import APPEND_ONLY_TRIGGERS, Durability, known_revisions
from ledger.store.migrating import alembic_config
from tests.cli_run import in_process

ROOT = Path(__file__).resolve().parent.parent
LEDGER_CLI = [sys.executable, "-c", "from ledger.cli import main; main()"]
READ_COMMANDS = [
    ["cards"],
    ["cards", "--json"],
    ["export", "CARD"],
    ["replay", "CARD"],
    ["verify"],
    ["audit", "CARD"],
    ["events", "CARD"],
    ["baselines", "list"],
    ["rescore", "--all", "--baselines", "x"],
]


def ledger_cli(db: str | Path, *args: str) -> tuple[int, str, str]:
    r = in_process("--db", str(db), *args)
    return r.returncode, r.stdout, r.stderr


def one_line(result: tuple[int, str, str], code: int, says: str) -> None:
    got, out, err = result
    assert got == code, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and says in lines[0], err


def demo_ledger(db: str | Path) -> str:
    code, out, err = ledger_cli(db, "demo")
    assert code == 0, err
    found = re.search(r"export (\S+) --indent 2", out)
    assert found is not None, out
    return found.group(1)


# -- SQLite: missing, foreign, read-only, newer -----------------------------------------------------------------


def test_a_read_command_on_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "typo.sqlite"
    for args in READ_COMMANDS:
        one_line(ledger_cli(db, *args), 1, f"no ledger at {db} (create one with `ledger init`)")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(StoreError, match="no ledger at"):
        Ledger.open(db, readonly=True)
    assert list(tmp_path.iterdir()) == []


def _other_programs_db(tmp_path: Path) -> Path:
    """A SQLite file another program made: one table of its own, one row."""
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    con.close()
    return db


def test_a_database_that_is_not_a_ledger_is_refused_untouched(tmp_path: Path) -> None:
    db = _other_programs_db(tmp_path)
    os.chmod(db, 0o640)
    before = (db.read_bytes(), os.stat(db).st_mode)
    for args in READ_COMMANDS:
        one_line(ledger_cli(db, *args), 1, "is not a ledger")
    assert (db.read_bytes(), os.stat(db).st_mode) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]  # no -wal, no -shm
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # not switched to WAL
    con.close()
    garbage = tmp_path / "notes.txt"
    garbage.write_bytes(b"not a database at all, but long enough to have a header" * 4)
    before_text = garbage.read_bytes()
    one_line(ledger_cli(garbage, "cards"), 1, "is not a ledger")
    assert garbage.read_bytes() == before_text


def _killed_mid_transaction(tmp_path: Path, name: str) -> Path:
    """The file and hot rollback journal a writer leaves when it is killed in its first transaction (a new ledger's
    first connection writes in rollback mode until it has switched the file to WAL)."""
    live = tmp_path / "live.db"
    con = sqlite3.connect(live, isolation_level=None)
    con.execute("CREATE TABLE t (x)")
    con.execute("PRAGMA cache_size=1")  # the change spills to the file: the journal is hot
    con.execute("BEGIN")
    con.execute("CREATE TABLE events (x)")
    con.execute(
        "INSERT INTO t SELECT randomblob(4000) FROM (SELECT 1 UNION ALL SELECT 2) a, (SELECT 1 UNION ALL SELECT 2) b"
    )
    con.execute("INSERT INTO t SELECT randomblob(4000) FROM t, t AS u")
    crashed = tmp_path / name
    shutil.copy(live, crashed)
    shutil.copy(f"{live}-journal", f"{crashed}-journal")
    con.execute("ROLLBACK")
    con.close()
    return crashed


def test_a_file_a_killed_writer_left_mid_transaction_is_rolled_back_then_judged(tmp_path: Path) -> None:
    # Read-only, the hot journal cannot be rolled back ("attempt to write a readonly database"): the writer's check
    # rolls it back as SQLite's own recovery does, then judges what the file holds. Here, another program's table.
    crashed = _killed_mid_transaction(tmp_path, "crashed.db")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        sqlite3.connect(f"file:{crashed}?mode=ro", uri=True).execute("SELECT 1 FROM sqlite_master").fetchone()
    with pytest.raises(
        StoreError, match=re.escape("is not a ledger (no events table or schema revision); nothing was")
    ):
        Ledger.open(crashed)
    assert not Path(f"{crashed}-journal").exists()
    con = sqlite3.connect(crashed)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["t"]  # the committed state
    con.close()


def test_init_refuses_a_database_that_holds_tables_it_did_not_make_untouched(tmp_path: Path) -> None:
    db = _other_programs_db(tmp_path)
    before = db.read_bytes()
    one_line(ledger_cli(db, "init"), 1, f"{db} is not a ledger (no events table or schema revision)")
    with pytest.raises(StoreError, match="is not a ledger"):
        Ledger.open(db)
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]  # no -wal, no -shm
    con = sqlite3.connect(db)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["t"]
    con.close()
    garbage = tmp_path / "notes.txt"
    garbage.write_bytes(b"not a database at all, but long enough to have a header" * 4)
    one_line(ledger_cli(garbage, "init"), 1, "is not a ledger")
    assert garbage.read_bytes() == b"not a database at all, but long enough to have a header" * 4
    # An empty file, a new path and a ledger are what init is for.
    (tmp_path / "empty.sqlite").write_bytes(b"")
    for ok in (tmp_path / "empty.sqlite", tmp_path / "new.sqlite", tmp_path / "new.sqlite"):
        code, out, err = ledger_cli(ok, "init")
        assert code == 0 and "ledger ready at" in out, err


def test_read_commands_never_write_a_ledger(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    card = demo_ledger(db)
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    stamp = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir() if p.is_file()}
    for args in READ_COMMANDS[:-1]:
        code, _, err = ledger_cli(db, *[card if a == "CARD" else a for a in args])
        assert code == 0, (args, err)
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir() if p.is_file()}
    # The database file is untouched; a WAL reader may open an empty -wal and its -shm index, nothing in them.
    assert after["ledger.sqlite"] == stamp["ledger.sqlite"]
    assert after.get("ledger.sqlite-wal", (b"", 0))[0] == b""
    with Ledger.open(db, readonly=True) as led, pytest.raises(StoreError, match="readonly"):
        led.store.append_encoded("card:x", [("card_opened", "2026-01-01T00:00:00+00:00", b"{}")], expected_version=0)


def test_a_ledger_the_user_may_only_read_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "shelf"
    folder.mkdir()
    db = folder / "ledger.sqlite"
    card = demo_ledger(db)
    with Ledger.open(db) as led:
        expected = led.export(card)
    os.chmod(db, 0o444)
    os.chmod(folder, 0o555)
    try:
        code, out, err = ledger_cli(db, "export", card)
        assert (code, out, err) == (0, expected + "\n", "")
        assert ledger_cli(db, "verify")[0] == 0
        assert json.loads(ledger_cli(db, "cards", "--json")[1])[0]["card_id"] == card
    finally:
        os.chmod(folder, 0o755)
        os.chmod(db, 0o644)


def test_an_older_schema_is_read_as_it_is_and_migrated_only_by_a_writer(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    db.write_bytes((ROOT / "tests" / "fixtures" / "first_schema.sqlite").read_bytes())
    exports = json.loads((ROOT / "tests" / "fixtures" / "first_schema.exports.json").read_text())
    card, toolkit_json = next(iter(exports.items()))
    code, out, _ = ledger_cli(db, "export", card)
    assert (code, out) == (0, toolkit_json + "\n")
    assert sqlite3.connect(db).execute("SELECT version_num FROM alembic_version").fetchone() == ("0001",)
    code, out, _ = ledger_cli(db, "init")
    assert code == 0 and f"(schema {known_revisions()[-1]})" in out
    assert ledger_cli(db, "export", card)[1] == toolkit_json + "\n"


def test_a_newer_schema_is_refused_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    card = demo_ledger(db)
    con = sqlite3.connect(db)
    con.execute("UPDATE alembic_version SET version_num = '9999'")
    con.commit()
    con.close()
    for args in (["cards"], ["export", card], ["verify"], ["init"], ["demo"]):
        one_line(ledger_cli(db, *args), 1, "schema revision '9999', newer than this version")
    assert sqlite3.connect(db).execute("SELECT version_num FROM alembic_version").fetchone() == ("9999",)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql+psycopg://postgres:pw@127.0.0.1:notaport/test", "is not a valid database URL"),
        ("sqlite:///:memory:", "in-memory database, which cannot hold a ledger"),
        ("sqlite://", "in-memory database, which cannot hold a ledger"),
        ("postgresql+psycopg://", "names no database"),
        ("mysql://u@h/db", "unsupported database 'mysql'"),
    ],
)
def test_urls_that_cannot_name_a_ledger_exit_2(url: str, says: str) -> None:
    for args in (["cards"], ["init"]):
        result = ledger_cli(url, *args)
        one_line(result, 2, says)
        assert "pw@" not in result[2]


def test_postgresql_urls_are_read_and_shown_as_sqlalchemy_reads_and_shows_them() -> None:
    from sqlalchemy.engine import make_url

    from ledger.store.postgres import parse_url

    for url in (
        "postgresql+psycopg://postgres@127.0.0.1:5432/test",
        "postgresql://u%40x:p%2Fw@db.example:6543/led%20ger?sslmode=require&application_name=a+b",
        "postgres://u:pw@[::1]/ledger",
        "postgresql+psycopg:///ledger?host=/var/run/postgresql",
    ):
        u, want = parse_url(url), make_url(url)
        assert (u.username, u.password, u.host, u.port, u.database) == (
            want.username,
            want.password,
            want.host,
            want.port,
            want.database,
        ), url
        assert u.render() == want.set(drivername="postgresql+psycopg").render_as_string(hide_password=True), url
        assert dict(u.query) == dict(want.query), url


# -- `ledger init` repairs the append-only triggers ---------------------------------------------------------------


def _drop_trigger(url: str, backend: str) -> None:
    engine = create_engine(url if "://" in url else f"sqlite:///{url}", poolclass=NullPool)
    with engine.begin() as conn:
        if backend == "sqlite":
            conn.execute(text("DROP TRIGGER events_no_delete"))
        else:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_no_delete"))
            conn.execute(text("DROP TRIGGER events_no_truncate ON events"))
    engine.dispose()


def test_init_repairs_a_missing_trigger(backend_url: str, backend: str) -> None:
    assert ledger_cli(backend_url, "init")[0] == 0
    _drop_trigger(backend_url, backend)
    code, out, _ = ledger_cli(backend_url, "verify")
    assert code == 1 and "append-only trigger missing: events_no_delete" in out
    code, out, _ = ledger_cli(backend_url, "init")
    assert code == 0
    repaired = ["events_no_delete"] + (["events_no_truncate"] if backend == "postgresql" else [])
    assert [line.split()[3] for line in out.splitlines() if line.startswith("repaired")] == repaired
    assert "ledger ready at" in out.splitlines()[-1]
    with Ledger.open(backend_url, readonly=True) as led:
        assert led.store.missing_triggers() == []
        assert led.store.triggers() == set(APPEND_ONLY_TRIGGERS[backend])
    code, out, _ = ledger_cli(backend_url, "init")
    assert code == 0 and "repaired" not in out
    assert ledger_cli(backend_url, "verify")[0] == 0


# -- PostgreSQL: read-only transactions, refusals ------------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_read_commands_never_create_the_schema(pg_url: str) -> None:
    for args in (["cards"], ["verify"], ["baselines", "list"]):
        one_line(ledger_cli(pg_url, *args), 1, "no ledger at")
    engine = create_engine(pg_url, poolclass=NullPool)
    with engine.connect() as conn:
        tables = conn.execute(text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")).scalar_one()
        assert tables == 0
        conn.execute(text("CREATE TABLE unrelated (x int)"))
        conn.commit()
    one_line(ledger_cli(pg_url, "cards"), 1, "is not a ledger")
    one_line(ledger_cli(pg_url, "init"), 1, "is not a ledger")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")).scalar_one() == 1
    engine.dispose()


@pytest.mark.postgres
def test_postgres_readonly_store_runs_read_only_transactions(pg_url: str) -> None:
    card = demo_ledger(pg_url)
    with Ledger.open(pg_url, readonly=True) as led:
        assert led.card_ids() == [card]
        with pytest.raises(StoreError, match="read-only transaction"):
            led.store.append_encoded(
                "card:x", [("card_opened", "2026-01-01T00:00:00+00:00", b"{}")], expected_version=0
            )
        with led.store.engine.connect() as conn:  # type: ignore[attr-defined]
            assert conn.execute(text("SHOW transaction_read_only")).scalar_one() == "on"
    code, out, _ = ledger_cli(pg_url, "export", card)
    assert code == 0 and json.loads(out)["card_id"] == card


# -- startup: no SQLAlchemy or Alembic for a read command on SQLite ------------------------------------------------


def _modules_after(db: str | Path, *args: str) -> set[str]:
    code = (
        "import sys; from ledger.cli import main\n"
        f"sys.argv = ['ledger', '--db', {str(db)!r}, *{list(args)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    return set(r.stderr.strip().splitlines()[-1].split())


def test_read_commands_on_sqlite_load_neither_sqlalchemy_nor_alembic(tmp_path: Path) -> None:
    db = tmp_path / "ledger.sqlite"
    card = demo_ledger(db)
    for args in (["--help"], ["--version"], ["cards"], ["export", card], ["replay", card], ["verify"]):
        loaded = _modules_after(db, *args)
        assert "click" in loaded
        heavy = ("sqlalchemy", "alembic", "arc_agi", "arcengine", "flask", "cryptography")
        assert not {m for m in loaded if m.split(".")[0] in heavy}, args
        if args[0] in ("cards", "export"):
            # Only the running command's module (ledger.cli is a lazy group), not the audit's checks.
            others = {f"ledger.cli.{m}" for m in ("audit", "baselines", "copy", "evidence", "importing", "view")}
            assert not loaded & (others | {"ledger.rules.audit_checks"}), args
    assert "ledger.ledger" not in _modules_after(db, "--help")


def test_the_viewer_starts_without_the_toolkit(tmp_path: Path) -> None:
    # `ledger view` serves what a ledger holds: the toolkit (arc_agi loads matplotlib, about a second) is not loaded.
    loaded = _modules_after(tmp_path / "missing.sqlite", "view")
    assert "ledger.web.server" in loaded
    assert not {m for m in loaded if m.split(".")[0] in ("arc_agi", "arcengine", "matplotlib")}


WRITE_THEN_READ = """
import sys
from datetime import UTC, datetime
from ledger import Ledger
from ledger.domain.events import CardOpened, card_stream
from ledger.app.listing import CardFilter, list_cards

with Ledger.open(sys.argv[1]) as led:  # at head: opened for writing, no migration
    t = datetime(2026, 1, 1, tzinfo=UTC)
    led.store.append(card_stream("written"), [CardOpened(ts=t, card_id="written", tags=["w"])], expected_version=0)
    assert [e.version for e in led.store.read_stream(card_stream("written"))] == [1]
    assert "written" in [c.card_id for c in list_cards(led, CardFilter())]  # the summary caught up by the read
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.postgres
def test_read_commands_and_a_write_on_postgresql_load_neither_sqlalchemy_nor_alembic(pg_url: str) -> None:
    card = demo_ledger(pg_url)  # creates the schema: the migrations load them
    heavy = ("sqlalchemy", "alembic")
    for args in (["cards"], ["export", card], ["verify"]):
        loaded = _modules_after(pg_url, *args)
        assert "psycopg" in loaded, args
        assert not {m for m in loaded if m.split(".")[0] in heavy}, args
    r = subprocess.run([sys.executable, "-c", WRITE_THEN_READ, pg_url], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert not {m for m in r.stdout.split() if m.split(".")[0] in heavy}
    with Ledger.open(pg_url, readonly=True) as led:
        assert [c.card_id for c in list_cards(led, CardFilter()) if "w" in (c.tags or [])] == ["written"]


def test_the_lazy_group_lists_each_command_with_its_own_help() -> None:
    from ledger.cli import COMMANDS, cli

    for name, entry in COMMANDS.items():
        cmd = cli.loaded(name)
        assert cmd is not None and cmd.name == name, name
        paragraphs = inspect.cleandoc(cmd.help or "").split("\n\n")
        # The summary is said once, in the table: the docstring is the rest of the help.
        assert paragraphs[0] == f"{entry.summary}." and paragraphs[1] != paragraphs[0], name
        assert entry.summary not in inspect.getdoc(cmd.callback), name
    assert cli.commands.keys() == COMMANDS.keys()


def test_version() -> None:
    from ledger import __version__

    r = subprocess.run([*LEDGER_CLI, "--version"], capture_output=True, text=True, cwd=ROOT)
    assert (r.returncode, r.stdout) == (0, f"ledger {__version__}\n")


def test_constants_spelled_for_fast_startup_agree_with_their_sources() -> None:
    from ledger.app.listing import SORT_KEYS
    from ledger.rules.rescoring import MATCHES

    assert common.MATCHES == MATCHES
    assert common.SORT_KEYS == SORT_KEYS
    assert get_args(Durability) == common.DURABILITIES
    script = ScriptDirectory.from_config(alembic_config())
    assert known_revisions() == tuple(r.revision for r in reversed(list(script.walk_revisions())))
