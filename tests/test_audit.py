"""`ledger audit`, the post-mortem and `ledger verify --json`, on real games played with the ledger attached.

The helpers at the top (a real ledger file, copies of it, raw sqlite3 rewrites of a card's stream with a correctly
recomputed hash chain) are shared with tests/test_tamper.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.app.audit import max_open_minutes, stale_minutes
from ledger.cli import cli
from ledger.domain import chain, document
from ledger.domain.baselines import as_map
from ledger.domain.events import (
    ActionIgnored,
    ActionTaken,
    AnyEvent,
    BaselinesRecorded,
    CardClosed,
    CardOpened,
    LevelReset,
    Numbered,
    PlayStarted,
    baselines_stream,
    card_stream,
    decode,
    encode,
    type_of,
)
from ledger.domain.projection import fold
from ledger.domain.scoring import score_card
from ledger.rules.audit_checks import check_lifecycle
from ledger.rules.postmortem import postmortem
from ledger.rules.timeline import DEFAULT_MAX_OPEN_FOR_MINUTES, DEFAULT_STALE_MINUTES
from tests.toolkit import ENV_DIR, arcade, step

# -- helpers (also used by test_tamper.py) ----------------------------------------------------------------------


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """The ledger command through Click's runner: (exit code, output)."""
    r = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    return r.exit_code, r.output


def audit_json(db: Path | str, card: str, *extra: str) -> tuple[int, dict]:
    """``ledger audit CARD --json`` and its parsed output."""
    code, out = run("--db", str(db), "audit", card, "--json", *extra)
    return code, json.loads(out)


def statuses(doc: dict) -> dict[str, str]:
    """check name -> PASS/FAIL/WARN/SKIP."""
    return {c["name"]: c["status"] for c in doc["checks"]}


def check(doc: dict, name: str) -> dict:
    """One check of an audit's JSON."""
    return next(c for c in doc["checks"] if c["name"] == name)


def play_disputed_card(led: Ledger) -> tuple[str, str]:
    """A closed card: two guids of cnt3 (seeds 1 and 0), level resets, GAME_OVER, actions after the end, a full
    reset after a WIN, and clk2 clicks. Returns (card id, the toolkit's close JSON)."""
    arc = arcade()
    led.attach(arc)
    card = arc.open_scorecard()
    g1 = arc.make("cnt3", scorecard_id=card, seed=1)  # odd seed: level 1 needs 3 presses
    g2 = arc.make("cnt3", scorecard_id=card, seed=0)
    for a in (1, 1, 2, 1):  # g1 level 1 at 4 actions
        step(g1, a)
    for a in (1, 1):  # g2 level 1 at 2 actions
        step(g2, a)
    # level reset, level 2, GAME_OVER, ignored, level reset, level 3 = WIN, ignored, full reset, two actions
    for a in (2, 0, 1, 1, 1, 3, 1, 0, 1, 1, 1, 0, 2, 2):
        step(g1, a)
    clk = arc.make("clk2", scorecard_id=card)
    for x, y in ((0, 0), (20, 28), (44, 44), (44, 44)):
        step(clk, 6, x, y)
    closed = arc.close_scorecard(card).model_dump_json()
    return card, closed


def play_open_card(led: Ledger) -> str:
    """An open card: cnt3 seed 0, ACTION2 twice and ACTION1 once (no level completed yet)."""
    arc = arcade()
    led.attach(arc)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    for a in (2, 2, 1):
        step(env, a)
    return card


