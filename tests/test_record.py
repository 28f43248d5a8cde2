"""`ledger record -- COMMAND`: an unchanged, threaded Swarm-like harness captured through a sitecustomize hook."""

from __future__ import annotations

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
from tests.test_online_capture import server

HARNESS = Path(__file__).resolve().parent / "swarm_harness.py"


def record(db: Path, *args: str, tags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    tag_args = [a for t in tags for a in ("--tag", t)]
    cmd = [*LEDGER, "--db", str(db), "record", *tag_args, "--", sys.executable, str(HARNESS), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.heavy
def test_swarm_export_is_byte_identical_to_what_the_harness_printed(db_path: Path) -> None:
    for seed in (1, 2, 3):
        r = record(db_path, "--seed", str(seed), "--steps", "60", tags=("swarm", "nightly"))
        assert r.returncode == 0, r.stderr[-3000:]
        printed = r.stdout.strip().splitlines()[-1]
        card_id = json.loads(printed)["card_id"]
        with Ledger.open(db_path) as led:
            assert led.export(card_id) == printed
            card = led.load_card(card_id)
            assert card.closed and card.captured_via == "record" and card.capture_tags == ["swarm", "nightly"]
            assert len(card.games) == 3  # one thread per game, one card
            assert any(p.actions_after_end for plays in card.games.values() for p in plays) or seed != 1
        assert f"card {card_id}   score" in r.stderr


def test_the_harness_never_imports_the_ledger() -> None:
    source = HARNESS.read_text()
    assert "ledger" not in source.replace("never imports the ledger", "").replace("`ledger record`", "")


def test_python_children_are_recorded_and_the_exit_status_passes_through(db_path: Path) -> None:
    r = record(db_path, "--seed", "5", "--steps", "20", "--child", "--exit", "3")
    assert r.returncode == 3, r.stderr[-3000:]
    printed = [json.loads(line) for line in r.stdout.strip().splitlines()]
    assert len(printed) == 2  # the child's card, then the parent's
    with Ledger.open(db_path) as led:
        for doc in printed:
            assert json.loads(led.export(doc["card_id"])) == doc
    assert r.stderr.count("score") == 2


def test_ctrl_c_reaches_the_command_and_its_status_comes_back(db_path: Path) -> None:
    cmd = [*LEDGER, "--db", str(db_path), "record", "--", sys.executable, str(HARNESS), "--hang", "--steps", "30"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    card_id = proc.stdout.readline().strip()
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert f"card {card_id}" in err and "open" in err and "Traceback (most recent call last)" in err
    with Ledger.open(db_path) as led:
        card = led.load_card(card_id)
        assert not card.closed and card.total_actions > 0


def test_a_command_that_does_not_exist_is_bad_usage(db_path: Path) -> None:
    r = subprocess.run(
        [*LEDGER, "--db", str(db_path), "record", "--", "/nonexistent/agent"], capture_output=True, text=True
    )
    assert r.returncode == 2 and "cannot run /nonexistent/agent" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.heavy
def test_an_online_swarm_is_recorded_from_the_client_side(db_path: Path) -> None:
    with server() as srv:
        r = record(db_path, "--seed", "4", "--steps", "40", "--online", srv.url)
        assert r.returncode == 0, r.stderr[-3000:]
        printed = r.stdout.strip().splitlines()[-1]
        card_id = json.loads(printed)["card_id"]
        server_doc = srv.closes[card_id]
    with Ledger.open(db_path) as led:
        assert json.loads(led.export(card_id)) == server_doc
        # (What the harness printed is the client's re-parse of that document: it adds the model's defaults.)
        assert json.loads(printed)["score"] == server_doc["score"]
        assert led.load_card(card_id).server_document == server_doc


@pytest.mark.heavy
def test_a_record_tag_is_a_tag_of_the_card_for_every_filter(db_path: Path, tmp_path: Path) -> None:
    r = record(db_path, "--seed", "6", "--steps", "10", tags=("nightly",))
    assert r.returncode == 0, r.stderr[-3000:]
    card_id = json.loads(r.stdout.strip().splitlines()[-1])["card_id"]
    other = record(db_path, "--seed", "7", "--steps", "10")  # untagged by the recorder: never chosen by the tag
    other_id = json.loads(other.stdout.strip().splitlines()[-1])["card_id"]

    def cli(*args: str) -> str:
        done = subprocess.run([*LEDGER, "--db", str(db_path), *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    listed = json.loads(cli("cards", "--tag", "nightly", "--json"))
    assert [c["card_id"] for c in listed] == [card_id] and "nightly" in listed[0]["tags"]
    everything = {c["card_id"]: c["tags"] for c in json.loads(cli("cards", "--json"))}
    assert "nightly" in everything[card_id] and "nightly" not in everything[other_id]
    compared = json.loads(cli("compare", "--tag", "nightly", "--json"))
    assert [(t["tag"], t["cards"], t["best_card"]) for t in compared["tags"]] == [("nightly", 1, card_id)]
    bundled = json.loads(cli("bundle", "--tag", "nightly", "-o", str(tmp_path / "site"), "--json"))
    index = (tmp_path / "site" / "index.html").read_text()
    assert bundled["cards"] == 1 and card_id in index and other_id not in index
    with Ledger.open(db_path) as led:
        from ledger.web.data import card_row

        card = led.load_card(card_id)
        assert "nightly" in card_row(card, led.document(card_id, card=card)).tags  # the viewer's filter and board
        assert "nightly" not in json.loads(led.export(card_id))["tags"]  # the document stays the toolkit's


@pytest.mark.heavy
def test_a_harness_under_record_talking_to_serve_on_one_ledger_is_captured_once(db_path: Path) -> None:
    """Both capture paths on one ledger: the server opens the card before it answers, so the client's capture
    finds it being captured, stands aside (saying so once), and the run is one card, whole."""
    from tests.rest_agent import start_server

    proc, url = start_server(db_path)
    try:
        r = record(db_path, "--seed", "5", "--steps", "40", "--online", url)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)
    assert r.returncode == 0, r.stderr[-3000:]
    printed = json.loads(r.stdout.strip().splitlines()[-1])
    card_id = printed["card_id"]
    assert "version conflict" not in r.stderr
    said = f"ledger record: card {card_id} was already being captured into this ledger by `ledger serve`"
    assert r.stderr.count(said) == 1 and r.stderr.count("stood aside") == 1, r.stderr[-3000:]
    assert f"card {card_id}   score" in r.stderr and "(captured by `ledger serve`)" in r.stderr
    with Ledger.open(db_path) as led:
        assert list(led.card_ids()) == [card_id]
        card = led.load_card(card_id)
        assert card.closed and card.captured_via == "serve"
        doc = json.loads(led.export(card_id))
        assert doc["score"] == printed["score"] and doc["total_actions"] == printed["total_actions"] > 0
