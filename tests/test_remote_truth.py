"""ONLINE and COMPETITION clients with no local game files: the server's answers are the card's baselines.

The server (the toolkit's REST server on 127.0.0.1, see tests/test_online_capture.py) leaves baselines out of
``/api/games``; the client has no ``environments_dir``. Every scorecard document it receives reveals baselines
and level counts, which the ledger records with their provenance; the card is then scored with them.
"""

from __future__ import annotations

import json
import random
import urllib.request
from pathlib import Path

import pytest
from arc_agi import Arcade, OperationMode
from arcengine import GameAction

from ledger import Ledger
from ledger.app.audit import audit_card
from ledger.domain.events import BaselinesReported, CardOnServer, decode
from ledger.errors import BaselinesNotKnown
from ledger.rules.text import replay_text
from ledger.web.pages import LiveLinks
from tests import toolkit
from tests.cli_run import ledger as run_ledger
from tests.test_online_capture import API_KEY, _quiet, play, server
from tests.web_support import ViewServer

MODES = pytest.mark.parametrize(
    "mode",
    [OperationMode.ONLINE, pytest.param(OperationMode.COMPETITION, marks=pytest.mark.heavy)],
    ids=["online", "competition"],
)


def bare_client(url: str, mode: OperationMode, nowhere: Path) -> Arcade:
    """A remote-mode Arcade that knows only what the server tells it (its games folder does not exist)."""
    arc = Arcade(
        arc_api_key=API_KEY, arc_base_url=url, operation_mode=mode, environments_dir=str(nowhere), logger=_quiet
    )
    assert arc.available_environments and not any(e.baseline_actions for e in arc.available_environments)
    return arc


def reports(ledger: Ledger, card: str) -> list[BaselinesReported]:
    return [
        e
        for e in (decode(r.body) for r in ledger.store.read_stream(f"card:{card}"))
        if isinstance(e, BaselinesReported)
    ]


@MODES
def test_export_equals_the_servers_close_document_with_no_local_files(
    backend_ledger: Ledger, tmp_path: Path, mode: OperationMode
) -> None:
    ledger = backend_ledger
    competition = mode == OperationMode.COMPETITION
    for seed in range(4):
        with server() as srv:
            arc = bare_client(srv.url, mode, tmp_path / "no-games")
            ledger.attach(arc)
            card = arc.open_scorecard(tags=["bare"])
            rng = random.Random(seed)
            first = rng.sample(toolkit.GAMES, 3)
            play(arc, card, seed, first, steps=40)
            if competition:
                # Nothing revealed the baselines yet: no made-up score of 0.
                with pytest.raises(BaselinesNotKnown, match="not known yet"):
                    ledger.export(card)
                c = ledger.load_card(card)
                text = replay_text(c, ledger.document(card, card=c), ["x"])
                assert "score not known yet" in text and "the server has revealed none yet" in text
            else:
                # A GET of the open card reveals the baselines of the games played so far.
                arc.get_scorecard(card)
                assert reports(ledger, card)[-1].answer == "scorecard"
                # Then games the GET did not show: the close answer reveals theirs.
                play(arc, card, seed + 100, [g for g in toolkit.GAMES if g not in first][:2], steps=20)
            arc.close_scorecard(card)
            server_doc = srv.closes[card]
        assert json.loads(ledger.export(card)) == server_doc, f"seed {seed}"
        c = ledger.load_card(card)
        assert c.server == srv.url and c.baselines_reported_in == "close"
        last = reports(ledger, card)[-1]
        assert last.answer == "close" and last.server == srv.url and c.baselines_id == last.baselines_id
        # The level counts too: a competition card's untouched games as the server made them at close.
        assert [e["level_count"] for e in json.loads(ledger.export(card))["environments"]] == [
            e["level_count"] for e in server_doc["environments"]
        ]
        check = next(x for x in audit_card(ledger, card).checks if x.name == "server")
        assert check.status == "PASS", check.message
        assert f"reported by the server {srv.url} at " in check.message and "in its close answer" in check.message
        assert "reported by the server" in replay_text(c, ledger.document(card, card=c))


def test_a_local_set_still_scores_the_card_when_asked(ledger: Ledger, tmp_path: Path) -> None:
    with server() as srv:
        arc = bare_client(srv.url, OperationMode.ONLINE, tmp_path / "no-games")
        ledger.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("clk2", scorecard_id=card)
        assert env is not None
        toolkit.step(env, 6, 2 * 8 + 1, 3 * 8 + 1)
        arc.close_scorecard(card)
        doc = srv.closes[card]
    assert json.loads(ledger.export(card)) == doc
    assert doc["environments"][0]["runs"][0]["level_baseline_actions"] == [1, 2]
    # Under a set of the user's (`--baselines`), the reported baselines are not used.
    from ledger.domain.events import BaselineEntry

    mine = {"clk2-0000000b": BaselineEntry(game_id="clk2-0000000b", baseline_actions=[4, 4])}
    other = json.loads(ledger.export(card, baselines=mine))
    assert other["environments"][0]["runs"][0]["level_baseline_actions"] == [4, 4]


