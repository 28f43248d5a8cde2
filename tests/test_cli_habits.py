"""The CLI habits a demanding user expects, each through the `ledger` command line on real files (in this process
through Click's runner; in a child process where the process itself matters: its PATH and folder, a FIFO, a
server's address, shell completion): heads (4), events and --until VERSION (5), labels that look like ids (6), card
id prefixes (7), `ledger cards` (8), cards left open (9), the smaller items (12) and the demo's hints (13)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.domain.events import card_stream
from tests.cli_run import REPO, append_open_card, import_copies, no_traceback
from tests.cli_run import in_process as ledger
from tests.cli_run import ledger as ledger_process

ENV_DIR = REPO / "tests" / "environment_files"


@pytest.fixture
def three(tmp_path: Path) -> str:
    """Imported cards run-b (opened 3 h ago), run-a1 (2 h ago), run-a2 (1 h ago), imported in name order."""
    db = str(tmp_path / "l.sqlite")
    import_copies(db, tmp_path / "rec", ["run-a1", "run-a2", "run-b"], shift_hours=[2, 1, 3])
    return db


# -- 4. heads --------------------------------------------------------------------------------------------------


def _verify_head(db: str) -> str:
    r = ledger("--db", db, "verify", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["head"]


def test_verify_expect_head_and_both_heads_named(three: str, tmp_path: Path) -> None:
    db = three
    head = _verify_head(db)
    r = ledger("--db", db, "verify", "--expect-head", head.upper())
    assert r.returncode == 0, r.stdout
    lines = r.stdout.splitlines()
    assert lines[1].startswith(f"ledger head {head}  (all streams;")
    assert (
        lines[2]
        == f"PASS expected head: the ledger's head is still {head}: no event was added, removed or changed since"
    )
    # audit given that ledger head: no alarm, it says what the hash is
    r = ledger("--db", db, "audit", "run-b", "--expect-head", head)
    assert r.returncode == 0, r.stdout
    assert "card head" in r.stdout.splitlines()[0] and "`ledger verify` prints the ledger's head" in r.stdout
    assert f"the expected head {head} is the ledger's head (as `ledger verify` prints it), not this card's" in r.stdout
    # verify given a card head: named as such, exit 2
    with Ledger.open(db) as led:
        card_head = led.store.read_stream(card_stream("run-b"))[-1].hash
    r = ledger("--db", db, "verify", "--expect-head", card_head)
    assert r.returncode == 2
    assert f"NOTE expected head: {card_head} is the head of card run-b" in r.stdout
    assert "`ledger audit run-b --expect-head HASH`" in r.stdout
    # the ledger moves on: the kept head no longer matches, verify fails and says why
    append_open_card(db, "later", datetime.now(UTC))
    r = ledger("--db", db, "verify", "--expect-head", head)
    assert r.returncode == 1
    assert f"FAIL expected head: the ledger's head is now {_verify_head(db)}, not the expected {head}" in r.stdout
    r = ledger("--db", db, "verify", "--expect-head", head, "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["expected_head"]["status"] == "FAIL"
    # an old ledger head given to audit: still a FAIL (it cannot tell), with the hint where it may come from
    r = ledger("--db", db, "audit", "run-b", "--expect-head", head)
    assert r.returncode == 1 and "if that hash came from `ledger verify`, it is a ledger head" in r.stdout
    r = ledger("--db", db, "verify", "--expect-head", "nothex")
    assert r.returncode == 2 and "64 hexadecimal characters" in r.stderr


# -- 5. events and --until VERSION ---------------------------------------------------------------------------------


def test_events_lists_versions_and_until_takes_them(three: str) -> None:
    db = three
    r = ledger("--db", db, "events", "run-b")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.match(r"^version +seq +type +time +what$", lines[0])
    assert "card_opened" in lines[1] and "card run-b opened" in lines[1]
    assert "card_closed" in lines[-1] and "card closed (end_of_import)" in lines[-1]
    r = ledger("--db", db, "events", "run-b", "--json")
    doc = json.loads(r.stdout)
    rows = doc["events"]
    assert [e["version"] for e in rows] == list(range(1, len(rows) + 1))
    assert set(rows[0]) == {"version", "seq", "type", "ts", "summary", "hash", "event"}
    assert rows[0]["seq"] > 1  # run-b was imported after two other cards: its seqs are not its versions
    with Ledger.open(db) as led:
        for v in (2, 5, len(rows)):
            want = led.export("run-b", until=rows[v - 1]["seq"])
            r = ledger("--db", db, "export", "run-b", "--until", str(v))
            assert r.returncode == 0 and r.stdout == want + "\n"
    r = ledger("--db", db, "replay", "run-b", "--until", "3", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["events"] == 3
    for bad in ("0", str(len(rows) + 1), "999999", "-1", "x"):
        for cmd in ("export", "replay"):
            r = ledger("--db", db, cmd, "run-b", "--until", bad)
            no_traceback(r)
            assert r.returncode == 2, (cmd, bad, r.stdout)
    r = ledger("--db", db, "export", "run-b", "--until", "999999")
    assert f"card run-b has versions 1..{len(rows)}" in r.stderr


# -- 6. labels that look like ids --------------------------------------------------------------------------------


def test_labels_that_look_like_ids_are_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    first = ledger("--db", db, "baselines", "import", str(ENV_DIR), "--json")
    set_id = json.loads(first.stdout)["set_id"]
    for label in (set_id[:8], "cafe", "DEADBEEF", set_id):
        r = ledger("--db", db, "baselines", "import", str(ENV_DIR), "--label", label)
        no_traceback(r)
        assert r.returncode == 2 and "looks like a baseline set id" in r.stderr, label
    r = ledger("--db", db, "baselines", "list", "--json")
    assert json.loads(r.stdout)[0]["labels"] == []  # nothing written
    r = ledger("--db", db, "baselines", "import", str(ENV_DIR), "--label", "v2026")
    assert r.returncode == 0
    r = ledger("--db", db, "baselines", "show", set_id[:8], "--json")
    assert json.loads(r.stdout)["set_id"] == set_id


def test_a_zero_baseline_is_warned_and_one_game_is_singular(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    f = tmp_path / "b.json"
    f.write_text(json.dumps([{"game_id": "zz01-00000001", "baseline_actions": [3, 0]}]))
    r = ledger("--db", db, "baselines", "import", str(f))
    assert r.returncode == 0
    assert "zz01-00000001 has a baseline of 0 for level(s) 2" in r.stderr
    assert "  1 game  (new set)" in r.stdout


# -- 7. card id prefixes -------------------------------------------------------------------------------------------


def test_a_unique_prefix_works_everywhere_an_ambiguous_one_lists_the_cards(three: str) -> None:
    db = three
    full = ledger("--db", db, "export", "run-b").stdout
    assert ledger("--db", db, "export", "run-b").stdout == full
    assert ledger("--db", db, "export", "run-b"[:5]).stdout == full
    for cmd in (["export"], ["replay"], ["events"], ["audit"], ["rescore", "--baselines", "x"], ["close"]):
        r = ledger("--db", db, *cmd[:1], "run-a", *cmd[1:])
        no_traceback(r)
        assert r.returncode == 2, (cmd, r.stderr)
        assert r.stderr.strip() == "Error: 'run-a' is ambiguous: 2 cards start with it: run-a1, run-a2", cmd
    for cmd in ("replay", "events", "audit"):
        r = ledger("--db", db, cmd, "run-a2")
        assert r.returncode == 0 and "run-a2" in r.stdout
        r = ledger("--db", db, cmd, "run-b")
        assert r.returncode == 0 and "run-b" in r.stdout
    r = ledger("--db", db, "export", "zzz")
    assert r.returncode == 1 and r.stderr.strip() == "Error: no card 'zzz' in this ledger (see `ledger cards`)"
    for odd in ("%", "_", "run_a1", "run%"):
        r = ledger("--db", db, "export", odd)  # LIKE wildcards are plain characters
        no_traceback(r)
        assert r.returncode == 1, odd


# -- 8. ledger cards ----------------------------------------------------------------------------------------------


def test_cards_in_opening_order_aligned_with_tags_and_filters(three: str) -> None:
    db = three
    append_open_card(db, "live-1", datetime.now(UTC) - timedelta(minutes=2), tags=["sweep", "gpu"])
    r = ledger("--db", db, "cards")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["card", "opened", "closed", "games", "actions", "score", "tags"]
    ids = [line.split()[0] for line in lines[1:]]
    assert ids == ["run-b", "run-a1", "run-a2", "live-1"]  # opening order, not import order
    head = lines[0]
    for col in ("opened", "closed", "tags"):  # left-aligned: every cell starts under its heading
        at = head.index(col)
        assert all(line[at - 2 : at] == "  " and line[at] != " " for line in lines[1:]), (col, lines)
    for col in ("games", "actions", "score"):  # right-aligned: every cell ends under its heading's end
        end = head.index(col) + len(col)
        assert all(line[end - 1] != " " and line[end : end + 2] == "  " for line in lines[1:]), (col, lines)
    assert lines[4].split()[-1] == "sweep,gpu" and lines[1].split()[-1] == "-"
    js = json.loads(ledger("--db", db, "cards", "--json").stdout)
    assert [c["card_id"] for c in js] == ids and js[3]["tags"] == ["sweep", "gpu"] and js[0]["tags"] is None

    def only(*args: str) -> list[str]:
        out = ledger("--db", db, "cards", "--json", *args)
        assert out.returncode == 0, out.stderr
        return [c["card_id"] for c in json.loads(out.stdout)]

    assert only("--tag", "gpu") == ["live-1"]
    assert only("--tag", "gpu", "--tag", "nope") == ["live-1"]  # any of them, as every repeated --tag
    both = only("--tag", "sweep", "--tag", "gpu")
    assert set(both) == {*only("--tag", "sweep"), *only("--tag", "gpu")} and len(both) == len(set(both))
    assert only("--open") == ["live-1"] and only("--closed") == ids[:3]
    assert only("--game", "cnt3") == ids[:3] and only("--game", "cnt3-0000000a") == ids[:3]
    assert only("--since", "150m") == ["run-a1", "run-a2", "live-1"]
    since = (datetime.now(UTC) - timedelta(minutes=90)).isoformat()
    assert only("--since", since) == ["run-a2", "live-1"]
    assert only("--limit", "2") == ["run-b", "run-a1"]
    assert only("--sort", "opened", "--reverse", "--limit", "1") == ["live-1"]
    assert only("--sort", "id") == sorted(ids)
    assert only("--sort", "actions")[-1] == "live-1"  # 3 actions, the fewest: largest first
    for bad in (["--since", "yesterday"], ["--limit", "0"], ["--sort", "colour"]):
        r = ledger("--db", db, "cards", *bad)
        no_traceback(r)
        assert r.returncode == 2, bad
    assert ledger("--db", db, "cards", "--tag", "nope").stdout == "no cards match\n"


# -- 9. cards left open ----------------------------------------------------------------------------------------------


def test_a_card_left_open_is_shown_closed_and_can_be_closed(tmp_path: Path) -> None:
    db = str(tmp_path / "l.sqlite")
    opened = datetime.now(UTC) - timedelta(hours=2)
    append_open_card(db, "killed-agent", opened, actions=3)
    idle_at = opened + timedelta(minutes=3 + 15)  # last action 3 min after opening, then STALE_MINUTES=15
    r = ledger("--db", db, "cards")
    assert f"{idle_at.isoformat()[:19]} idle*" in r.stdout
    assert "* no close event: closed as the toolkit would have" in r.stdout
    js = json.loads(ledger("--db", db, "cards", "--json").stdout)[0]
    assert js["closed"] == idle_at.isoformat() and js["close_reason"] == "idle" and js["lapsed"] is True
    assert ledger("--db", db, "cards", "--json", "--closed").stdout != "[]\n"
    # STALE_MINUTES as the toolkit reads it (clamped to 1..60)
    js = json.loads(ledger("--db", db, "cards", "--json", env={"STALE_MINUTES": "60"}).stdout)[0]
    assert js["closed"] == (opened + timedelta(minutes=63)).isoformat()
    js = json.loads(
        ledger("--db", db, "cards", "--json", env={"STALE_MINUTES": "60", "MAX_OPEN_FOR_MINUTES": "60"}).stdout
    )[0]
    assert js["close_reason"] == "max_open" and js["closed"] == (opened + timedelta(minutes=60)).isoformat()
    r = ledger("--db", db, "replay", "killed-agent")
    assert f"closed {idle_at.isoformat()} (idle)" in r.stdout
    r = ledger("--db", db, "events", "killed-agent")
    assert f"the toolkit would have closed the card at {idle_at.isoformat()} (idle)" in r.stdout
    # a fresh open card stays open
    append_open_card(db, "running", datetime.now(UTC) - timedelta(minutes=1), actions=1)
    assert json.loads(ledger("--db", db, "cards", "--json", "--open").stdout)[0]["card_id"] == "running"
    # ledger close appends the close event
    r = ledger("--db", db, "close", "kill", "--reason", "abandoned")
    assert r.returncode == 0 and r.stdout.startswith("closed card killed-agent (abandoned) after 5 events")
    js = json.loads(ledger("--db", db, "cards", "--json").stdout)[0]
    assert js["close_reason"] == "abandoned" and js["lapsed"] is False
    r = ledger("--db", db, "close", "killed-agent")
    assert r.returncode == 2 and "already closed (abandoned); nothing written" in r.stderr
    r = ledger("--db", db, "audit", "killed-agent")
    assert r.returncode == 0 and "PASS consistency" in r.stdout
    assert ledger("--db", db, "verify").returncode == 0
    assert ledger("--db", db, "close", "nosuch").returncode == 1


def test_the_event_listing_is_read_and_written_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ledger events` holds a page of a card's events at a time (a long session's card has hundreds of thousands):
    with pages of 2 events its table and its JSON are byte for byte those of one page, the JSON indented as every
    `--json` is and the table's columns as wide as the card's widest value (a type in a later page); an open card
    left idle still says when the toolkit would have closed it."""
    from ledger.app import card_rows
    from tests.test_audit import play_disputed_card, run

    db = str(tmp_path / "l.sqlite")
    with Ledger.open(db) as led:
        disputed, _ = play_disputed_card(led)
    append_open_card(db, "killed-agent", datetime.now(UTC) - timedelta(hours=2), actions=7)
    for card in (disputed, "killed-agent"):
        whole = [run("--db", db, "events", card, *js)[1] for js in ((), ("--json",))]
        monkeypatch.setattr(card_rows, "PAGE", 2)
        assert [run("--db", db, "events", card, *js)[1] for js in ((), ("--json",))] == whole
        monkeypatch.setattr(card_rows, "PAGE", 5_000)
        doc = json.loads(whole[1])
        assert whole[1] == json.dumps(doc, indent=2) + "\n"
        assert [e["version"] for e in doc["events"]] == list(range(1, len(doc["events"]) + 1))
        # The time column starts at one offset on every line, the widest type's included.
        starts = {
            m.start(1) for line in whole[0].splitlines()[1:] if (m := re.match(r"\s*\d+\s+\d+\s+\S+\s+(\d{4}-)", line))
        }
        assert len(starts) == 1, starts
    assert doc["lapsed"]["reason"] == "idle" and "the toolkit would have closed the card at" in whole[0]
    assert any(
        e["type"] == "level_completed" for e in json.loads(run("--db", db, "events", disputed, "--json")[1])["events"]
    )


