"""A column of the wrong type or shape (a database that stores whatever it is given: SQLite) is reported as a FAIL
naming the event by `ledger verify` and `ledger audit`, never a crash of the reporter."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from ledger import Ledger
from ledger.app import card_rows as audit_rows
from ledger.domain.events import card_stream
from ledger.errors import StoreError
from tests.cli_run import in_process as ledger
from tests.cli_run import no_traceback
from tests.test_audit import audit_json, build_master, card_rows, copy_ledger, play_disputed_card, raw
from tests.toolkit import ENV_DIR


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    """One real ledger file for the module (each test tampers with a copy)."""
    return build_master(tmp_path_factory)


def _rewrites(body: bytes, hash_: str) -> list[tuple[str, object]]:
    """(column, a value of the wrong type or shape) pairs for one event."""
    return [
        ("body", body.decode()),  # the same JSON, as TEXT instead of a BLOB
        ("body", 12345),
        ("body", 1.5),
        ("version", 10.5),
        ("version", b"10"),  # a blob sorts after every number: the event is read last
        ("type", b"action_taken"),
        ("ts", b"2024-01-01T00:00:00+00:00"),
        ("prev_hash", bytes.fromhex(hash_) * 2),
        ("prev_hash", "z" * 64),
        ("hash", hash_.upper()),
        ("hash", 10**18),
    ]


def rewrite_row(
    src: Path, dst: Path, card: str, column: str, value: object, *, index: int = 9, snapshots: bool = True
) -> int:
    """A copy ``dst`` of the ledger ``src`` whose ``index``-th event of ``card`` holds ``value`` in ``column``,
    written behind the append-only triggers and the schema's checks (what an attacker with the file does); without
    ``snapshots`` the cached projections go too (else they would answer for the events they cover). Its seq."""
    copy_ledger(src, dst)
    con = raw(dst)
    seq = int(card_rows(con, card)[index][0])
    con.execute("PRAGMA ignore_check_constraints = ON")  # the schema's length checks: an attacker skips them too
    con.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (value, seq))
    if not snapshots:
        con.execute("DELETE FROM snapshots")
    con.commit()
    con.close()
    return seq


CASES = list(range(11))


@pytest.mark.parametrize("case", CASES)
def test_a_column_of_the_wrong_type_is_a_fail_naming_the_event(master, tmp_path: Path, case: int) -> None:
    src, card, _, _ = master
    con = sqlite3.connect(src)
    _, version, _, _, body, _, hash_ = card_rows(con, card)[9]
    con.close()
    assert version == 10
    column, value = _rewrites(bytes(body), hash_)[case]
    db = tmp_path / "tampered.sqlite"
    seq = rewrite_row(src, db, card, column, value)
    r = ledger("--db", str(db), "verify")
    no_traceback(r)
    assert r.returncode == 1
    fail = next(line for line in r.stdout.splitlines() if line.startswith("FAIL card:"))
    assert f"(seq {seq})" in fail and f"{column} column holds" in fail, fail
    r = ledger("--db", str(db), "audit", card, "--json")
    no_traceback(r)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    integrity = next(c for c in doc["checks"] if c["name"] == "integrity")
    assert integrity["status"] == "FAIL"
    named = [p for p in integrity["problems"] if p["seq"] == seq]
    assert len(named) == 1 and named[0]["problem"].startswith(f"{column} column holds "), integrity["problems"]
    if column != "version":
        assert named[0]["version"] == 10
    r = ledger("--db", str(db), "audit", card)
    no_traceback(r)
    assert r.returncode == 1 and "FAIL integrity" in r.stdout.replace(":", ""), r.stdout


def _deleted(src: Path, dst: Path, card: str) -> None:
    copy_ledger(src, dst)
    con = raw(dst)
    con.execute("DELETE FROM events WHERE seq = ?", (int(card_rows(con, card)[20][0]),))
    con.commit()
    con.close()


@pytest.mark.parametrize("case", [*CASES, "deleted", "untouched"])
def test_the_audit_reads_the_rows_a_page_at_a_time_and_says_the_same(
    master, tmp_path: Path, case: int | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 1, 5 and 38 rows (the card's 38 events: a last page that is full, then an empty read) give the
    report one read of every row gives, whatever was done to a row: a wrong type, a version that sorts last, a
    deleted event, nothing; with the expected head too."""
    src, card, _, _ = master
    db = tmp_path / "tampered.sqlite"
    if case == "deleted":
        _deleted(src, db, card)
    elif case == "untouched":
        copy_ledger(src, db)
    else:
        con = sqlite3.connect(src)
        _, _, _, _, body, _, hash_ = card_rows(con, card)[9]
        con.close()
        rewrite_row(src, db, card, *_rewrites(bytes(body), hash_)[int(case)])
    con = sqlite3.connect(db)
    head = card_rows(con, card)[30][6]
    con.close()
    args = ("--environments", str(ENV_DIR), "--expect-head", str(head))
    whole = audit_json(db, card, *args)
    assert whole[0] == 1  # the expected head is not the last one
    for page in (1, 5, 38):
        monkeypatch.setattr(audit_rows, "PAGE", page)
        assert audit_json(db, card, *args) == whole, page


