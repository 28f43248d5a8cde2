"""``ledger copy``: every event with its hash, idempotent, streams continued exactly, conflicts refused.

The middle ledger of each round trip is every backend (see conftest): SQLite -> PostgreSQL -> SQLite must give
identical exports, chains and ledger head hashes.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.app.copying import CopyReport, copy_ledger, open_destination, open_source, plan_copy
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain.events import CardClosed, CardOpened, card_stream
from ledger.errors import HistoryConflict, SameLedger, StoreError
from ledger.store.base import LogStore
from ledger.store.tracking import read_mark
from tests.toolkit import arcade, play_random_card, step

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def log(store: LogStore) -> list[tuple[str, int, str, str, bytes, str, str]]:
    """The log in seq order without the seq itself (which a copy renumbers)."""
    return [(e.stream, e.version, e.type, e.ts, e.body, e.prev_hash, e.hash) for e in store.scan()]


def machine(path: Path, seed: int, cards: int = 2, close: bool = True) -> tuple[dict[str, str], object, Ledger]:
    """A machine's ledger with real captured play; returns the toolkit's JSON per card, the Arcade and the ledger."""
    rng = random.Random(seed)
    arc = arcade()
    led = Ledger.open(path)
    led.attach(arc)
    expected = {}
    for _ in range(cards):
        c = play_random_card(arc, rng, steps=rng.randint(20, 60))
        expected[c] = arc.close_scorecard(c).model_dump_json() if close else arc.get_scorecard(c).model_dump_json()
    return expected, arc, led


def copied(src_url: str, dst_url: str) -> CopyReport:
    src, dst = open_source(src_url), open_destination(dst_url)
    try:
        return copy_ledger(src, dst)
    finally:
        src.close()
        dst.close()


def test_round_trip_through_each_backend_is_identical(tmp_path: Path, backend_url: str) -> None:
    a_path, b_path = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    expected, _, led = machine(a_path, seed=7, cards=3)
    a_log = log(led.store)
    a_head = verify_ledger(led.store).head
    led.close()
    first = copied(str(a_path), backend_url)
    assert (first.events, first.new_streams, first.extended_streams, first.current_streams) == (len(a_log), 4, 0, 0)
    back = copied(backend_url, str(b_path))
    assert back.events == len(a_log)
    for where in (str(a_path), backend_url, str(b_path)):
        with Ledger.open(where) as lg:
            assert log(lg.store) == a_log  # same events, bytes, hashes and relative order
            rep = verify_ledger(lg.store)
            assert rep.ok, rep.errors
            assert rep.head == a_head
            assert {c: lg.export(c) for c in expected} == expected
            assert lg.card_ids() == list(expected)


def test_copy_again_copies_only_what_is_new(tmp_path: Path, backend_url: str) -> None:
    a_path = tmp_path / "a.sqlite"
    _, arc, led = machine(a_path, seed=11, cards=1, close=False)
    open_card = led.card_ids()[0]
    n1 = led.store.count()
    first = copied(str(a_path), backend_url)
    assert first.events == n1
    again = copied(str(a_path), backend_url)
    assert (again.events, again.new_streams, again.extended_streams, again.current_streams) == (0, 0, 0, 2)
    # The destination remembers where the finished copy ended: the source's last event (seq and hash), so a copy
    # with nothing to do reads no stream's head.
    with Ledger.open(backend_url) as team:
        last = list(led.store.scan())[-1]
        assert read_mark(team.store, led.store.describe()) == (last.seq, last.hash, 2)
    # The machine goes on: more steps on the open card, and a new card.
    env = arc.make("cnt3", scorecard_id=open_card)
    for a in [1, 1, 0, 1, 3]:
        step(env, a)
    final = arc.close_scorecard(open_card).model_dump_json()
    second = play_random_card(arc, random.Random(3), steps=25)
    second_json = arc.close_scorecard(second).model_dump_json()
    n2 = led.store.count()
    a_log = log(led.store)
    led.close()
    third = copied(str(a_path), backend_url)
    assert (third.events, third.new_streams, third.extended_streams, third.current_streams) == (n2 - n1, 1, 1, 1)
    with Ledger.open(backend_url) as team:
        assert team.export(open_card) == final
        assert team.export(second) == second_json
        assert log(team.store) == a_log
        assert verify_ledger(team.store).ok
    assert copied(str(a_path), backend_url).events == 0


def test_two_machines_into_one_team_ledger(tmp_path: Path, backend_url: str) -> None:
    exp_a, _, la = machine(tmp_path / "a.sqlite", seed=1)
    exp_b, _, lb = machine(tmp_path / "b.sqlite", seed=2)
    b_card_events = sum(s.count for s in lb.store.streams("card:"))
    # Both recorded the same content-addressed baseline set, each at its own time: that is the same set.
    assert la.baseline_set_ids() == lb.baseline_set_ids()
    la.close()
    lb.close()
    copied(str(tmp_path / "a.sqlite"), backend_url)
    rep_b = copied(str(tmp_path / "b.sqlite"), backend_url)
    assert (rep_b.new_streams, rep_b.current_streams) == (2, 1)
    with Ledger.open(backend_url) as team:
        assert set(team.card_ids()) == set(exp_a) | set(exp_b)
        assert {c: team.export(c) for c in team.card_ids()} == exp_a | exp_b
        assert verify_ledger(team.store).ok
    # And back to a machine: it gets the other machine's cards, and keeps its own baseline set event.
    rep = copied(backend_url, str(tmp_path / "a.sqlite"))
    assert (rep.events, rep.new_streams, rep.current_streams) == (b_card_events, 2, 3)
    with Ledger.open(tmp_path / "a.sqlite") as a:
        assert {c: a.export(c) for c in a.card_ids()} == exp_a | exp_b
        assert verify_ledger(a.store).ok


def test_labels_set_on_two_machines_merge_into_the_team_ledger(tmp_path: Path, backend_url: str) -> None:
    """Each label is its own stream: different labels never collide, the same label on the same set is the same
    history, and the same label on different sets is refused."""
    from ledger.app.baseline_sets import labels, set_label

    for name in ("a", "b", "c"):
        _, _, led = machine(tmp_path / f"{name}.sqlite", seed=1, cards=1)
        sid = led.baseline_set_ids()[0]
        set_label(led, f"only-{name}", sid)
        set_label(led, "shared", sid)
        led.close()
    copied(str(tmp_path / "a.sqlite"), backend_url)
    copied(str(tmp_path / "b.sqlite"), backend_url)
    with Ledger.open(backend_url) as team:
        assert {k: v.set_id for k, v in labels(team).items()} == {"only-a": sid, "only-b": sid, "shared": sid}
        assert verify_ledger(team.store).ok
    from ledger.domain.baselines import BaselineEntry

    with Ledger.open(tmp_path / "c.sqlite") as c:
        other = c.record_baselines([BaselineEntry(game_id="zz99-1", baseline_actions=[1])])
        set_label(c, "shared", other, move=True)
    with pytest.raises(HistoryConflict, match="label:shared"):
        copied(str(tmp_path / "c.sqlite"), backend_url)


def test_a_different_history_is_refused_and_nothing_is_written(tmp_path: Path, backend_url: str) -> None:
    a_path = tmp_path / "a.sqlite"
    _, _, led = machine(a_path, seed=5, cards=2)
    cards = led.card_ids()
    led.close()
    with Ledger.open(backend_url) as team:  # the team ledger already has a card of that id, with other events
        team.store.append(card_stream(cards[1]), [CardOpened(ts=T0, card_id=cards[1])], expected_version=0)
        before = log(team.store)
    src, dst = open_source(str(a_path)), open_destination(backend_url)
    with pytest.raises(HistoryConflict) as info:
        copy_ledger(src, dst)
    msg = str(info.value)
    assert f"already holds a different history for 1 stream of sqlite:///{a_path}" in msg
    assert f"card:{cards[1]} at version 1" in msg
    assert msg.endswith("Nothing was copied.")
    assert log(dst) == before
    src.close()
    dst.close()


def test_a_destination_ahead_with_the_same_history_is_fine(tmp_path: Path, backend_url: str) -> None:
    a_path = tmp_path / "a.sqlite"
    _, _, led = machine(a_path, seed=9, cards=1, close=False)
    card = led.card_ids()[0]
    led.close()
    copied(str(a_path), backend_url)
    with Ledger.open(backend_url) as team:  # the card goes on in the team ledger only
        v = team.store.streams(card_stream(card))[0].version
        team.store.append(card_stream(card), [CardClosed(ts=T0, reason="explicit")], expected_version=v)
    src, dst = open_source(str(a_path)), open_destination(backend_url)
    plan = plan_copy(src, dst)
    assert (plan.events, plan.current_streams) == (0, 2)
    src.close()
    dst.close()


def test_insert_copied_skips_rows_already_held_and_refuses_gaps(tmp_path: Path, backend_url: str) -> None:
    a_path = tmp_path / "a.sqlite"
    _, _, led = machine(a_path, seed=4, cards=1)
    rows = list(led.store.scan())
    led.close()
    dst = open_destination(backend_url)
    assert dst.insert_copied(rows[:5]) == 5
    assert dst.insert_copied(rows[:8]) == 3  # a copy run twice at once: the rows already there are skipped
    stream = rows[-1].stream
    tail = [r for r in rows if r.stream == stream][-2:]
    with pytest.raises(StoreError, match="does not continue the destination"):
        dst.insert_copied(tail)
    forged = msgspec.structs.replace(rows[6], hash="0" * 64)
    with pytest.raises(HistoryConflict, match=f"holds a different event at version {rows[6].version}"):
        dst.insert_copied([*rows[:5], forged, *rows[8:10]])
    assert [e.hash for e in dst.scan()] == [r.hash for r in rows[:8]]
    dst.close()


def test_a_prepared_batch_is_checked_row_by_row_under_the_lock(tmp_path: Path, backend_url: str) -> None:
    # ``ledger copy`` prepares each batch (hashes recomputed, rows encoded) before the destination is locked; the
    # destination still refuses a row whose bytes do not match its hash, and one that does not continue its stream.
    a_path = tmp_path / "a.sqlite"
    _, _, led = machine(a_path, seed=5, cards=2)
    rows = list(led.store.scan())
    led.close()
    dst = open_destination(backend_url)
    changed = msgspec.structs.replace(rows[9], body=rows[9].body + b" ")
    batch = dst.prepare_copied([*rows[:9], changed, *rows[10:]])
    assert batch.unhashed == 9
    with pytest.raises(StoreError, match="the stored bytes do not match the event's hash"):
        dst.insert_copied(batch)
    relinked = msgspec.structs.replace(rows[9], prev_hash=rows[7].hash)
    with pytest.raises(StoreError, match="does not continue the destination"):
        dst.insert_copied(dst.prepare_copied([*rows[:9], relinked]))
    assert dst.count() == 0
    assert dst.insert_copied(dst.prepare_copied(rows[:4])) == 4
    assert dst.insert_copied(dst.prepare_copied(rows)) == len(rows) - 4  # held rows skipped, the rest encoded again
    assert log(dst) == [(e.stream, e.version, e.type, e.ts, e.body, e.prev_hash, e.hash) for e in rows]
    assert verify_ledger(dst).ok  # the chains, and the summary rows equal to a rebuild from the log
    dst.close()


def test_a_copy_stops_at_the_first_batch_that_does_not_hold(tmp_path: Path, backend_url: str) -> None:
    # Batches are read and prepared ahead of the writes: a row whose stored bytes were changed in the source stops
    # the copy with its reason at that row's batch; the batches before it are committed, whole, and nothing after.
    import sqlite3

    from ledger.app import synthetic

    a_path = tmp_path / "a.sqlite"
    with Ledger.open(a_path) as led:
        synthetic.write_cards(led, 40, seed=3)
        rows = list(led.store.scan())
    victim = rows[len(rows) // 2]
    con = sqlite3.connect(a_path)
    con.execute("DROP TRIGGER IF EXISTS events_no_update")
    con.execute("UPDATE events SET body = ? WHERE seq = ?", (victim.body + b" ", victim.seq))
    con.commit()
    con.close()
    src, dst = open_source(str(a_path)), open_destination(backend_url)
    with pytest.raises(StoreError, match=f"event version {victim.version} does not continue.*do not match"):
        copy_ledger(src, dst, batch=50)
    held = dst.count()
    assert held % 50 == 0 and 0 < held <= rows.index(victim)
    assert log(dst) == [(e.stream, e.version, e.type, e.ts, e.body, e.prev_hash, e.hash) for e in rows[:held]]
    assert verify_ledger(dst).ok
    src.close()
    dst.close()


def test_copy_into_itself_or_from_nothing_is_refused(tmp_path: Path) -> None:
    a_path = tmp_path / "a.sqlite"
    Ledger.open(a_path).close()
    src, dst = open_source(str(a_path)), open_destination(str(a_path))
    with pytest.raises(SameLedger):
        plan_copy(src, dst)
    src.close()
    dst.close()
    with pytest.raises(StoreError, match="no ledger at"):
        open_source(str(tmp_path / "missing.sqlite"))
    assert not (tmp_path / "missing.sqlite").exists()


def test_cli_copy(tmp_path: Path, backend_url: str) -> None:
    a_path = tmp_path / "a.sqlite"
    expected, _, led = machine(a_path, seed=21, cards=1)
    n = led.store.count()
    led.close()
    runner = CliRunner()
    res = runner.invoke(cli, ["copy", "--from", str(a_path), "--to", backend_url, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["events"], out["new_streams"], out["extended_streams"], out["current_streams"]) == (n, 2, 0, 0)
    assert out["from"] == f"sqlite:///{a_path}"
    res = runner.invoke(cli, ["--db", str(a_path), "copy", "--to", backend_url])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("nothing to copy: ")
    card = next(iter(expected))
    res = runner.invoke(cli, ["--db", backend_url, "export", card])
    assert res.output.rstrip("\n") == expected[card]
    res = runner.invoke(cli, ["--db", backend_url, "verify", "--json"])
    assert json.loads(res.output)["ok"] is True
    res = runner.invoke(cli, ["copy", "--from", str(a_path), "--to", str(a_path)])
    assert (res.exit_code, res.output.strip()) == (
        2,
        f"Error: the source and the destination are the same ledger (sqlite:///{a_path})",
    )
    res = runner.invoke(cli, ["copy", "--from", str(tmp_path / "none.sqlite"), "--to", backend_url])
    assert (res.exit_code, res.output.strip()) == (
        1,
        f"Error: no ledger at {tmp_path / 'none.sqlite'} (create one with `ledger init`)",
    )
    other = tmp_path / "other.sqlite"
    with Ledger.open(other) as o:
        o.store.append(card_stream(card), [CardOpened(ts=T0, card_id=card)], expected_version=0)
    res = runner.invoke(cli, ["copy", "--from", str(other), "--to", backend_url])
    assert res.exit_code == 1
    assert "already holds a different history for 1 stream" in res.output
    assert "Traceback" not in res.output


def test_rows_the_binary_copy_cannot_carry_are_sent_as_text(pg_url: str) -> None:
    # The binary COPY data is built for rows of the usual shape; any other row makes the whole batch go as text
    # rows, and the server's own checks (here the ts column's length) refuse it with their reason.
    from ledger.domain.chain import GENESIS, event_hash
    from ledger.store.base import StoredEvent
    from ledger.store.postgres import encode_rows

    h = event_hash(GENESIS, "card:x", 1, "card_opened", b"{}")
    row = StoredEvent(0, "card:x", 1, "card_opened", T0.isoformat(), b"{}", GENESIS, h)
    assert encode_rows([row]) is not None
    for bad in (
        msgspec.structs.replace(row, version=2**31),
        msgspec.structs.replace(row, version=-1),
        msgspec.structs.replace(row, ts="t" * 200),
        msgspec.structs.replace(row, ts="2026-01-01T00:00:00\u00e9"),
        msgspec.structs.replace(row, body="{}"),
    ):
        assert encode_rows([row, bad]) is None
    dst = open_destination(pg_url)
    batch = dst.prepare_copied([msgspec.structs.replace(row, ts="t" * 200)])
    assert batch.unhashed is None and batch.encoded is None  # the ts is not hashed: the chain holds
    with pytest.raises(StoreError, match="value too long"):
        dst.insert_copied(batch)
    assert dst.count() == 0
    assert dst.insert_copied(dst.prepare_copied([row])) == 1
    dst.close()


def test_a_copy_into_postgresql_leaves_the_planner_statistics(tmp_path: Path, pg_url: str) -> None:
    # A ledger filled by COPY has no statistics until autovacuum runs: the planner then reads every card of a tag
    # for a page of them. The copy ANALYZEs the tables the lists read (reltuples is -1 before any ANALYZE).
    from sqlalchemy import create_engine

    machine(tmp_path / "a.sqlite", seed=11)[2].close()
    report = copied(str(tmp_path / "a.sqlite"), pg_url)
    assert report.events > 0
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        tuples = dict(
            conn.exec_driver_sql(
                "SELECT relname, reltuples FROM pg_class "
                "WHERE relname IN ('events', 'card_summary', 'card_summary_keys')"
            ).all()
        )
    engine.dispose()
    assert tuples["events"] == report.events
    assert tuples["card_summary"] == 2
    assert set(tuples) == {"events", "card_summary", "card_summary_keys"}
    assert all(n >= 0 for n in tuples.values())