# -- 12. smaller items ----------------------------------------------------------------------------------------------


def test_common_options_after_the_command_and_version(three: str, tmp_path: Path) -> None:
    db = three
    before = ledger("--db", db, "cards").stdout
    assert ledger("cards", "--db", db).stdout == before
    # --durability only where the command writes; --db only where it opens a ledger.
    assert ledger("cards", "--db", db, "--durability", "full").returncode == 2
    assert ledger("rebuild-summary", "--db", db, "--durability", "full").returncode == 0
    assert ledger("keygen", "k", "-o", str(tmp_path / "k"), "--db", "mysql://bad").returncode == 2
    assert ledger("baselines", "list", "--db", db).returncode == 0
    r = ledger("--db", str(tmp_path / "other.sqlite"), "cards", "--db", db)  # the one after the command wins
    assert r.stdout == before
    r = ledger("--version")
    assert r.returncode == 0 and re.search(r"\d+\.\d+\.\d+", r.stdout)


def test_replay_without_baselines_says_the_score_once(three: str) -> None:
    r = ledger("--db", three, "replay", "run-b")
    assert r.returncode == 0
    assert "score score" not in r.stdout and "    game score 0.00" in r.stdout


def test_card_ids_complete_from_the_ledger(three: str, tmp_path: Path) -> None:
    env = {"_LEDGER_COMPLETE": "bash_complete", "COMP_WORDS": f"ledger --db {three} export run-a", "COMP_CWORD": "4"}
    r = ledger_process(env=env)
    assert r.returncode == 0
    assert r.stdout.split() == ["plain,run-a1", "plain,run-a2"]
    missing = tmp_path / "none.sqlite"
    env["COMP_WORDS"] = f"ledger --db {missing} export r"
    r = ledger_process(env=env)
    assert r.returncode == 0 and r.stdout.strip() == "" and not missing.exists()