@pytest.mark.heavy
def test_the_cli_says_baselines_are_not_known_yet_then_where_they_came_from(tmp_path: Path) -> None:
    db = tmp_path / "cli.sqlite"
    with server() as srv, Ledger.open(db) as led:
        arc = bare_client(srv.url, OperationMode.COMPETITION, tmp_path / "no-games")
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        assert env is not None
        for a in (GameAction.ACTION1, GameAction.ACTION1, GameAction.ACTION1):
            env.step(a)
        r = run_ledger("--db", str(db), "export", card)
        assert r.returncode == 1 and r.stdout == "" and "not known yet" in r.stderr and "Traceback" not in r.stderr
        r = run_ledger("--db", str(db), "replay", card)
        assert r.returncode == 0 and "score not known yet" in r.stdout and "0.00" not in r.stdout
        assert "levels 1/?" in r.stdout and "actions 3" in r.stdout and "0.00" not in r.stdout.split("post-mortem")[0]
        r = run_ledger("--db", str(db), "cards")
        assert r.returncode == 0 and "not known yet" in r.stdout.splitlines()[1]
        r = run_ledger("--db", str(db), "replay", card, "--json")
        assert json.loads(r.stdout)["baselines_not_known"] == [e.game_id for e in sorted_games(arc)]
        view = ViewServer(db)
        try:
            with urllib.request.urlopen(view.url + LiveLinks().card(card), timeout=30) as resp:
                page = resp.read().decode()
        finally:
            view.stop()
        assert '<span data-k="card-score">not known yet</span>' in page and 'data-k="baselines-unknown"' in page
        assert 'data-k="game-score">0.00' not in page
        arc.close_scorecard(card)
        doc = srv.closes[card]
        events = [decode(x.body) for x in led.store.read_stream(f"card:{card}")]
        assert isinstance(events[1], CardOnServer)
    r = run_ledger("--db", str(db), "export", card)
    assert r.returncode == 0 and json.loads(r.stdout) == doc
    r = run_ledger("--db", str(db), "cards", "--json")
    assert json.loads(r.stdout)[0]["baselines_known"] is True
    r = run_ledger("--db", str(db), "replay", card)
    assert "not known yet" not in r.stdout and f"reported by the server {srv.url}" in r.stdout
    r = run_ledger("--db", str(db), "audit", card)
    assert r.returncode == 0 and "PASS server" in r.stdout and "reported by the server" in r.stdout


def sorted_games(arc: Arcade) -> list[object]:
    """The server's games in the order an open competition card shows them: cnt3 first (played), then the rest."""
    envs = list(arc.available_environments)
    return sorted(envs, key=lambda e: (not e.game_id.startswith("cnt3"), envs.index(e)))


def test_the_servers_baselines_win_over_different_local_files(ledger: Ledger, tmp_path: Path) -> None:
    # The client's own metadata.json files say other baselines than the server's: the server's document decides.
    local = tmp_path / "stale-games"
    for meta in toolkit.ENV_DIR.rglob("metadata.json"):
        data = json.loads(meta.read_text())
        if data.get("baseline_actions"):
            data["baseline_actions"] = [b * 10 for b in data["baseline_actions"]]
        dest = local / meta.relative_to(toolkit.ENV_DIR)
        dest.parent.mkdir(parents=True)
        dest.write_text(json.dumps(data))
    with server() as srv:
        arc = Arcade(
            arc_api_key=API_KEY,
            arc_base_url=srv.url,
            operation_mode=OperationMode.ONLINE,
            environments_dir=str(local),
            logger=_quiet,
        )
        ledger.attach(arc)
        card = arc.open_scorecard()
        play(arc, card, 5, ["cnt3", "clk2", "wkex"], steps=40)
        live = json.loads(ledger.export(card))  # the local files' baselines: known, if stale
        arc.close_scorecard(card)
        doc = srv.closes[card]
    assert (
        live["environments"][0]["runs"][0]["level_baseline_actions"]
        != doc["environments"][0]["runs"][0]["level_baseline_actions"]
    )
    assert json.loads(ledger.export(card)) == doc
    assert sorted(reports(ledger, card)[-1].games) == sorted(e["id"] for e in doc["environments"])
