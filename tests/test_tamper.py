"""Tampering with a real ledger file, the append-only triggers dropped first by raw sqlite3: each edit is caught by
the check that should catch it, and `ledger audit` exits 1.

The disputed card (see tests/test_audit.py ``play_disputed_card``) has 38 events: 1 card_opened, 2-3 play_started
(cnt3 guids g1 seed 1, g2 seed 0), 4-26 g1's first play (level reset at 13, GAME_OVER at 18-19, an ignored action at
20, a level reset at 21, WIN at 23-25, an ignored action at 26), 27-29 g1's second play (two ACTION2), 30-37 clk2
and 38 card_closed. The open card has 5 events: card_opened, play_started, ACTION2, ACTION2, ACTION1 (cnt3 seed 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from sqlalchemy import text

from ledger import Ledger
from ledger.app import card_rows as audit_rows
from ledger.cli import cli
from ledger.domain.events import (
    ActionTaken,
    AnyEvent,
    LevelCompleted,
    LevelReset,
    PlayStarted,
    card_stream,
    encode,
)
from tests.test_audit import audit_json as _audit_json
from tests.test_audit import (
    build_master,
    card_events,
    card_rows,
    check,
    copy_ledger,
    insert_chained,
    play_disputed_card,
    raw,
    rewrite_card,
    run,
    statuses,
)
from tests.toolkit import ENV_DIR

ENV = ("--environments", str(ENV_DIR))


def audit_json(db: Path, card: str, *extra: str) -> tuple[int, dict]:
    """``ledger audit CARD --json``, held to ``ledger verify``: the audit finds the card's chain or its consistency
    broken exactly when verify names the card (the rest of the audit, resimulation and lifecycle, needs the game
    code or the clock, which verify does not read)."""
    code, doc = _audit_json(db, card, *extra)
    if "--expect-head" not in extra:
        st = statuses(doc)
        out = CliRunner().invoke(cli, ["--db", str(db), "verify", "--json"]).stdout
        named = [e for e in json.loads(out)["errors"] if card in e]
        assert (st["integrity"] == "FAIL" or st["consistency"] == "FAIL") == bool(named), (st, named)
    return code, doc


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """One real ledger file for the module (each test tampers with a copy)."""
    return build_master(tmp_path_factory)


def _copy(master, tmp_path: Path) -> tuple[Path, str, str]:
    src, card, _, open_card = master
    return copy_ledger(src, tmp_path / "tampered.sqlite"), card, open_card


def _head(db: Path, card: str) -> str:
    with Ledger.open(db) as led:
        return led.store.read_stream(card_stream(card))[-1].hash


def _problem(doc: dict) -> tuple[int, str]:
    p = check(doc, "integrity")["problems"][0]
    return p["version"], p["problem"]


def test_one_changed_byte_of_a_body(master, tmp_path: Path) -> None:
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    seq, _, _, _, body, _, _ = card_rows(con, card)[14]  # version 15: an ACTION1 of g1
    body = bytes(body)
    i = body.index(b'Z"') - 1  # the last digit of the timestamp's microseconds: still valid JSON
    changed = body[:i] + bytes([ord("0") + (body[i] - ord("0") + 1) % 10]) + body[i + 1 :]
    assert sum(a != b for a, b in zip(body, changed, strict=True)) == 1
    con.execute("UPDATE events SET body = ? WHERE seq = ?", (changed, seq))
    con.commit()
    con.close()
    code, doc = audit_json(db, card, *ENV)
    assert code == 1
    assert statuses(doc) == {"integrity": "FAIL", "consistency": "PASS", "resimulation": "PASS", "lifecycle": "PASS"}
    assert check(doc, "integrity")["problems"] == [
        {"version": 15, "seq": seq, "problem": "the stored bytes do not match the event's hash (the event was changed)"}
    ]
    code, out = run("--db", str(db), "audit", card)
    assert code == 1
    assert out.splitlines()[1] == (
        f"FAIL integrity: version 15 (seq {seq}): the stored bytes do not match the event's hash (the event was "
        "changed)"
    )
    code, out = run("--db", str(db), "verify")
    assert code == 1
    assert (
        f"FAIL card:{card}: version 15: the stored bytes do not match the event's hash (the event was changed)"
        in out.splitlines()
    )
    assert "FAIL append-only trigger missing: events_no_update" in out.splitlines()


def test_a_changed_action_id(master, tmp_path: Path) -> None:
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    seq, version, _, _, body, _, _ = card_rows(con, card)[13]
    ev = msgspec.json.decode(bytes(body), type=ActionTaken)
    assert (version, ev.action) == (14, 1)
    con.execute("UPDATE events SET body = ? WHERE seq = ?", (encode(msgspec.structs.replace(ev, action=2)), seq))
    con.commit()
    con.close()
    code, doc = audit_json(db, card, *ENV)
    assert code == 1
    # The scorecard does not count action ids, so consistency holds; the chain and the game both object.
    assert statuses(doc) == {"integrity": "FAIL", "consistency": "PASS", "resimulation": "FAIL", "lifecycle": "PASS"}
    assert _problem(doc) == (14, "the stored bytes do not match the event's hash (the event was changed)")
    div = check(doc, "resimulation")["divergence"]
    assert (div["version"], div["field"], div["expected"], div["recorded"]) == (16, "levels_completed", 1, 2)


def test_a_deleted_event(master, tmp_path: Path) -> None:
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    con.execute("DELETE FROM events WHERE stream = ? AND version = 20", (card_stream(card),))  # the ignored action
    con.commit()
    con.close()
    code, doc = audit_json(db, card, *ENV)
    assert code == 1
    assert statuses(doc)["integrity"] == "FAIL"
    assert _problem(doc) == (21, "version 21 follows version 19: 1 event(s) missing")
    # The document does not count ignored actions, but the cached projection covered version 38.
    assert check(doc, "consistency")["message"] == (
        "cached projection covers version 38, the log does not hold versions 1..38"
    )


def test_a_deleted_last_event_is_caught_by_the_expected_head(master, tmp_path: Path) -> None:
    db, card, _ = _copy(master, tmp_path)
    head = _head(db, card)
    con = raw(db)
    con.execute("DELETE FROM events WHERE stream = ? AND version = 38", (card_stream(card),))  # card_closed
    con.execute("DELETE FROM snapshots")
    con.commit()
    con.close()
    code, doc = audit_json(db, card, *ENV)
    # A chain that simply ends earlier is still a chain; the cards summary, derived from the log when it still held
    # the close, tells (as verify says), and the kept head tells without it.
    assert code == 1 and statuses(doc)["integrity"] == "PASS"
    assert check(doc, "consistency")["closed"] is False
    assert check(doc, "consistency")["message"].startswith("its row in the cards summary differs from a replay (")
    code, doc = audit_json(db, card, *ENV, "--expect-head", head)
    assert code == 1
    assert statuses(doc) == {"integrity": "FAIL", "consistency": "PASS", "resimulation": "PASS", "lifecycle": "PASS"}
    new_head = doc["head"]
    assert check(doc, "integrity")["message"] == (
        f"the log no longer ends at the expected head {head}: no event of this card has that hash (events changed "
        f"or removed; head now {new_head}); if that hash came from `ledger verify`, it is a ledger head, not a "
        "card's: check it with `ledger verify --expect-head`"
    )


def test_two_swapped_events(master, tmp_path: Path) -> None:
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    rows = card_rows(con, card)
    a, b = rows[11], rows[12]  # version 12 (ACTION2) and 13 (level_reset) trade places
    for mine, other in ((a, b), (b, a)):
        con.execute(
            "UPDATE events SET type = ?, ts = ?, body = ? WHERE seq = ?", (other[2], other[3], other[4], mine[0])
        )
    con.commit()
    con.close()
    code, doc = audit_json(db, card, *ENV)
    assert code == 1
    assert statuses(doc)["integrity"] == "FAIL"
    assert [(p["version"], p["problem"]) for p in check(doc, "integrity")["problems"]] == [
        (12, "the stored bytes do not match the event's hash (the event was changed)"),
        (13, "the stored bytes do not match the event's hash (the event was changed)"),
    ]


def test_two_rows_swapped_in_the_log_order(master, tmp_path: Path) -> None:
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    rows = card_rows(con, card)
    s28, s29 = rows[27][0], rows[28][0]
    con.execute("UPDATE events SET seq = -1 WHERE seq = ?", (s28,))
    con.execute("UPDATE events SET seq = ? WHERE seq = ?", (s28, s29))
    con.execute("UPDATE events SET seq = ? WHERE seq = -1", (s29,))
    con.commit()
    con.close()
    code, doc = audit_json(db, card)
    assert code == 1
    assert _problem(doc) == (29, f"stored before version 28 (seq {s28} < {s29}): events reordered")


def _forged_level_claim(events: list[AnyEvent], at: int) -> list[AnyEvent]:
    """events[at] (an action on level 0) now claims level 1, followed by the LevelCompleted the translator emits."""
    ev = events[at]
    assert isinstance(ev, ActionTaken) and ev.levels_completed == 0
    actions = 0  # the play's action count, as the translator would write it
    for e in events[: at + 1]:
        if isinstance(e, PlayStarted) and e.guid == ev.guid:
            actions = 0
        elif isinstance(e, ActionTaken | LevelReset) and e.guid == ev.guid:
            actions += 1
    claim = msgspec.structs.replace(ev, levels_completed=1)
    done = LevelCompleted(ts=ev.ts, game_id=ev.game_id, guid=ev.guid, levels_completed=1, actions=actions)
    return [*events[:at], claim, done, *events[at + 1 :]]


def test_forged_append_with_a_recomputed_chain(master, tmp_path: Path) -> None:
    db, _, card = _copy(master, tmp_path)  # the open card: 5 events
    head = _head(db, card)
    con = raw(db)
    rows = card_rows(con, card)
    last = card_events(con, card)[-1]
    assert isinstance(last, ActionTaken)
    forged = _forged_level_claim([*card_events(con, card), msgspec.structs.replace(last, action=2)], 5)[5:]
    insert_chained(con, card_stream(card), forged, 6, rows[-1][6])
    con.commit()
    con.close()
    code, doc = audit_json(db, card, *ENV)
    assert code == 1
    assert statuses(doc) == {"integrity": "PASS", "consistency": "PASS", "resimulation": "FAIL", "lifecycle": "PASS"}
    div = check(doc, "resimulation")["divergence"]
    assert (div["version"], div["action"], div["field"], div["expected"], div["recorded"]) == (
        6, "ACTION2", "levels_completed", 0, 1,
    )  # fmt: skip
    assert check(doc, "resimulation")["message"] == (
        f"first divergence at version 6 (seq {div['seq']}) ACTION2 on cnt3-0000000a guid {div['guid'][:8]}: "
        "expected levels_completed=0 (the game), recorded levels_completed=1"
    )
    code, doc = audit_json(db, card, "--expect-head", head)
    assert code == 1
    assert check(doc, "integrity")["message"] == (
        f"the log no longer ends at the expected head: that is version 5's hash and 2 event(s) follow it (head now "
        f"{doc['head']})"
    )
    assert check(doc, "integrity")["expected_head_version"] == 5


def test_forged_append_after_close_fails_consistency(master, tmp_path: Path) -> None:
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    events = card_events(con, card)
    rows = card_rows(con, card)
    extra = msgspec.structs.replace(events[28], ts=events[-1].ts)  # one more ACTION2 for g1, after the close
    insert_chained(con, card_stream(card), [extra], 39, rows[-1][6])
    con.commit()
    con.close()
    code, doc = audit_json(db, card, *ENV)
    assert code == 1
    assert statuses(doc)["integrity"] == "PASS"
    assert check(doc, "consistency")["message"] == (
        "1 event(s) after the card was closed at version 38 (first: version 39 action_taken)"
    )
    assert check(doc, "consistency")["events_after_close"] == 1


def test_an_edited_recording_claiming_a_level_is_caught_by_resimulation(master, tmp_path: Path) -> None:
    """A thorough forger: chain recomputed, close document hash recomputed, cache removed. Only the game objects."""
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    rewrite_card(con, card, lambda evs: _forged_level_claim(evs, 28))  # version 29: g1's second ACTION2 of play 2
    con.close()
    code, out = run("--db", str(db), "verify")
    assert code == 1 and out.splitlines()[:2] == [
        "FAIL append-only trigger missing: events_no_update",
        "FAIL append-only trigger missing: events_no_delete",
    ]  # every chain verifies: the log itself is self-consistent
    code, doc = audit_json(db, card, *ENV)
    assert code == 1
    assert statuses(doc) == {"integrity": "PASS", "consistency": "PASS", "resimulation": "FAIL", "lifecycle": "PASS"}
    assert check(doc, "consistency")["message"].endswith("; no cached projection")
    div = check(doc, "resimulation")["divergence"]
    assert (div["version"], div["action"], div["field"], div["expected"], div["recorded"]) == (
        29, "ACTION2", "levels_completed", 0, 1,
    )  # fmt: skip
    code, out = run("--db", str(db), "audit", card, *ENV)
    assert code == 1
    assert out.splitlines()[3] == (
        f"FAIL resimulation: first divergence at version 29 (seq {div['seq']}) ACTION2 on cnt3-0000000a guid "
        f"{div['guid'][:8]}: expected levels_completed=0 (the game), recorded levels_completed=1"
    )


def test_an_invented_level_completed_event_alone(master, tmp_path: Path) -> None:
    """Only a LevelCompleted added (the action left as the game answered it): the game produces no such event."""
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)

    def add_level(evs: list[AnyEvent]) -> list[AnyEvent]:
        claim = _forged_level_claim(evs, 28)
        return [*evs[:29], claim[29], *evs[29:]]

    rewrite_card(con, card, add_level)
    con.close()
    code, doc = audit_json(db, card, *ENV)
    assert code == 1
    assert statuses(doc)["resimulation"] == "FAIL"
    div = check(doc, "resimulation")["divergence"]
    assert (div["version"], div["field"], div["expected"], div["recorded"]) == (30, "type", None, "level_completed")
    assert div["message"] == (
        f"version 30 (seq {div['seq']}) level_completed after ACTION2 on cnt3-0000000a guid {div['guid'][:8]} "
        "(version 29): the recording has level_completed(levels_completed=1, actions=2), the game produces no "
        "such event"
    )


def test_tampering_on_both_backends(
    backend_ledger: Ledger, backend: str, backend_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    card, _ = play_disputed_card(backend_ledger)
    store = backend_ledger.store
    with store.engine.begin() as conn:
        if backend == "sqlite":
            conn.execute(text("DROP TRIGGER events_no_update"))
        else:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_no_update"))
        body = conn.execute(
            text("SELECT body FROM events WHERE stream = :s AND version = 14"), {"s": card_stream(card)}
        ).scalar_one()
        conn.execute(
            text("UPDATE events SET body = :b WHERE stream = :s AND version = 14"),
            {"b": bytes(body).replace(b'"action":1', b'"action":2'), "s": card_stream(card)},
        )
    code, doc = audit_json(backend_url, card, *ENV)
    assert code == 1
    assert statuses(doc) == {"integrity": "FAIL", "consistency": "PASS", "resimulation": "FAIL", "lifecycle": "PASS"}
    assert _problem(doc) == (14, "the stored bytes do not match the event's hash (the event was changed)")
    monkeypatch.setattr(audit_rows, "PAGE", 5)  # the rows read a page at a time: the same report
    assert audit_json(backend_url, card, *ENV) == (code, doc)


@pytest.mark.parametrize("version", [1, 2])
def test_a_body_that_no_longer_decodes(master, tmp_path: Path, version: int) -> None:
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    con.execute(
        "UPDATE events SET body = ? WHERE stream = ? AND version = ?", (b"{not json", card_stream(card), version)
    )
    con.commit()
    con.close()
    code, out = run("--db", str(db), "audit", card, *ENV)
    assert code == 1 and "Traceback" not in out
    code, doc = audit_json(db, card, *ENV)
    assert _problem(doc) == (version, "the stored bytes do not match the event's hash (the event was changed)")
    assert check(doc, "consistency")["message"] == "cannot rebuild the card: some events do not decode"


def test_a_changed_ts_column_which_the_hash_does_not_cover(master, tmp_path: Path) -> None:
    """The ``ts`` column is a copy of the body's ts for queries; the hash covers the body, so both must agree."""
    db, card, _ = _copy(master, tmp_path)
    con = raw(db)
    seq, _, _, ts, *_ = card_rows(con, card)[9]
    con.execute("UPDATE events SET ts = ? WHERE seq = ?", ("2020-01-01T00:00:00+00:00", seq))
    con.commit()
    con.close()
    code, doc = audit_json(db, card)
    assert code == 1
    assert check(doc, "integrity")["problems"] == [
        {
            "version": 10,
            "seq": seq,
            "problem": f"ts column 2020-01-01T00:00:00+00:00 differs from the event's own ts {ts}",
        }
    ]
    code, out = run("--db", str(db), "verify")
    assert code == 1
    assert (
        f"FAIL card:{card}: version 10: ts column '2020-01-01T00:00:00+00:00' differs from the event's ts {ts}"
        in out.splitlines()
    )
