"""The log on SQLite: append-only in the database itself, the hash chain, the cache is only a cache."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.domain.events import card_stream
from ledger.store.backends import open_store
from tests.toolkit import arcade, step


def played_ledger(path: Path) -> str:
    """A ledger with one closed card of real play; returns the card id."""
    arc = arcade()
    with Ledger.open(path) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        env = arc.make("cnt3", scorecard_id=card)
        for a in [1, 1, 2, 1, 0, 1, 1, 1, 3, 1]:
            step(env, a)
        arc.close_scorecard(card)
    return card


def test_update_delete_replace_are_refused_by_the_database(db_path: Path) -> None:
    played_ledger(db_path)
    con = sqlite3.connect(db_path)
    con.execute("PRAGMA recursive_triggers=ON")
    (n,) = con.execute("SELECT count(*) FROM events").fetchone()
    with pytest.raises(sqlite3.IntegrityError, match="append-only: UPDATE refused"):
        con.execute("UPDATE events SET body = x'00' WHERE seq = 3")
    with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE refused"):
        con.execute("DELETE FROM events WHERE seq = 3")
    row = con.execute("SELECT seq, stream, version, type, ts, body, prev_hash, hash FROM events WHERE seq=3").fetchone()
    with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE refused"):
        con.execute("INSERT OR REPLACE INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (*row[:5], b"{}", *row[6:]))
    con.rollback()
    assert con.execute("SELECT count(*) FROM events").fetchone() == (n,)
    assert con.execute("SELECT body FROM events WHERE seq = 3").fetchone()[0] == row[5]


def test_triggers_exist_after_latest_migration(db_path: Path) -> None:
    with Ledger.open(db_path) as led:
        assert led.store.revision() == led.store.head_revision()
        assert led.store.triggers() == {"events_no_update", "events_no_delete"}
        assert led.store.missing_triggers() == []


def test_upgrade_from_first_revision_keeps_events_and_triggers(db_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    from ledger.store.base import migrations_dir

    store = open_store(str(db_path))
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    assert store.revision() == "0001"
    from datetime import UTC, datetime

    from ledger.domain.events import CardOpened

    stored = store.append(card_stream("c1"), [CardOpened(ts=datetime(2026, 1, 1, tzinfo=UTC), card_id="c1")], 0)
    store.migrate()  # 0002 rebuilds the table in batch mode
    assert store.revision() == store.head_revision()
    assert store.missing_triggers() == []
    assert store.read_stream(card_stream("c1")) == stored
    store.close()


def test_verify_walks_every_link_and_detects_a_changed_body(tmp_path: Path) -> None:
    good = tmp_path / "good.sqlite"
    played_ledger(good)
    with Ledger.open(good) as led:
        rep = verify_ledger(led.store)
        assert rep.ok, rep.errors
        head = rep.head
    bad = tmp_path / "bad.sqlite"
    shutil.copy(good, bad)
    con = sqlite3.connect(bad)
    con.execute("DROP TRIGGER events_no_update")
    body = con.execute("SELECT body FROM events WHERE seq = 5").fetchone()[0]
    con.execute("UPDATE events SET body = ? WHERE seq = 5", (body.replace(b'"action":1', b'"action":2'),))
    con.commit()
    con.close()
    with Ledger.open(bad) as led:
        rep = verify_ledger(led.store)
    assert not rep.ok
    assert any("the stored bytes do not match the event's hash" in e for e in rep.errors)
    assert "append-only trigger missing: events_no_update" in rep.errors
    assert rep.head != head


def test_vacuum_keeps_seq(db_path: Path) -> None:
    card = played_ledger(db_path)
    with Ledger.open(db_path) as led:
        before = led.store.read_stream(card_stream(card))
    con = sqlite3.connect(db_path, isolation_level=None)
    con.execute("VACUUM")
    con.close()
    with Ledger.open(db_path) as led:
        assert led.store.read_stream(card_stream(card)) == before


def test_dropping_the_cache_changes_nothing(db_path: Path) -> None:
    card = played_ledger(db_path)
    with Ledger.open(db_path) as led:
        assert led.cached_card(card) is not None  # written at close
        warm = led.export(card)
        cold_state = led.load_card(card, use_cache=False)
        assert led.document(card, card=cold_state) == led.document(card)
        led.store.drop_snapshots()
        assert led.cached_card(card) is None
        assert led.export(card) == warm
    con = sqlite3.connect(db_path)
    con.execute("DROP TABLE snapshots")
    con.commit()
    con.close()
    with Ledger.open(db_path) as led:  # a damaged cache table must not stop reads of the log
        assert json.loads(led.export(card))["card_id"] == card


def test_version_conflict_between_two_writers(db_path: Path) -> None:
    from datetime import UTC, datetime

    from ledger.domain.events import CardOpened, Win
    from ledger.errors import VersionConflict

    ts = datetime(2026, 1, 1, tzinfo=UTC)
    a, b = open_store(str(db_path)), open_store(str(db_path))
    a.migrate()
    a.append("card:x", [CardOpened(ts=ts, card_id="x")], expected_version=0)
    with pytest.raises(VersionConflict):
        b.append("card:x", [CardOpened(ts=ts, card_id="x")], expected_version=0)
    b.append("card:x", [Win(ts=ts, game_id="g", guid="u")], expected_version=1)
    with pytest.raises(VersionConflict):  # a's cached head (version 1) is stale: UNIQUE(stream, version) says so
        a.append("card:x", [Win(ts=ts, game_id="g", guid="v")], expected_version=1)
    a.append("card:x", [Win(ts=ts, game_id="g", guid="v")], expected_version=2)
    assert [e.version for e in a.read_stream("card:x")] == [1, 2, 3]
    assert verify_ledger(a).ok
    a.close()
    b.close()


def test_cached_projection_equals_full_replay_at_every_cut(db_path: Path) -> None:
    """A snapshot is used only up to the point asked for; every cut gives what a full replay gives."""
    arc = arcade()
    rng = __import__("random").Random(5)
    from tests.toolkit import random_action

    with Ledger.open(db_path) as led:
        led.attach(arc)
        card = arc.open_scorecard()
        envs = [arc.make(g, scorecard_id=card, seed=1) for g in ("cnt3", "clk2", "cnt3")]
        for _ in range(2500):
            env = rng.choice(envs)
            a, x, y = random_action(rng, env)
            step(env, a, x, y)
        led.store.drop_snapshots()
        full = led.export(card)
        assert led.cached_card(card) is not None  # that read folded > SNAPSHOT_AFTER events and cached them
        assert led.export(card) == full == arc.get_scorecard(card).model_dump_json()
        rows = led.store.read_stream(card_stream(card))
        for cut in [rows[10].seq, rows[len(rows) // 2].seq, rows[-2].seq, rows[-1].seq]:
            cold = led.load_card(card, until=cut, use_cache=False)
            assert led.document(card, until=cut) == led.document(card, card=cold)


def test_a_batch_append_returns_the_rows_as_stored(db_path: Path) -> None:
    from datetime import UTC, datetime

    from ledger.domain.events import CardOpened, Win

    ts = datetime(2026, 1, 1, tzinfo=UTC)
    store = open_store(str(db_path))
    store.migrate()
    store.append("card:other", [CardOpened(ts=ts, card_id="other")], expected_version=0)
    batch = store.append(
        "card:y", [CardOpened(ts=ts, card_id="y")] + [Win(ts=ts, game_id="g", guid=str(i)) for i in range(4)], 0
    )
    assert batch == store.read_stream("card:y")
    assert [e.seq for e in batch] == [2, 3, 4, 5, 6]
    store.close()