# -- 13. the demo's hints ----------------------------------------------------------------------------------------------


@pytest.mark.heavy
def test_the_demo_names_the_program_the_shell_can_run(tmp_path: Path) -> None:
    db = tmp_path / "demo.sqlite"
    path = "/usr/local/bin:/usr/bin:/bin"  # a shell where .venv is not activated
    r = ledger_process("--db", str(db), "demo", env={"PATH": path}, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert f"try:    .venv/bin/ledger --db {db} export " in r.stdout
    assert "(`ledger` alone works after `source .venv/bin/activate`)" in r.stdout
    r = ledger_process("--db", str(db), "demo", env={"PATH": f"{REPO / '.venv' / 'bin'}:{path}"}, cwd=tmp_path)
    assert f"try:    ledger --db {db} export " in r.stdout and "activate" not in r.stdout


def test_a_folder_or_a_fifo_given_as_db_says_what_it_is(tmp_path: Path) -> None:
    import os

    folder = tmp_path / "ledgers"
    folder.mkdir()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for where, what in ((folder, "a folder"), (fifo, "a FIFO (named pipe)")):
        for cmd in (["cards"], ["init"]):
            r = ledger_process("--db", str(where), *cmd, timeout=30)
            no_traceback(r)
            assert r.returncode == 2, (cmd, r.stderr)
            assert r.stderr == f"Error: {where} is {what}, not a ledger file: " + (
                f"give a file in it, such as {where / 'ledger.sqlite'}\n"
                if where == folder
                else "give the path of a ledger file\n"
            ), r.stderr
    assert not any(folder.iterdir())


def test_every_error_has_one_prefix_and_small_sizes_read_as_sizes(tmp_path: Path) -> None:
    from ledger.cli.common import count, size

    assert [size(0), size(812), size(4_200), size(31_000_000)] == ["0 bytes", "812 bytes", "4.2 KB", "31.0 MB"]
    assert [count(1, "game"), count(6, "game")] == ["1 game", "6 games"]
    db = str(tmp_path / "l.sqlite")
    for args in (["cards"], ["export", "nope"], ["compare", "a"], ["bundle", "--all", "-o", "/proc/x"]):
        r = ledger("--db", db, *args)
        assert r.returncode in (1, 2) and r.stderr.startswith("Error: ") and r.stderr.count("Error") == 1, r.stderr


def test_ctrl_c_once_every_card_is_through_lets_the_import_finish() -> None:
    """A Ctrl-C held for a safe point that comes after the last card: nothing is left to stop, so the import ends
    as it would have (its summary, exit 0), not with "run it again to finish" and 130."""
    from ledger.cli.importing import _Committed
    from ledger.imports.import_cards import CardResult

    done = _Committed(3)
    done(CardResult(card_id="a", status="imported"))
    done.stop = True  # what the deferred Ctrl-C handler sets
    with pytest.raises(KeyboardInterrupt):
        done(CardResult(card_id="b", status="not imported"))  # a card is still to come: stop here
    done.stop = False
    late = _Committed(2)
    late(CardResult(card_id="a", status="imported"))
    late.stop = True
    late(CardResult(card_id="b", status="already imported"))  # the last one: no interrupt
    late.progress(None)(10)
    assert (late.cards, late.seen) == (2, 2)


@pytest.mark.heavy
def test_view_and_serve_take_the_same_ports_and_fail_alike(tmp_path: Path) -> None:
    """Both take --port 0 and fail alike on an address they cannot listen on (a busy port: tests/test_boundaries.py)."""
    db = str(tmp_path / "l.sqlite")
    assert ledger("--db", db, "init").returncode == 0
    serve = ["serve", "--environments", str(REPO / "tests" / "environment_files")]
    said = []
    for cmd in (["view"], serve):
        r = ledger_process("--db", db, *cmd, "--host", "256.0.0.1", "--port", "0", timeout=60)
        no_traceback(r)
        assert r.returncode == 2 and r.stdout == "", (cmd, r.stdout, r.stderr)
        said.append(r.stderr)
    assert said[0] == said[1] and said[0].startswith("Error: cannot serve on 256.0.0.1:0: "), said
    assert said[0].count("\n") == 1
    from click.testing import CliRunner

    from ledger.cli import cli

    for cmd in (["view"], serve):
        r = CliRunner().invoke(cli, ["--db", db, *cmd, "--port", "70000"])
        assert r.exit_code == 2 and "Invalid value for '--port': 70000 is not in the range 0<=x<=65535" in r.stderr


def test_competition_cards_are_marked_in_cards_and_the_viewers_list(tmp_path: Path) -> None:
    import urllib.request

    from ledger.domain.events import CardOpened
    from tests.web_support import ViewServer

    db = str(tmp_path / "l.sqlite")
    opened = datetime.now(UTC) - timedelta(minutes=5)
    append_open_card(db, "normal-card", opened)
    with Ledger.open(db) as led:
        opening = CardOpened(ts=opened, card_id="comp-card", competition_mode=True)
        led.store.append(card_stream("comp-card"), [opening], expected_version=0)
    r = ledger("--db", db, "cards")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(ln.startswith("comp-card (competition) ") for ln in lines), r.stdout
    assert any(ln.startswith("normal-card ") for ln in lines) and "normal-card (competition)" not in r.stdout
    assert "(competition): opened in competition mode, scored over every game of the server" in lines
    rows = json.loads(ledger("--db", db, "cards", "--json").stdout)
    assert {c["card_id"]: c["competition"] for c in rows} == {"normal-card": False, "comp-card": True}
    server = ViewServer(db)
    try:
        page = urllib.request.urlopen(server.url, timeout=10).read().decode()
    finally:
        server.stop()
    (comp,) = [row for row in page.split("<tr ")[1:] if 'data-card="comp-card"' in row]
    (normal,) = [row for row in page.split("<tr ")[1:] if 'data-card="normal-card"' in row]
    assert 'data-k="competition"' in comp and 'data-k="competition"' not in normal