@pytest.mark.parametrize("page", [1, 4, 38])
def test_the_audit_reads_a_cards_events_again_as_a_list_of_them_would_give_them(master, page: int) -> None:
    """The checks after integrity read the card's events again a page at a time (CardEvents): by place, from the
    end, in slices, forwards and backwards, the events a list of the rows that decoded gives, whichever rows did
    not (their places skipped), across page edges."""
    from ledger.domain.events import decode

    src, card, _, _ = master
    with Ledger.open(src) as led:
        rows = led.store.read_stream(card_stream(card))
        for missing in ([], [0], [3, 4, 5], [9, 37], list(range(0, 38, 2))):
            held = [(r.version, r.seq, decode(r.body)) for i, r in enumerate(rows) if i not in missing]
            events = audit_rows.CardEvents(led.store, card_stream(card), len(rows), missing, page)
            assert len(events) == len(held) and [tuple(n) for n in events] == held
            assert [tuple(events[i]) for i in range(-len(held), len(held))] == held + held
            for a, b in ((0, 0), (2, 9), (5, 100), (-7, -1), (len(held) - 1, len(held))):
                span = events[a:b]
                assert [tuple(n) for n in span] == held[a:b] and len(span) == len(held[a:b])
                assert [tuple(n) for n in reversed(span)] == held[a:b][::-1]
                assert [tuple(span[i]) for i in range(len(span))] == held[a:b]
            assert [tuple(n) for n in events[1:20:3]] == held[1:20:3]
            with pytest.raises(IndexError):
                events[len(held)]
        # Rows that went away between two reads (removed outside the ledger): said, not walked past for ever.
        gone = audit_rows.CardEvents(led.store, card_stream(card), len(rows) + 1, [], page)
        with pytest.raises(StoreError, match="changed while they were read"):
            list(gone)


@pytest.mark.postgres
def test_a_hash_of_the_wrong_shape_on_postgresql(pg_url: str) -> None:
    """PostgreSQL's column types refuse most rewrites; a hash of the wrong shape still fits its text column."""
    with Ledger.open(pg_url) as led:
        card, _ = play_disputed_card(led)
        with led.store.engine.begin() as conn:  # type: ignore[attr-defined]
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_no_update"))
            conn.execute(text("ALTER TABLE events DROP CONSTRAINT ck_events_hash"))
            conn.execute(
                text("UPDATE events SET hash = 'not-a-hash' WHERE stream = :s AND version = 10"),
                {"s": card_stream(card)},
            )
    for args in (("verify",), ("audit", card)):
        r = ledger("--db", pg_url, *args)
        no_traceback(r)
        assert r.returncode == 1 and "hash column holds str 'not-a-hash'" in r.stdout, r.stdout


def test_a_stream_column_of_the_wrong_type(master, tmp_path: Path) -> None:
    """The row leaves its card's stream: verify names it as a stream of its own that fails, the card's audit sees
    the gap it leaves."""
    src, card, _, _ = master
    db = tmp_path / "tampered.sqlite"
    seq = rewrite_row(src, db, card, "stream", card_stream(card).encode())
    r = ledger("--db", str(db), "verify")
    no_traceback(r)
    assert r.returncode == 1
    assert f"seq {seq}: stream column holds bytes b'card:" in r.stdout, r.stdout
    r = ledger("--db", str(db), "audit", card)
    no_traceback(r)
    assert r.returncode == 1 and "version 11 follows version 9: 1 event(s) missing" in r.stdout, r.stdout


@pytest.mark.parametrize("body", [12345, b"\x00\xff not an event"])
def test_every_reader_of_a_tampered_card_says_so_in_one_line(master, tmp_path: Path, body: object) -> None:
    src, card, _, _ = master
    db = tmp_path / "tampered.sqlite"
    rewrite_row(src, db, card, "body", body, snapshots=False)
    # `cards` reads the cards summary (written when the events were appended), not the events: it still lists the
    # card; `verify` is what finds the rewritten row (test_a_column_of_the_wrong_type_is_a_fail_naming_the_event).
    listed = ledger("--db", str(db), "cards")
    no_traceback(listed)
    assert listed.returncode == 0 and card in listed.stdout
    for args in (["export", card], ["replay", card], ["bundle", card, "-o", str(tmp_path / "site")]):
        r = ledger("--db", str(db), *args)
        no_traceback(r)
        assert r.returncode == 1 and r.stderr == (
            f"Error: card {card} cannot be read: a stored event does not decode ("
            + r.stderr.split(" does not decode (", 1)[1]
        )
        assert r.stderr.endswith(f"`ledger audit {card}` says which one\n") and r.stderr.count("\n") == 1
    r = ledger("--db", str(db), "events", card)  # the events are still listed, the bad one said to be bad
    no_traceback(r)
    assert r.returncode == 0 and "body does not decode" in r.stdout
