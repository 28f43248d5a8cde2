"""A ledger written by the first schema revision, upgraded by the current migrations: nothing lost or changed.

tests/fixtures/first_schema.sqlite was written at revision 0001 (by scripts/make_first_schema_fixture.py, now in
the git history only); beside it are the (seq, stream, version, type, hash) of every event and the JSON the toolkit
reported for each card. A copy is upgraded to head and compared against both.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.domain.events import CardOpened, card_stream, decode
from ledger.store.base import LogStore
from tests.toolkit import arcade, step

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE = FIXTURES / "first_schema.sqlite"


@pytest.fixture
def old_ledger(tmp_path: Path) -> Path:
    """A copy of the fixture (the committed file is never opened for writing)."""
    copy = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, copy)
    return copy


def listing(store: LogStore) -> list[list]:
    return [[r.seq, r.stream, r.version, r.type, r.hash] for r in store.scan()]


def test_the_fixture_is_at_the_first_revision(old_ledger: Path) -> None:
    con = sqlite3.connect(old_ledger)
    assert con.execute("SELECT version_num FROM alembic_version").fetchall() == [("0001",)]
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"alembic_version", "events"}
    con.close()


def test_upgrade_keeps_every_event_and_hash(old_ledger: Path) -> None:
    expected = json.loads((FIXTURES / "first_schema.events.json").read_text())
    exports = json.loads((FIXTURES / "first_schema.exports.json").read_text())
    bodies = {r[0]: bytes(r[1]) for r in sqlite3.connect(old_ledger).execute("SELECT seq, body FROM events")}
    with Ledger.open(old_ledger) as led:  # migrates to head
        store = led.store
        assert store.revision() == store.head_revision() != "0001"
        assert listing(store) == expected
        assert {r.seq: r.body for r in store.scan()} == bodies  # the stored bytes, not only their hashes
        assert store.missing_triggers() == []
        report = verify_ledger(store)
        assert report.ok, report.errors
        assert report.events == len(expected)
        assert sorted(led.card_ids()) == sorted(exports)
        for card, toolkit_json in exports.items():
            assert led.export(card) == toolkit_json
        opened = decode(store.read_stream(card_stream(next(iter(led.card_ids()))))[0].body)
        assert isinstance(opened, CardOpened) and (opened.api_key_fingerprint or "").startswith("sha256$")
    # Opening it again changes nothing.
    with Ledger.open(old_ledger) as led:
        assert listing(led.store) == expected


def test_upgraded_ledger_is_still_append_only_and_takes_new_cards(old_ledger: Path) -> None:
    with Ledger.open(old_ledger) as led:
        head = verify_ledger(led.store).head
        arc = arcade()
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        for a in (1, 1, 2, 1):
            step(env, a)
        closed = arc.close_scorecard(card).model_dump_json()
        assert led.export(card) == closed
        report = verify_ledger(led.store)
        assert report.ok and report.head != head
    con = sqlite3.connect(old_ledger)
    con.execute("PRAGMA recursive_triggers=ON")
    with pytest.raises(sqlite3.IntegrityError, match="append-only: UPDATE refused"):
        con.execute("UPDATE events SET body = x'00' WHERE seq = 2")
    with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE refused"):
        con.execute("DELETE FROM events WHERE seq = 2")
    # 0005's triggers: the Merkle tree's tables grow only.
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {f"merkle_{t}_no_{v}" for t in ("nodes", "runs") for v in ("update", "delete")} <= names
    with pytest.raises(sqlite3.IntegrityError, match="the Merkle tree is append-only: UPDATE on tracking"):
        con.execute("UPDATE tracking SET n = n - 1 WHERE name = 'merkle'")
    with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):  # 0002's constraints hold too
        con.execute(
            "INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) "
            "VALUES ('s', 0, 't', 'x', x'', '', '')"
        )
    con.close()