def build_master(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """A real ledger file: (path, the disputed closed card, its toolkit close JSON, the open card)."""
    path = tmp_path_factory.mktemp("master") / "ledger.sqlite"
    with Ledger.open(path) as led:
        closed, closed_json = play_disputed_card(led)
        open_card = play_open_card(led)
    return path, closed, closed_json, open_card


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """One real ledger file for the module (tests work on copies of it)."""
    return build_master(tmp_path_factory)


def copy_ledger(src: Path, dst: Path) -> Path:
    """A consistent copy of a SQLite ledger (sqlite3's backup API, so the WAL is included)."""
    s, d = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        s.backup(d)
    finally:
        s.close()
        d.close()
    return dst


def raw(path: Path) -> sqlite3.Connection:
    """A raw sqlite3 connection with the append-only triggers dropped (what an attacker with the file does)."""
    con = sqlite3.connect(path)
    con.execute("DROP TRIGGER IF EXISTS events_no_update")
    con.execute("DROP TRIGGER IF EXISTS events_no_delete")
    con.commit()
    return con


def card_rows(con: sqlite3.Connection, card: str) -> list[tuple]:
    """(seq, version, type, ts, body, prev_hash, hash) of a card's stream, in version order."""
    return con.execute(
        "SELECT seq, version, type, ts, body, prev_hash, hash FROM events WHERE stream = ? ORDER BY version",
        (card_stream(card),),
    ).fetchall()


def card_events(con: sqlite3.Connection, card: str) -> list[AnyEvent]:
    """The card's events decoded, in version order."""
    return [decode(bytes(r[4])) for r in card_rows(con, card)]


def close_hash(con: sqlite3.Connection, card: str, events: list[AnyEvent]) -> str:
    """The document hash a CardClosed at the end of ``events`` would carry (the card's own baselines)."""
    opened = events[0]
    assert isinstance(opened, CardOpened) and opened.baselines_id
    body = con.execute(
        "SELECT body FROM events WHERE stream = ? AND version = 1", (baselines_stream(opened.baselines_id),)
    ).fetchone()[0]
    rec = decode(bytes(body))
    assert isinstance(rec, BaselinesRecorded)
    state = fold(card, [e for e in events if not isinstance(e, CardClosed)])
    return document.sha256(score_card(state, as_map(rec.entries)))


def rewrite_card(
    con: sqlite3.Connection,
    card: str,
    transform: Callable[[list[AnyEvent]], list[AnyEvent]],
    *,
    fix_close: bool = True,
) -> None:
    """Replace a card's stream by ``transform(events)`` with a correctly recomputed hash chain (versions 1..n),
    the CardClosed document hash recomputed (``fix_close``) and the cached projection removed: a forger who knows
    how the ledger works."""
    events = transform(card_events(con, card))
    if fix_close:
        events = [
            msgspec.structs.replace(e, document_sha256=close_hash(con, card, events[:i]))
            if isinstance(e, CardClosed)
            else e
            for i, e in enumerate(events)
        ]
    stream = card_stream(card)
    con.execute("DELETE FROM events WHERE stream = ?", (stream,))
    con.execute("DELETE FROM snapshots WHERE stream = ?", (stream,))
    insert_chained(con, stream, events, 1, chain.GENESIS)
    con.commit()


def insert_chained(con: sqlite3.Connection, stream: str, events: list[AnyEvent], first: int, prev: str) -> str:
    """Insert ``events`` as versions ``first``.. of ``stream`` behind the ledger's back, each hash correctly chained
    from ``prev`` (what a forger who knows the chain would write); returns the new head."""
    for v, e in enumerate(events, start=first):
        body = encode(e)
        h = chain.event_hash(prev, stream, v, type_of(e), body)
        con.execute(
            "INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (stream, v, type_of(e), e.ts.isoformat(), body, prev, h),
        )
        prev = h
    return prev


# -- an untouched ledger --------------------------------------------------------------------------------------


def test_untouched_card_passes_every_check(master, tmp_path: Path) -> None:
    src, card, closed_json, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    with Ledger.open(db) as led:
        rows = led.store.read_stream(card_stream(card))
        assert led.export(card) == closed_json
    head = rows[-1].hash
    code, out = run("--db", str(db), "audit", card, "--environments", str(ENV_DIR), "--expect-head", head)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == (
        f"audit of card {card}: {len(rows)} events, card head {head} (this card's last event; `ledger verify` "
        "prints the ledger's head)"
    )
    assert lines[1] == (
        f"PASS integrity: {len(rows)} events, versions 1..{len(rows)}, hash chain unbroken; head {head}, "
        "matches the expected head"
    )
    assert lines[2].startswith("PASS consistency: rebuilt scorecard equals the document recorded at close (sha256 ")
    assert lines[2].endswith(f"cached projection (version {len(rows)}) equals a replay")
    assert lines[3] == (
        "PASS resimulation: 4 play(s) on 3 guid(s), 27 inputs replayed against the game code: every state, "
        "levels_completed and derived event matches"
    )
    assert lines[4].startswith("PASS lifecycle: no idle gap of STALE_MINUTES=15 or more")
    assert lines[6] == f"post-mortem of card {card}   score 56.83"

    code, doc = audit_json(db, card, "--environments", str(ENV_DIR))
    assert code == 0
    assert statuses(doc) == {"integrity": "PASS", "consistency": "PASS", "resimulation": "PASS", "lifecycle": "PASS"}
    assert doc["ok"] is True and doc["head"] == head and doc["events"] == len(rows)
    cons = check(doc, "consistency")
    # The hash recorded at close is the hash of exactly what the toolkit returned from close_scorecard.
    assert cons["recorded_document_sha256"] == cons["rebuilt_document_sha256"]
    assert cons["recorded_document_sha256"] == hashlib.sha256(closed_json.encode()).hexdigest()
    assert cons["cached_projection"] == {"version": len(rows), "matches": True}
    resim = check(doc, "resimulation")
    assert (resim["plays"], resim["guids"], resim["inputs"], resim["divergence"]) == (4, 3, 27, None)
    assert resim["games"] == ["clk2-0000000b", "cnt3-0000000a"]


def test_audit_json_shape_is_stable(master, tmp_path: Path) -> None:
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    code, doc = audit_json(db, card)
    assert code == 0
    assert list(doc) == ["card_id", "ok", "head", "events", "checks", "postmortem", "retracted"]
    assert [c["name"] for c in doc["checks"]] == ["integrity", "consistency", "resimulation", "lifecycle"]
    assert list(check(doc, "integrity")) == [
        "name", "status", "message", "events", "last_version", "head", "expected_head", "expected_head_version",
        "problems",
    ]  # fmt: skip
    assert list(check(doc, "consistency")) == [
        "name", "status", "message", "closed", "close_version", "recorded_document_sha256",
        "rebuilt_document_sha256", "close_answer_sha256", "events_after_close", "cached_projection", "score", "closes",
    ]  # fmt: skip
    assert check(doc, "resimulation") == {
        "name": "resimulation",
        "status": "SKIP",
        "message": "not run: give --environments DIR (the game files) to replay every action against the game code",
        "environments": None,
        "games": [],
        "skipped_games": {},
        "guids": 0,
        "plays": 0,
        "inputs": 0,
        "default_seed_plays": 0,
        "seeds_found": {},
        "undecided_actions": 0,
        "decided_actions": 0,
        "searched": False,
        "reproduced_actions": 0,
        "error": None,
        "unknown": None,
        "divergence": None,
    }
    assert list(check(doc, "lifecycle")) == [
        "name", "status", "message", "stale_minutes", "max_open_minutes", "idle_gaps", "max_open", "open_minutes",
        "events_after_first_close", "actions_after_first_close",
    ]  # fmt: skip
    pm = doc["postmortem"]
    assert list(pm) == ["card_id", "score", "games"]
    assert [g["game_id"] for g in pm["games"]] == ["cnt3-0000000a", "clk2-0000000b"]
    assert list(pm["games"][0]) == [
        "game_id", "score", "plays", "best_play", "guid", "state", "levels", "arithmetic", "message", "findings",
    ]  # fmt: skip
    assert pm["games"][0]["levels"][0] == {
        "level": 1, "weight": 1, "baseline": 2, "actions": 4, "score": 25.0, "completed": True,
    }  # fmt: skip


def test_open_card_without_cache(master, tmp_path: Path) -> None:
    src, _, _, card = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    code, out = run("--db", str(db), "audit", card, "--environments", str(ENV_DIR))
    assert code == 0, out
    line = out.splitlines()[2]
    assert line.startswith("PASS consistency: card is open: no close document to compare (rebuilt document sha256 ")
    assert line.endswith("); no cached projection")


def test_usage_errors_exit_2_and_unknown_card_exits_1(master, tmp_path: Path) -> None:
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    code, out = run("--db", str(db), "audit", card, "--expect-head", "abc")
    assert code == 2 and "a head hash is 64 hexadecimal characters" in out and "Traceback" not in out
    code, out = run("--db", str(db), "audit", card, "--environments", str(tmp_path / "nope"))
    assert code == 2 and "does not exist" in out
    code, out = run("--db", str(db), "audit")
    assert code == 2 and "Missing argument 'CARD'" in out
    code, out = run("--db", str(db), "audit", "no-such-card")
    assert code == 1 and out == "Error: no card 'no-such-card' in this ledger (see `ledger cards`)\n"


def test_a_folder_without_the_cards_games_skips_them(master, tmp_path: Path) -> None:
    """A game the folder lacks cannot be checked: SKIP with the reason, never FAIL; exit 2 when none is there."""
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    empty = tmp_path / "games"
    empty.mkdir()
    code, doc = audit_json(db, card, "--environments", str(empty))
    assert code == 2 and doc["ok"]
    resim = check(doc, "resimulation")
    assert resim["status"] == "SKIP" and resim["plays"] == 0
    assert resim["skipped_games"] == {
        g: f"game {g} not found under {empty} (no metadata.json with that game_id)"
        for g in ("clk2-0000000b", "cnt3-0000000a")
    }
    code, out = run("--db", str(db), "audit", card, "--environments", str(empty))
    assert code == 2 and "SKIP resimulation: no game of the card could be checked: game clk2" in out
    assert f"Error: {empty} holds none of the games of card {card}" in out and "FAIL" not in out
    # One of the two games there: that one is checked, the other skipped, and the audit passes.
    shutil.copytree(ENV_DIR / "cnt3", empty / "cnt3")
    code, doc = audit_json(db, card, "--environments", str(empty))
    resim = check(doc, "resimulation")
    assert code == 0 and resim["status"] == "PASS" and list(resim["skipped_games"]) == ["clk2-0000000b"]
    assert resim["plays"] == 3 and resim["message"].endswith(
        f"; not checked: game clk2-0000000b not found under {empty} (no metadata.json with that game_id)"
    )


def test_a_poisoned_cache_fails_consistency(master, tmp_path: Path) -> None:
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    with Ledger.open(db) as led:
        version, state = led.cached_card(card)
        state.games["cnt3-0000000a"][0].actions += 1
        # Written through the API, the forged state is bound to the log: reads use it, the audit and verify do not.
        led.save_snapshot(card, state, version, led.seq_at_version(card, version))
        assert led.load_card(card).games["cnt3-0000000a"][0].actions == 14
    code, doc = audit_json(db, card)
    assert code == 1
    assert statuses(doc)["consistency"] == "FAIL"
    assert check(doc, "consistency")["message"] == (
        f"cached projection (version {version}) differs from a replay of the events: "
        "cnt3-0000000a play 1 actions 13 vs cached 14"
    )


def test_seed_matters_for_resimulation(master, tmp_path: Path) -> None:
    """Same actions, another seed recorded: level 1 of cnt3 completes one press later, the game disagrees."""
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    con = raw(db)

    def reseed(events: list[AnyEvent]) -> list[AnyEvent]:
        return [msgspec.structs.replace(e, seed=0) if isinstance(e, PlayStarted) and e.seed == 1 else e for e in events]

    rewrite_card(con, card, reseed)
    con.close()
    code, doc = audit_json(db, card, "--environments", str(ENV_DIR))
    assert code == 1
    assert statuses(doc) == {"integrity": "PASS", "consistency": "PASS", "resimulation": "FAIL", "lifecycle": "PASS"}
    div = check(doc, "resimulation")["divergence"]
    # seed 0 completes level 1 on g1's second ACTION1 (version 5); seed 1 needed a third press.
    assert (div["version"], div["action"], div["field"], div["expected"], div["recorded"]) == (
        5, "ACTION1", "levels_completed", 1, 0,
    )  # fmt: skip


# -- lifecycle: the toolkit's limits ----------------------------------------------------------------------------


@pytest.mark.parametrize("raw_value", [None, "", "0", "1", "15", "60", "61", "-5", "abc", "7.5", " 20 ", "+3"])
def test_stale_minutes_parse_and_clamp_like_the_toolkit(raw_value: str | None, monkeypatch) -> None:
    import arc_agi.scorecard as sc

    env = {} if raw_value is None else {"STALE_MINUTES": raw_value}
    if raw_value is None:
        monkeypatch.delenv("STALE_MINUTES", raising=False)
    else:
        monkeypatch.setenv("STALE_MINUTES", raw_value)
    assert stale_minutes(env) == sc._get_stale_minutes()


@pytest.mark.parametrize("raw_value", [None, "", "59", "60", "4320", "10080", "10081", "-1", "x", "100.0", " 90"])
def test_max_open_minutes_parse_and_clamp_like_the_toolkit(raw_value: str | None, monkeypatch) -> None:
    import arc_agi.scorecard as sc

    env = {} if raw_value is None else {"MAX_OPEN_FOR_MINUTES": raw_value}
    if raw_value is None:
        monkeypatch.delenv("MAX_OPEN_FOR_MINUTES", raising=False)
    else:
        monkeypatch.setenv("MAX_OPEN_FOR_MINUTES", raw_value)
    assert max_open_minutes(env) == sc._max_open_for_minutes()


def test_defaults() -> None:
    assert (stale_minutes({}), max_open_minutes({})) == (DEFAULT_STALE_MINUTES, DEFAULT_MAX_OPEN_FOR_MINUTES)
    assert (stale_minutes({"STALE_MINUTES": "0"}), max_open_minutes({"MAX_OPEN_FOR_MINUTES": "1"})) == (1, 60)


T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _numbered(offsets_and_events: list[tuple[float, str]]) -> list[Numbered]:
    """Events at T0 + minutes, by kind: o(pen), p(lay), a(ction), r(eset), i(gnored), c(lose)."""
    out = []
    for v, (minutes, kind) in enumerate(offsets_and_events, start=1):
        ts = T0 + timedelta(minutes=minutes)
        g = {"ts": ts, "game_id": "cnt3-0000000a", "guid": "g"}
        ev: AnyEvent
        if kind == "o":
            ev = CardOpened(ts=ts, card_id="c")
        elif kind == "p":
            ev = PlayStarted(seed=0, **g)
        elif kind == "a":
            ev = ActionTaken(action=1, levels_completed=0, state="NOT_FINISHED", **g)
        elif kind == "r":
            ev = LevelReset(levels_completed=0, state="NOT_FINISHED", **g)
        elif kind == "i":
            ev = ActionIgnored(action=1, state="GAME_OVER", **g)
        else:
            ev = CardClosed(ts=ts, reason="explicit")
        out.append(Numbered(v, v + 100, ev))
    return out


def test_lifecycle_passes_below_the_limits() -> None:
    evs = _numbered([(0, "o"), (0, "p"), (5, "a"), (19.99, "a"), (30, "c")])
    c = check_lifecycle(evs, 15, 4320)
    assert c.status == "PASS"
    assert c.message == (
        "no idle gap of STALE_MINUTES=15 or more (longest 15.0 min, between versions 3 and 4); open 20.0 min of "
        "MAX_OPEN_FOR_MINUTES=4320"
    )
    assert c.details["idle_gaps"] == [] and c.details["max_open"] is None


def test_lifecycle_warns_at_an_idle_gap_and_names_the_events() -> None:
    # The gap counts from the last scorecard update: the ignored action (empty frame) at 10 does not refresh it.
    evs = _numbered([(0, "o"), (0, "p"), (1, "a"), (10, "i"), (16, "a"), (17, "r"), (18, "a"), (40, "c")])
    c = check_lifecycle(evs, 15, 4320)
    assert c.status == "WARN"
    assert c.details["idle_gaps"] == [
        {
            "previous_version": 3,
            "previous_ts": "2026-03-01T12:01:00+00:00",
            "version": 5,
            "seq": 105,
            "ts": "2026-03-01T12:16:00+00:00",
            "minutes": 15.0,
        }
    ]
    assert (c.details["events_after_first_close"], c.details["actions_after_first_close"]) == (3, 3)
    assert c.message == (
        "1 idle gap(s) of STALE_MINUTES=15 or more: version 5 at 2026-03-01T12:16:00+00:00 came 15.0 min after "
        "version 3; the toolkit would have closed the card there, and the 3 later event(s) (3 action(s)) would "
        "have landed on a new card"
    )
    assert check_lifecycle(evs, 16, 4320).status == "PASS"


def test_lifecycle_warns_past_max_open() -> None:
    evs = _numbered([(0, "o"), (0, "p")] + [(m, "a") for m in range(10, 130, 10)] + [(131, "c")])
    c = check_lifecycle(evs, 15, 60)
    assert c.status == "WARN"
    assert c.details["max_open"] == {
        "version": 8,
        "seq": 108,
        "ts": "2026-03-01T13:00:00+00:00",
        "opened_at": "2026-03-01T12:00:00+00:00",
        "closes_at": "2026-03-01T13:00:00+00:00",
        "minutes": 60.0,
    }
    assert c.details["actions_after_first_close"] == 7
    assert "MAX_OPEN_FOR_MINUTES=60: closed at 2026-03-01T13:00:00+00:00" in c.message


def test_lifecycle_warning_on_a_real_card_does_not_fail_the_audit(master, tmp_path: Path) -> None:
    """A real recording whose later half is shifted 20 minutes (a long think): WARN, exit 0."""
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    con = raw(db)

    def think(events: list[AnyEvent]) -> list[AnyEvent]:
        return [
            msgspec.structs.replace(e, ts=e.ts + timedelta(minutes=20)) if i >= 10 else e for i, e in enumerate(events)
        ]

    rewrite_card(con, card, think)
    con.close()
    code, out = run("--db", str(db), "audit", card, "--environments", str(ENV_DIR))
    assert code == 0, out
    line = out.splitlines()[4]
    assert line.startswith("WARN lifecycle: 1 idle gap(s) of STALE_MINUTES=15 or more: version 11 at ")
    code, out = run("--db", str(db), "audit", card, env={"STALE_MINUTES": "30"})
    assert code == 0 and out.splitlines()[4].startswith("PASS lifecycle:")


# -- the post-mortem --------------------------------------------------------------------------------------------


def _play(led: Ledger, game: str, moves: list[int], seed: int = 0) -> tuple:
    arc = arcade()
    led.attach(arc)
    card = arc.open_scorecard()
    env = arc.make(game, scorecard_id=card, seed=seed)
    for m in moves:
        step(env, m)
    state = led.load_card(card)
    return state, led.document(card, card=state)


def test_postmortem_worked_example_names_the_failed_level(ledger: Ledger) -> None:
    state, doc = _play(ledger, "wkex", [2] * 43 + [1] + [2] * 399 + [1])
    pm = postmortem(state, doc)
    (g,) = pm.games
    assert g.arithmetic is not None
    assert g.arithmetic.text == "(1x25 + 2x9.46 + 3x0)/6 = 7.32, cap 3/6 = 50 -> 7.32"
    (f,) = g.findings
    assert f.kind == "failed_level"
    assert f.text == (
        "wkex-0000000f play 1: completed levels 1-2, then took no action on level 3 (baseline 73); it weighs 3 of 6: "
        "50 of the game's 100 points"
    )
    assert f.numbers == {
        "stopped_on_level": 3, "levels_completed": 2, "actions_on_level": 0, "baseline": 73, "state": "NOT_FINISHED",
        "failed_levels": [3], "failed_weight": 3, "total_weight": 6, "share": 50.0,
    }  # fmt: skip


def test_postmortem_dying_and_restarting_and_actions_after_game_over(ledger: Ledger) -> None:
    # cnt3 seed 0: ACTION3 loses. Die, keep pressing (ignored), reset the level, again and again.
    state, doc = _play(ledger, "cnt3", [1, 3, 1, 1, 0, 1, 3, 2, 0, 3, 0, 3, 1])
    pm = postmortem(state, doc)
    kinds = {f.kind: f for f in pm.games[0].findings}
    assert set(kinds) == {"failed_level", "restarting", "after_end"}
    assert kinds["restarting"].numbers == {
        "resets": 3, "new_plays": 0, "restarts": 3, "actions": 9, "actions_per_restart": 3.0,
        "levels_completed": 0, "game_over_plays": 1, "plays": 1,
    }  # fmt: skip
    assert kinds["restarting"].text == (
        "cnt3-0000000a: 3 level reset(s) and 0 new play(s) without a win (3 restarts) next to 9 actions, 3.0 "
        "actions per restart, 0 levels completed; 1 of 1 play(s) ended GAME_OVER: the agent is dying and "
        "restarting rather than progressing"
    )
    assert kinds["after_end"].numbers == {"actions_after_end": 4, "state": "GAME_OVER", "actions": 9}
    assert kinds["after_end"].text.endswith(
        ": 4 action(s) sent after GAME_OVER, answered with empty frames and counted nowhere (a RESET was needed)"
    )
    assert kinds["failed_level"].numbers["stopped_on_level"] == 1
    assert kinds["failed_level"].numbers["actions_on_level"] == 9


def test_postmortem_level_cap_and_completion_cap(ledger: Ledger) -> None:
    state, doc = _play(ledger, "wkex", [1])  # level 1 (baseline 22) in one action
    g = postmortem(state, doc).games[0]
    kinds = {f.kind: f for f in g.findings}
    assert set(kinds) == {"failed_level", "completion_cap", "level_cap"}
    assert kinds["level_cap"].text == (
        "wkex-0000000f: the 115 cap per level was hit by play 1: level 1: (22/1)^2 x 100 = 48400.00, scored 115"
    )
    assert kinds["completion_cap"].numbers == {
        "weighted_mean": 115 / 6, "cap": 1 / 6 * 100, "scored_weight": 1, "total_weight": 6,
    }  # fmt: skip
    assert g.arithmetic is not None and g.arithmetic.score == doc.score == 1 / 6 * 100


def test_postmortem_costliest_level_when_everything_was_completed(ledger: Ledger) -> None:
    state, doc = _play(ledger, "cnt3", [1, 1, 2, 2, 1, 1, 1, 1, 1])  # levels in 2, 5 (baseline 3), 2 actions
    (f,) = postmortem(state, doc).games[0].findings
    assert f.kind == "costliest_level"
    assert f.numbers["level"] == 2 and f.numbers["actions"] == 5 and f.numbers["baseline"] == 3
    assert f.numbers["points_lost"] == pytest.approx(2 * (100 - 36) / 6)


def test_replay_ends_with_the_postmortem_summary(master, tmp_path: Path) -> None:
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    code, out = run("--db", str(db), "replay", card)
    assert code == 0
    tail = out[out.index("\npost-mortem\n") + 1 :].splitlines()[1:]
    assert tail[0] == "  cnt3-0000000a: best play 1 of 3, score 28.67"
    assert tail[1].startswith("    - cnt3-0000000a: every level was completed; level 3 cost the most")
    assert any(t.startswith("    - clk2-0000000b: the 115 cap per level was hit by play 1: level 2") for t in tail)


# -- ledger verify --json ---------------------------------------------------------------------------------------


def test_verify_json_shape(master, tmp_path: Path) -> None:
    src, *_ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    code, out = run("--db", str(db), "verify", "--json")
    doc = json.loads(out)
    assert code == 0
    assert list(doc) == [
        "ok", "events", "streams", "head", "revision", "head_revision", "migrations_at_head", "triggers",
        "chains_ok", "derived", "errors", "stream_checks",
    ]  # fmt: skip
    assert doc["derived"] == {
        "cards": [], "summary": [], "snapshots": [], "snapshots_checked": doc["derived"]["snapshots_checked"],
        "snapshot_sample": 1, "tree": None, "copy_marks": [],
    }  # fmt: skip
    assert doc["derived"]["snapshots_checked"] >= 1
    with Ledger.open(db) as led:
        infos = led.store.streams()
        assert doc["head"] == chain.ledger_head((s.stream, s.version, s.head) for s in infos)
        assert doc["revision"] == doc["head_revision"] == led.store.head_revision()
    assert doc["ok"] is True and doc["chains_ok"] is True and doc["migrations_at_head"] is True
    assert doc["triggers"] == {"expected": ["events_no_update", "events_no_delete"], "missing": []}
    assert doc["streams"] == len(infos) == 3 and doc["errors"] == []
    assert [(s["stream"], s["events"], s["version"], s["head"], s["error"]) for s in doc["stream_checks"]] == [
        (s.stream, s.count, s.version, s.head, None) for s in infos
    ]
    code, out = run("--db", str(db), "verify")
    assert code == 0
    assert out.splitlines() == [
        f"OK: {doc['events']} events in 3 streams, every chain verified, append-only triggers present, "
        f"derived tables match the log, schema {doc['revision']} (head)",
        f"ledger head {doc['head']}  (all streams; keep it, check later with `ledger verify --expect-head`)",
    ]


def test_audit_on_both_backends(backend_ledger: Ledger, backend_url: str) -> None:
    card, _ = play_disputed_card(backend_ledger)
    code, doc = audit_json(backend_url, card, "--environments", str(ENV_DIR))
    assert code == 0, doc
    assert statuses(doc) == {"integrity": "PASS", "consistency": "PASS", "resimulation": "PASS", "lifecycle": "PASS"}


def test_plays_without_a_recorded_seed_use_the_games_default(master, tmp_path: Path) -> None:
    """Imported recordings carry no seed: the game is built without one, as the toolkit does for seed=None."""
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    con = raw(db)

    def unseed(events: list[AnyEvent]) -> list[AnyEvent]:
        return [
            msgspec.structs.replace(e, seed=None) if isinstance(e, PlayStarted) and e.seed == 0 else e for e in events
        ]

    rewrite_card(con, card, unseed)
    con.close()
    code, doc = audit_json(db, card, "--environments", str(ENV_DIR))
    assert code == 0
    resim = check(doc, "resimulation")
    assert resim["default_seed_plays"] == 2  # g2 of cnt3 and clk2; g1 keeps its seed 1
    assert resim["message"].endswith("; 2 play(s) had no recorded seed and used the game's default")


def test_recorded_reasoning_is_not_a_divergence(ledger: Ledger, db_path: Path) -> None:
    from arcengine import GameAction

    arc = arcade()
    ledger.attach(arc, record_reasoning=True)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    env.step(GameAction.ACTION1, reasoning={"why": "press"})
    env.step(GameAction.ACTION1, reasoning={"why": "again"})
    taken = [
        e for e in (decode(r.body) for r in ledger.store.read_stream(card_stream(card))) if isinstance(e, ActionTaken)
    ]
    assert [e.reasoning for e in taken] == [{"why": "press"}, {"why": "again"}]
    code, doc = audit_json(db_path, card, "--environments", str(ENV_DIR))
    assert code == 0 and statuses(doc)["resimulation"] == "PASS"


def test_an_imported_card_resumed_after_its_close_passes(tmp_path: Path, db_path: Path) -> None:
    """Recordings imported, the run goes on, imported again: card_closed, card_reopened, more events, card_closed.
    Both closes carry the document of their moment; recordings have no seed, so the games' default is replayed."""
    import logging

    from arc_agi import Arcade, OperationMode

    quiet = logging.getLogger("tests.audit.recording")
    quiet.setLevel(logging.ERROR)
    rec = tmp_path / "recordings"
    arc = Arcade(
        operation_mode=OperationMode.OFFLINE, environments_dir=str(ENV_DIR), recordings_dir=str(rec), logger=quiet
    )
    card = arc.open_scorecard()
    cnt, clk = (
        arc.make("cnt3", scorecard_id=card, save_recording=True),
        arc.make("clk2", scorecard_id=card, save_recording=True),
    )
    for a in (1, 2, 1, 3, 1, 0):
        step(cnt, a)
    step(clk, 6, 0, 0)
    assert run("--db", str(db_path), "import", str(rec), "--environments", str(ENV_DIR))[0] == 0
    for a in (1, 1, 1):
        step(cnt, a)
    step(clk, 6, 20, 28)
    assert run("--db", str(db_path), "import", str(rec), "--environments", str(ENV_DIR))[0] == 0
    code, doc = audit_json(db_path, card, "--environments", str(ENV_DIR))
    assert code == 0, doc
    assert statuses(doc) == {"integrity": "PASS", "consistency": "PASS", "resimulation": "PASS", "lifecycle": "PASS"}
    cons = check(doc, "consistency")
    assert [(c["matches"], c["open_after"], c["events_after"]) for c in cons["closes"]] == [
        (True, True, 0),
        (True, False, 0),
    ]
    assert cons["message"].startswith("rebuilt scorecard equals the document recorded at each of the 2 closes (sha256 ")
    assert check(doc, "resimulation")["default_seed_plays"] == 2
    with Ledger.open(db_path) as led:
        assert led.export(card) == arc.get_scorecard(card).model_dump_json()


def test_a_cache_covering_part_of_an_open_card_is_compared_with_that_part(master, tmp_path: Path) -> None:
    src, _, _, card = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    with Ledger.open(db) as led:
        third = led.store.read_stream(card_stream(card))[2]
        led.save_snapshot(card, led.load_card(card, until=third.seq), 3, third.seq)
    code, doc = audit_json(db, card)
    assert code == 0
    assert check(doc, "consistency")["cached_projection"] == {"version": 3, "matches": True}
    assert check(doc, "consistency")["message"].endswith("; cached projection (version 3) equals a replay")
