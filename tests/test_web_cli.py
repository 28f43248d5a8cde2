"""The viewer's commands without a browser: `ledger compare` (the compare page's numbers, equal to `ledger export`),
`ledger bundle` (what it leaves out, how it refuses bad input), and `ledger view` (read-only: a long card viewed
leaves the database exactly as it was; a small page weight; clean errors).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import statistics
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger
from ledger.domain.events import CardOpened, card_stream, decode
from ledger.ledger import SNAPSHOT_AFTER
from ledger.resim.frames import play_frames
from ledger.web.data import card_events
from ledger.web.pages import LiveLinks
from tests.child_agent import play
from tests.cli_run import in_process
from tests.toolkit import arcade, step
from tests.web_support import ENV_DIR, HOSTILE_REASONING, Played, ViewServer, best_run, play_ledger

STATIC = Path(__file__).resolve().parent.parent / "ledger" / "web" / "static"


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Played:
    return play_ledger(tmp_path_factory.mktemp("webcli") / "ledger.sqlite")


def ledger_cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The commands' output and exit codes; the servers (ViewServer) run as their own processes.
    return in_process("--db", str(db), *args)


def test_compare_numbers_equal_export(played: Played) -> None:
    ids = [played.cards["a1"], played.cards["b1"], played.cards["replayed"]]
    r = ledger_cli(played.db, "compare", *ids, "--json")
    assert r.returncode == 0, r.stderr
    cmp = json.loads(r.stdout)
    assert [c["card_id"] for c in cmp["cards"]] == ids
    for i, card_id in enumerate(ids):
        doc = played.exports[card_id]
        col = cmp["cards"][i]
        assert (col["score"], col["actions"], col["levels_completed"]) == (
            doc["score"],
            doc["total_actions"],
            doc["total_levels_completed"],
        )
        rows = {g["game_id"]: g["cards"][i] for g in cmp["games"]}
        for env in doc["environments"]:
            run = env["runs"][best_run(env)]
            got = rows[env["id"]]
            assert (got["score"], got["actions"], got["levels_completed"]) == (
                env["score"],
                env["actions"],
                env["levels_completed"],
            )
            assert [lv["actions"] for lv in got["levels"]] == run["level_actions"]
            assert [lv["score"] for lv in got["levels"]] == run["level_scores"]
            assert [-1 if lv["baseline"] is None else lv["baseline"] for lv in got["levels"]] == run[
                "level_baseline_actions"
            ]
        # Games a card did not play are None in its column.
        assert sum(1 for g in cmp["games"] if g["cards"][i] is not None) == len(doc["environments"])
    text = ledger_cli(played.db, "compare", *ids)
    assert text.returncode == 0
    for card_id in ids:
        assert f"{card_id}  score {played.exports[card_id]['score']:.2f}" in text.stdout


def test_compare_by_tag_gives_each_tags_figures_as_the_exports_have_them(played: Played) -> None:
    r = ledger_cli(played.db, "compare", "--group", "agent-a", "--group", "agent-b", "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    by_tag = {t["tag"]: t for t in report["tags"]}
    a = [played.cards["a1"], played.cards["a2"]]
    scores = sorted(played.exports[c]["score"] for c in a)
    fig = by_tag["agent-a"]
    assert fig["cards"] == 2 and report["ledger_cards"] == len(played.exports)
    assert (fig["score"]["worst"], fig["score"]["best"]) == (scores[0], scores[1])
    # Two values: each quartile sits a quarter, a half, three quarters of the way between them.
    assert fig["score"]["median"] == pytest.approx((scores[0] + scores[1]) / 2)
    assert fig["score"]["q1"] == pytest.approx(scores[0] + (scores[1] - scores[0]) / 4)
    assert by_tag["agent-b"]["score"]["median"] == played.exports[played.cards["b1"]]["score"]
    games = {}
    for c in a:
        for env in played.exports[c]["environments"]:
            games.setdefault(env["id"], []).append(env)
    assert sorted(g["game_id"] for g in fig["games"]) == sorted(games)
    for g in fig["games"]:
        envs = games[g["game_id"]]
        runs = [env["runs"][best_run(env)] for env in envs]
        assert g["cards"] == len(envs) and g["score"]["best"] == max(env["score"] for env in envs)
        for lv in g["levels"]:
            done = sorted(r["level_actions"][lv["level"] - 1] for r in runs if r["levels_completed"] >= lv["level"])
            assert lv["completed"] == len(done)
            assert lv["reached"] == sum(1 for r in runs if r["levels_completed"] >= lv["level"] - 1)
            if done:
                assert (lv["actions"]["best"], lv["actions"]["worst"]) == (done[0], done[-1])
                assert lv["actions"]["median"] == pytest.approx(statistics.median(done))
            else:
                assert lv["actions"] is None
            # A level not completed scores 0 in the level's score figures.
            level_scores = sorted(
                r["level_scores"][lv["level"] - 1] if r["levels_completed"] >= lv["level"] else 0.0 for r in runs
            )
            assert lv["score"]["median"] == pytest.approx(statistics.median(level_scores))
    medians = [t["score"]["median"] for t in report["tags"]]
    assert medians == sorted(medians, reverse=True) and [t["rank"] for t in report["tags"]] == [1, 2]
    text = ledger_cli(played.db, "compare", "--group", "agent-a").stdout
    assert f"tag agent-a: 2 card(s), of {len(played.exports)} in the ledger" in text
    assert "ledger cards --tag agent-a --game " in text


def test_compare_side_by_side_says_its_limit(played: Played) -> None:
    r = ledger_cli(played.db, "compare", *[f"c{i}" for i in range(13)])
    assert r.returncode == 2 and "at most 12 cards side by side (13 given)" in r.stderr
    ids = [played.cards["a1"], played.cards["a2"]]
    assert "(at most 12 cards side by side" in ledger_cli(played.db, "compare", *ids).stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["compare", "only-one"], 2, "two or more cards"),
        (["compare", "nope-1", "nope-2"], 1, "no card 'nope-1'"),
        (["compare", "--tag", "no-such-tag"], 1, "no card has tag"),
        (["bundle", "-o", "{tmp}/site"], 2, "which cards?"),
        (["bundle", "--all", "x", "-o", "{tmp}/site"], 2, "not --all with the others"),
        (["bundle", "nope", "-o", "{tmp}/site"], 1, "no card 'nope'"),
        (["bundle", "--tag", "no-such-tag", "-o", "{tmp}/site"], 1, "nothing to bundle"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    played: Played, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    r = ledger_cli(played.db, *[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == code, r.stderr
    assert message in r.stderr
    assert "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []  # no folder, no temporary leftovers


@pytest.mark.heavy
def test_view_started_with_sigint_ignored_still_stops_on_it(played: Played) -> None:
    server = ViewServer(played.db, sigint_ignored=True)
    assert server.stop() == 130


def test_view_of_a_missing_ledger_creates_nothing(tmp_path: Path) -> None:
    r = ledger_cli(tmp_path / "none.sqlite", "view", "--port", "0")
    assert r.returncode == 1
    assert "no ledger at" in r.stderr and "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.heavy
def test_bundle_leaves_out_reasoning_and_key_fingerprints(played: Played, tmp_path: Path) -> None:
    with Ledger.open(played.db) as led:
        opened = decode(led.store.read_stream(card_stream(played.hostile))[0].body)
    assert isinstance(opened, CardOpened) and opened.api_key_fingerprint  # there is something to leave out
    out = tmp_path / "site"
    r = ledger_cli(played.db, "bundle", "--all", "--environments", str(ENV_DIR), "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["cards"] == len(played.cards) and summary["replays_without_frames"] == 0
    text = "".join(p.read_text() for p in out.rglob("*.html"))
    assert opened.api_key_fingerprint not in text
    assert "__pwned=4" not in text  # the reasoning
    assert (out / "index.html").is_file() and (out / "compare.html").is_file()
    assert (out / "static" / "viewer.js").is_file()
    # Every page loads only files beside it: no http(s) URL in any src or href.
    assert ' src="http' not in text and ' href="http' not in text
    # A second bundle replaces the first; a folder that is not a bundle is refused and left alone.
    again = ledger_cli(played.db, "bundle", played.cards["a1"], "-o", str(out), "--with-reasoning")
    assert again.returncode == 0, again.stderr
    assert len(list(out.glob("card-*.html"))) == 1
    other = tmp_path / "mine"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    r = ledger_cli(played.db, "bundle", "--all", "-o", str(other))
    assert r.returncode == 2 and "not a bundle" in r.stderr
    assert [p.name for p in other.iterdir()] == ["keep.txt"]


def test_bundle_with_reasoning_keeps_it(played: Played, tmp_path: Path) -> None:
    out = tmp_path / "site"
    r = ledger_cli(
        played.db, "bundle", played.hostile, "--environments", str(ENV_DIR), "--with-reasoning", "-o", str(out)
    )
    assert r.returncode == 0, r.stderr
    replay = next(out.glob("replay-*.html")).read_text()
    data = replay.split('<script type="application/json" id="replay-data">', 1)[1].split("</script>", 1)[0]
    # The hostile "</script>" inside is escaped in the embedded JSON (else it would end the script element).
    assert "</script>" not in data and "<script>" not in data
    steps = json.loads(data)["frames"]["steps"]
    assert [s["reasoning"] for s in steps[1:]] == [HOSTILE_REASONING] * (len(steps) - 1)


def _get(url: str) -> tuple[int, bytes, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def _state(db: Path) -> tuple[str, int, int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        snaps = conn.execute("SELECT count(*) FROM snapshots").fetchone()[0]
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    return digest, events, snaps


@pytest.mark.heavy
def test_view_never_writes_even_for_a_long_card(tmp_path: Path) -> None:
    db = tmp_path / "long.sqlite"
    steps = SNAPSHOT_AFTER + 300  # past the point where a read-write load would cache a snapshot
    play(str(db), 7, steps, str(tmp_path / "child.json"), close=False)
    card = json.loads((tmp_path / "child.json").read_text())["card"]
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file, so its hash says it all
    before = _state(db)
    assert before[2] == 0
    srv = ViewServer(db, "--environments", str(ENV_DIR))
    try:
        links = LiveLinks()
        for path in ["", links.card(card), links.api_card(card), links.compare([card, card]), "api/cards"]:
            status, body, headers = _get(srv.url + path)
            assert status == 200, (path, body[:300])
            if path in ("", links.card(card)):
                assert "script-src 'self'" in headers["Content-Security-Policy"]
        with Ledger.open(db, readonly=True) as led:
            game = next(iter(led.load_card(card).games))
        status, body, _ = _get(srv.url + links.replay(card, game, 1))
        assert status == 200 and b'id="replay-data"' in body
        status, body, _ = _get(srv.url + links.card("no-such-card"))
        assert status == 404 and b"no card" in body
        status, _, _ = _get(srv.url + "replay?card=x&game=y&play=-1")
        assert status == 400
    finally:
        assert srv.stop() == 130
    assert _state(db) == before


def test_card_page_weight_before_data_is_small(played: Played) -> None:
    srv = ViewServer(played.db)
    try:
        status, page, _ = _get(srv.url + LiveLinks().card(played.cards["a1"]))
        assert status == 200
        assets = sum(len(_get(srv.url + f"static/{n}")[1]) for n in ("viewer.js", "viewer.css"))
    finally:
        srv.stop()
    body = page.split(b'<div id="card-body"', 1)
    shell = len(body[0]) + len(page.rsplit(b"</main>", 1)[1])
    # The card page loads the package's own script and style only (the chart library is for the chart pages).
    assert assets == sum(p.stat().st_size for p in STATIC.iterdir() if p.is_file())
    assert b"vendor/" not in page
    assert shell + assets < 300_000


def test_the_viewer_answers_while_a_request_is_unfinished_and_pages_by_prefix(played: Played) -> None:
    import socket

    srv = ViewServer(played.db)
    try:
        host, port = srv.url.split("//")[1].rstrip("/").split(":")
        # A client that sends half a request and waits: one thread serving everything would wait with it.
        with socket.create_connection((host, int(port)), timeout=10) as slow:
            slow.sendall(b"GET /compare?tag=agent-a HTTP/1.1\r\nHost: x\r\n")
            status, page, _ = _get(srv.url)
            assert status == 200 and b"matching" in page
        first = played.cards["a1"]
        status, page, _ = _get(srv.url + "?sort=date-asc&after=" + first[:8])
        assert status == 200 and first.encode() not in page and b"after card " + first[:8].encode() in page
        status, page, _ = _get(srv.url + "?after=zzzz")
        assert status == 400 and b"no card has this id or starts with it" in page
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("view", ["--host", "--port", "--environments"]),
        ("bundle", ["--all", "--tag", "--environments", "--with-reasoning", "--output", "--json"]),
        ("compare", ["--group", "--json"]),
    ],
)
def test_help_names_every_option(command: str, options: list[str], tmp_path: Path) -> None:
    r = ledger_cli(tmp_path / "unused.sqlite", command, "--help")
    assert r.returncode == 0
    for opt in options:
        assert opt in r.stdout


@pytest.mark.postgres
def test_view_over_postgresql_shows_the_export_and_updates(pg_url: str) -> None:
    with Ledger.open(pg_url) as led:
        arc = arcade(arc_api_key="test-key-for-the-viewer")
        cap = led.attach(arc)
        card = arc.open_scorecard(tags=["pg-agent"])
        env = arc.make("cnt3", scorecard_id=card, seed=1)
        for a in [1, 1, 2, 1]:
            step(env, a)
        srv = ViewServer(pg_url)
        try:
            status, page, _ = _get(srv.url + LiveLinks().card(card))
            doc = json.loads(led.export(card))
            assert status == 200
            assert f'data-k="card-score">{doc["score"]:.2f}<'.encode() in page
            assert f'data-k="total-actions">{doc["total_actions"]}<'.encode() in page
            version = page.split(b'data-events="', 1)[1].split(b'"', 1)[0].decode()
            poll = srv.url + LiveLinks().api_card(card) + f"&since={version}"
            assert _get(poll)[0] == 204  # nothing new
            step(env, 1)
            status, body, _ = _get(poll)
            assert status == 200
            update = json.loads(body)
            assert update["events"] > int(version) and update["open"] is True
            want = json.loads(led.export(card))
            assert f'data-k="total-actions">{want["total_actions"]}<' in update["html"]
        finally:
            assert srv.stop() == 130
        cap.detach()


def test_replay_frames_come_in_windows_and_equal_the_toolkit_frames(played: Played) -> None:
    card = played.cards["replayed"]
    with Ledger.open(played.db, readonly=True) as led:
        events = card_events(led, card)
    whole = play_frames(events, played.replay_game, 1, ENV_DIR)
    assert (whole.error, whole.diverged, whole.total_steps) == (None, None, len(played.grids))
    assert [s.grid for s in whole.steps] == played.grids
    window = play_frames(events, played.replay_game, 1, ENV_DIR, start=5, limit=3)
    assert [s.n for s in window.steps] == [5, 6, 7]
    assert [s.grid for s in window.steps] == played.grids[5:8]
    assert (
        play_frames(events, played.replay_game, 2, ENV_DIR).error == f"the card has no play 2 of {played.replay_game}"
    )
    missing = play_frames(events, played.replay_game, 1, ENV_DIR / "cnt3" / "nothing-here")
    assert missing.steps == [] and missing.error is not None and "not found under" in missing.error
