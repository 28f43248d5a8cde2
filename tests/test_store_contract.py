"""The store's contract: ONE suite, run against every backend (SQLite file and PostgreSQL, see conftest).

Appends and versions, optimistic concurrency, append-only enforcement by the database itself, the hash chain and
``verify_ledger``, migrations (from empty, from earlier revisions, one step down and up again), and parity of
exports with the toolkit for real games played with the ledger attached.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain import chain as chain_mod
from ledger.domain.events import ActionTaken, CardOpened, Win, card_stream, encode
from ledger.errors import VersionConflict
from ledger.store.backends import open_store
from ledger.store.base import APPEND_CHUNK, APPEND_ONLY_TRIGGERS, LogStore, Snapshot, StoredEvent, migrations_dir
from tests.toolkit import arcade, play_random_card, step

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def opened(card_id: str) -> CardOpened:
    return CardOpened(ts=T0, card_id=card_id)


def act(i: int, guid: str = "g1") -> ActionTaken:
    return ActionTaken(
        ts=T0 + timedelta(seconds=i), game_id="cnt3-0000000a", guid=guid, action=1, levels_completed=0,
        state="NOT_FINISHED",
    )  # fmt: skip


def rows(store: LogStore) -> list[StoredEvent]:
    return list(store.scan())


def alembic(store: LogStore, cmd: str, revision: str) -> None:
    """Run ``alembic upgrade|downgrade REVISION`` on the store's database."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    # IMMEDIATE on SQLite, as the store's own migrations: the store's summary follower may commit meanwhile.
    with store.engine.execution_options(ledger_immediate=True).begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, cmd)(cfg, revision)


def assert_same(arc, led: Ledger, card_id: str) -> None:
    assert led.export(card_id) == arc.get_scorecard(card_id).model_dump_json()


@pytest.fixture
def store(backend_url: str):
    s = open_store(backend_url)
    s.migrate()
    yield s
    s.close()


# -- appends ------------------------------------------------------------------------------------------------


def test_append_numbers_versions_links_the_chain_and_orders_seq(store: LogStore) -> None:
    a = store.append(card_stream("a"), [opened("a"), act(1), act(2)], expected_version=0)
    b = store.append(card_stream("b"), [opened("b")], expected_version=0)
    a4 = store.append(card_stream("a"), [Win(ts=T0, game_id="cnt3-0000000a", guid="g1")], expected_version=3)
    assert [(e.seq, e.version) for e in a] == [(1, 1), (2, 2), (3, 3)]
    assert [(e.seq, e.version) for e in b + a4] == [(4, 1), (5, 4)]
    prev = chain_mod.GENESIS
    for e in [*a, *a4]:
        assert e.prev_hash == prev
        assert e.hash == chain_mod.event_hash(prev, e.stream, e.version, e.type, e.body)
        prev = e.hash
    assert [e.body for e in a] == [encode(opened("a")), encode(act(1)), encode(act(2))]
    assert store.read_stream(card_stream("a")) == [*a, *a4]
    assert store.read_stream(card_stream("a"), after_version=2, until_seq=4) == [a[2]]
    assert store.read_bodies(card_stream("a")) == ([e.body for e in [*a, *a4]], 4, 5)
    assert [(e.stream, e.version) for e in rows(store)] == [
        ("card:a", 1), ("card:a", 2), ("card:a", 3), ("card:b", 1), ("card:a", 4),
    ]  # fmt: skip
    assert [e.seq for e in store.scan(after_seq=3, batch=1)] == [4, 5]
    infos = store.streams()
    assert [(s.stream, s.count, s.version, s.head, s.first_seq, s.last_seq) for s in infos] == [
        ("card:a", 4, 4, a4[0].hash, 1, 5),
        ("card:b", 1, 1, b[0].hash, 4, 4),
    ]
    assert [s.stream for s in store.streams("card:b")] == ["card:b"]
    assert (store.max_seq(), store.count()) == (5, 5)
    assert store.stream_exists("card:b") and not store.stream_exists("card:c")
    assert store.event_at("card:a", 2) == a[1]
    assert store.event_at("card:a", 9) is None


def test_an_append_that_returns_its_last_event_writes_what_a_whole_one_writes(
    store: LogStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import's card is appended a chunk at a time (its rows never all held): the same rows, one transaction.
    On PostgreSQL a large whole append sends its INSERTs one after another, not in one pipeline (made small here
    so that both ways run)."""
    from ledger.store import postgres

    monkeypatch.setattr(postgres, "PIPELINED", 600)
    monkeypatch.setattr(postgres, "INSERT_ROWS", 250)
    n = APPEND_CHUNK * 2 + 7
    events = [opened("w"), *(act(i) for i in range(n))]
    whole = store.append(card_stream("w"), events, expected_version=0)
    last = store.append(card_stream("c"), [opened("c"), *events[1:]], expected_version=0, whole=False)
    again = store.read_stream(card_stream("c"))
    assert last == [again[-1]] and again[0].body == encode(opened("c"))
    assert [(e.version, e.type, e.ts, e.body) for e in again[1:]] == [
        (e.version, e.type, e.ts, e.body) for e in whole[1:]
    ]
    assert [e.seq for e in again] == list(range(whole[-1].seq + 1, whole[-1].seq + n + 2))
    prev = chain_mod.GENESIS
    for e in again:
        assert (e.prev_hash, e.hash) == (prev, chain_mod.event_hash(prev, e.stream, e.version, e.type, e.body))
        prev = e.hash
    assert verify_ledger(store).ok
    # Another writer went first: nothing of it is written, whichever chunk it would have reached.
    before = rows(store)
    with pytest.raises(VersionConflict):
        store.append(card_stream("c"), [act(i) for i in range(n)], expected_version=1, whole=False)
    assert rows(store) == before
    more = store.append(card_stream("c"), [act(1)] * (n + 1), expected_version=n + 1, whole=False)
    assert [e.version for e in more] == [2 * n + 2] and verify_ledger(store).ok


def test_events_made_as_they_are_inserted_are_written_as_a_list_of_them_is(store: LogStore) -> None:
    """An import makes its card's events while they are inserted (a long recording's are never all held): the same
    rows as the list, in one transaction, so an import that fails halfway writes nothing of its card."""
    n = APPEND_CHUNK * 2 + 7
    events = [opened("w"), *(act(i) for i in range(n))]
    store.append(card_stream("w"), events, expected_version=0)
    made: list[int] = []

    def making(card: str, fail_at: int | None = None) -> Iterator[Any]:
        for i, e in enumerate([opened(card), *events[1:]]):
            if i == fail_at:
                raise RuntimeError("the recording could not be read")
            made.append(i)
            yield e

    before = rows(store)
    with pytest.raises(RuntimeError):
        store.append(card_stream("g"), making("g", fail_at=APPEND_CHUNK + 3), expected_version=0)
    assert rows(store) == before and len(made) == APPEND_CHUNK + 3  # a chunk was inserted, then rolled back
    last = store.append(card_stream("g"), making("g"), expected_version=0)
    again = store.read_stream(card_stream("g"))
    assert last == [again[-1]] and len(again) == n + 1
    assert [(e.version, e.type, e.ts, e.body) for e in again[1:]] == [
        (e.version, e.type, e.ts, e.body) for e in store.read_stream(card_stream("w"))[1:]
    ]
    assert store.append(card_stream("g"), iter(()), expected_version=n + 1) == []
    assert verify_ledger(store).ok


def test_the_protocol_names_every_store_method_the_facade_calls() -> None:
    # The facade reaches its store only through LogStore: no optional method found with getattr outside it.
    import ast
    import inspect

    import ledger.ledger as facade

    called = {
        n.attr
        for n in ast.walk(ast.parse(inspect.getsource(facade)))
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Attribute | ast.Name)
        and getattr(n.value, "attr", getattr(n.value, "id", None)) == "store"
    }
    assert called, "the facade calls no store method: the check itself is broken"
    missing = sorted(m for m in called if not hasattr(LogStore, m) and m not in LogStore.__annotations__)
    assert not missing, f"the facade calls store methods outside the LogStore protocol: {missing}"
    assert "getattr(store" not in inspect.getsource(facade)


def test_joined_bodies_equal_the_bodies_or_are_not_offered(store: LogStore) -> None:
    stored = store.append(card_stream("j"), [opened("j"), act(1), act(2), act(3)], expected_version=0)
    joined = store.iter_joined(card_stream("j"), after_version=1, chunk=2)
    if joined is None:  # a backend without a joined read: the facade reads bodies
        return
    chunks, last_version, last_seq = joined
    parts = list(chunks)  # each chunk: its bodies, one per line, and how many
    lines = [line for part, _ in parts for line in part.split(b"\n")]
    assert lines == [e.body for e in stored[1:]] and sum(n for _, n in parts) == 3
    assert (last_version, last_seq) == (4, stored[-1].seq)


def test_only_a_clash_on_stream_and_version_is_a_version_conflict(store: LogStore, backend: str) -> None:
    # A row the schema refuses for another reason (here a CHECK on the hash's shape) is a StoreError naming the
    # cause: importers retry a VersionConflict, and retrying a refused row would only hide why.
    from ledger.errors import StoreError

    store.append("k", [opened("k")], expected_version=0)
    with pytest.raises(VersionConflict):
        store.append("k", [act(1)], expected_version=0)
    bad = [StoredEvent(0, "k2", 1, "card_opened", T0.isoformat(), b"{}", "x" * 64, "not-a-hash")]
    with pytest.raises(StoreError) as refused:
        store.insert_copied(bad)
    assert not isinstance(refused.value, VersionConflict)
    assert not store.stream_exists("k2")


def test_none_expected_version_appends_after_the_head(store: LogStore) -> None:
    store.append("s", [opened("x")], expected_version=0)
    other = open_store(store.url)
    got = other.append("s", [act(1), act(2)], expected_version=None)
    other.close()
    assert [e.version for e in got] == [2, 3]
    assert [e.version for e in store.append("s", [act(3)])] == [4]


def test_bytes_and_names_round_trip_exactly(store: LogStore) -> None:
    body = bytes(range(256)) * 4
    odd = "card:é/ü%_x\N{SNOWMAN}"
    got = store.append_encoded(odd, [("card_opened", T0.isoformat(), body)], expected_version=0)
    store.append_encoded("card:éXüAx", [("card_opened", T0.isoformat(), b"{}")], expected_version=0)
    assert store.read_stream(odd) == got
    assert store.read_stream(odd)[0].body == body
    # LIKE wildcards in a prefix are taken literally.
    assert [s.stream for s in store.streams("card:é/ü%_")] == [odd]
    assert [s.stream for s in store.streams("card:é")] == [odd, "card:éXüAx"]


# -- optimistic concurrency ---------------------------------------------------------------------------------


def test_version_conflicts_write_nothing(store: LogStore) -> None:
    other = open_store(store.url)
    store.append("card:x", [opened("x")], expected_version=0)
    with pytest.raises(VersionConflict) as info:
        other.append("card:x", [opened("x")], expected_version=0)
    assert info.value.stream == "card:x" and info.value.expected == 0
    other.append("card:x", [act(1)], expected_version=1)
    before = rows(store)
    # ``store`` still believes version 1 is the head (its cache): UNIQUE(stream, version) refuses the append.
    with pytest.raises(VersionConflict):
        store.append("card:x", [act(2), act(3)], expected_version=1)
    with pytest.raises(VersionConflict):
        store.append("card:x", [act(2)], expected_version=5)
    assert rows(store) == before
    assert [e.version for e in store.append("card:x", [act(2)], expected_version=2)] == [3]
    assert verify_ledger(store).ok
    other.close()


def test_racing_writers_exactly_one_wins_each_version(backend_url: str) -> None:
    stores = [open_store(backend_url) for _ in range(4)]
    stores[0].migrate()
    rounds = 12
    wins = [0] * rounds
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))

    def writer(s: LogStore, n: int) -> None:
        try:
            for r in range(rounds):
                barrier.wait()
                try:
                    s.append("card:race", [act(r, guid=f"w{n}")], expected_version=r)
                    wins[r] += 1
                except VersionConflict:
                    pass
                barrier.wait()
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=writer, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert wins == [1] * rounds
    assert [e.version for e in stores[0].read_stream("card:race")] == list(range(1, rounds + 1))
    assert verify_ledger(stores[0]).ok
    for s in stores:
        s.close()


# -- append-only, enforced by the database ------------------------------------------------------------------

REFUSED = {
    "sqlite": [
        ("UPDATE events SET body = x'00' WHERE seq = 2", "UPDATE"),
        ("UPDATE events SET seq = 99 WHERE seq = 2", "UPDATE"),
        ("DELETE FROM events WHERE seq = 2", "DELETE"),
        ("DELETE FROM events", "DELETE"),
        ("INSERT OR REPLACE INTO events SELECT seq, stream, version, type, ts, x'7b7d', prev_hash, hash "
         "FROM events WHERE seq = 2", "DELETE"),
        ("REPLACE INTO events SELECT * FROM events WHERE seq = 2", "DELETE"),
    ],
    "postgresql": [
        ("UPDATE events SET body = '\\x00'::bytea WHERE seq = 2", "UPDATE"),
        ("DELETE FROM events WHERE seq = 2", "DELETE"),
        ("TRUNCATE events", "TRUNCATE"),
        ("TRUNCATE events CASCADE", "TRUNCATE"),
        ("INSERT INTO events SELECT * FROM events WHERE seq = 2 ON CONFLICT (seq) DO UPDATE SET body = '\\x00'",
         "UPDATE"),
        # ENABLE ALWAYS: the triggers fire even where ordinary triggers are skipped (replication apply).
        ("SET LOCAL session_replication_role = replica; UPDATE events SET ts = 'x' WHERE seq = 2", "UPDATE"),
        ("SET LOCAL session_replication_role = replica; DELETE FROM events", "DELETE"),
    ],
}  # fmt: skip


def test_update_delete_truncate_replace_are_refused(store: LogStore, backend: str) -> None:
    store.append("card:x", [opened("x"), act(1), act(2)], expected_version=0)
    before = rows(store)
    for sql, op in REFUSED[backend]:
        with pytest.raises(DBAPIError, match=f"events are append-only: {op} refused"), store.engine.begin() as conn:
            for stmt in sql.split("; "):
                conn.execute(text(stmt))
        assert rows(store) == before, sql
    assert verify_ledger(store).ok


def test_triggers_at_head(store: LogStore, backend: str) -> None:
    assert store.revision() == store.head_revision()
    assert store.triggers() == set(APPEND_ONLY_TRIGGERS[backend])
    assert store.missing_triggers() == []
    if backend == "postgresql":
        with store.engine.connect() as conn:
            q = "SELECT tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal AND tgrelid = 'events'::regclass"
            enabled = dict(conn.execute(text(q)).all())
            # seq is commit order only if every session takes sequence values one at a time under the lock.
            cache = conn.execute(text("SELECT cache_size FROM pg_sequences WHERE sequencename = 'events_seq_seq'"))
            default = conn.execute(
                text(
                    "SELECT column_default FROM information_schema.columns "
                    "WHERE table_name = 'events' AND column_name = 'seq'"
                )
            ).scalar_one()
            assert cache.scalar_one() == 1
        assert enabled == dict.fromkeys(APPEND_ONLY_TRIGGERS[backend], "A")
        assert default == "nextval('events_seq_seq'::regclass)"


# -- the chain and verify -----------------------------------------------------------------------------------


def played(led: Ledger, moves: list[int]) -> str:
    arc = arcade()
    led.attach(arc)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    for a in moves:
        step(env, a)
    arc.close_scorecard(card)
    return card


def test_verify_passes_on_real_play_and_names_the_head(backend_ledger: Ledger) -> None:
    played(backend_ledger, [1, 1, 2, 1, 0, 1, 1, 1, 3, 1])
    store = backend_ledger.store
    rep = verify_ledger(store)
    assert rep.ok, rep.errors
    assert rep.events == store.count() == 17
    assert [s.stream for s in rep.streams] == [s.stream for s in store.streams()]
    assert rep.head == chain_mod.ledger_head((s.stream, s.version, s.head) for s in store.streams())
    assert rep.revision == store.head_revision()


def test_tampering_once_the_triggers_are_off_is_detected(backend_ledger: Ledger, backend: str) -> None:
    card = played(backend_ledger, [1, 1, 2, 1, 0, 1])
    store = backend_ledger.store
    head = verify_ledger(store).head
    stream = card_stream(card)
    with store.engine.begin() as conn:
        if backend == "sqlite":
            conn.execute(text("DROP TRIGGER events_no_update"))
        else:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER events_no_update"))
    rep = verify_ledger(store)
    assert rep.errors == ["append-only trigger missing: events_no_update"]
    assert rep.head == head  # the events themselves are untouched
    with store.engine.begin() as conn:
        body = conn.execute(
            text("SELECT body FROM events WHERE stream = :s AND version = 3"), {"s": stream}
        ).scalar_one()
        conn.execute(
            text("UPDATE events SET body = :b WHERE stream = :s AND version = 3"),
            {"b": bytes(body).replace(b'"action":1', b'"action":2'), "s": stream},
        )
    rep = verify_ledger(store)
    assert rep.errors == [
        f"{stream}: version 3: the stored bytes do not match the event's hash (the event was changed)",
        "append-only trigger missing: events_no_update",
    ]
    assert rep.head != head


def test_a_forged_insert_is_detected(backend_ledger: Ledger) -> None:
    card = played(backend_ledger, [1, 2])
    store = backend_ledger.store
    stream = card_stream(card)
    last = store.read_stream(stream)[-1]
    body = encode(Win(ts=T0, game_id="cnt3-0000000a", guid="forged"))
    with store.engine.begin() as conn:  # INSERT is allowed (append-only), so only the chain can catch this
        conn.execute(
            text(
                "INSERT INTO events (stream, version, type, ts, body, prev_hash, hash) "
                "VALUES (:s, :v, 'win', :ts, :b, :p, :h)"
            ),
            {"s": stream, "v": last.version + 1, "ts": T0.isoformat(), "b": body, "p": last.hash, "h": "f" * 64},
        )
    rep = verify_ledger(store)
    assert rep.errors == [
        f"{stream}: version {last.version + 1}: the stored bytes do not match the event's hash (the event was changed)"
    ]


# -- migrations -----------------------------------------------------------------------------------------------


def _revisions() -> tuple[str, str, str]:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    script = ScriptDirectory.from_config(cfg)
    head = script.get_current_head()
    assert head is not None
    first = [r.revision for r in script.walk_revisions() if r.down_revision is None]
    previous = script.get_revision(head).down_revision
    assert isinstance(previous, str)
    return first[0], previous, head


def test_migrate_from_empty(backend_url: str, backend: str) -> None:
    store = open_store(backend_url)
    assert store.revision() is None
    assert store.triggers() == set()
    store.migrate()
    store.migrate()  # at head: nothing to do
    assert store.revision() == store.head_revision() == _revisions()[2]
    assert store.triggers() == set(APPEND_ONLY_TRIGGERS[backend])
    assert store.count() == 0 and store.max_seq() == 0 and store.streams() == []
    assert [e.seq for e in store.append("card:x", [opened("x")], 0)] == [1]
    store.close()


@pytest.mark.parametrize("start", ["first", "previous"])
def test_migrate_from_an_earlier_revision_keeps_every_event(backend_url: str, backend: str, start: str) -> None:
    first, previous, head = _revisions()
    store = open_store(backend_url)
    alembic(store, "upgrade", first if start == "first" else previous)
    written = store.append("card:x", [opened("x"), act(1), act(2)], expected_version=0)
    written += store.append("card:y", [opened("y")], expected_version=0)
    store.migrate()
    assert store.revision() == head
    assert store.triggers() == set(APPEND_ONLY_TRIGGERS[backend])
    assert rows(store) == written  # same seq, bytes and hashes
    assert [e.prev_hash for e in store.append("card:x", [act(3)], expected_version=3)] == [written[2].hash]
    assert verify_ledger(store).ok
    store.close()


def test_downgrade_one_step_then_upgrade(store: LogStore, backend: str) -> None:
    _, previous, head = _revisions()
    written = store.append("card:x", [opened("x"), act(1)], expected_version=0)
    alembic(store, "downgrade", "-1")
    assert store.revision() == previous
    assert store.triggers() == set(APPEND_ONLY_TRIGGERS[backend])
    assert rows(store) == written
    alembic(store, "upgrade", "head")
    assert store.revision() == head
    assert store.triggers() == set(APPEND_ONLY_TRIGGERS[backend])
    assert rows(store) == written
    assert verify_ledger(store).ok


# -- the snapshot cache ----------------------------------------------------------------------------------------


def test_snapshots_are_a_replaceable_cache(store: LogStore) -> None:
    assert store.get_snapshot("card:x", "card") is None
    store.put_snapshot("card:x", "card", 3, 7, b"one")
    store.put_snapshot("card:x", "card", 4, 9, bytes(range(256)))
    assert store.get_snapshot("card:x", "card") == Snapshot(4, 9, bytes(range(256)))
    assert store.get_snapshot("card:x", "other") is None
    store.drop_snapshots()
    assert store.get_snapshot("card:x", "card") is None


# -- parity with the toolkit, live capture on each backend -------------------------------------------------------


def test_worked_example_and_message_cases_match_the_toolkit(backend_ledger: Ledger) -> None:
    arc = arcade()
    backend_ledger.attach(arc)
    card = arc.open_scorecard(tags=["t1"], opaque={"run": 1})
    env = arc.make("wkex", scorecard_id=card)
    for n in (44, 400):
        for _ in range(n - 1):
            step(env, 2)
        step(env, 1)
    for g, moves in [("nobl", [1, 1, 1]), ("nbas", [1, 2]), ("shrt", [1, 1, 2]), ("clk2", [6, 6])]:
        env = arc.make(g, scorecard_id=card)
        for a in moves:
            step(env, a, 20, 28)
    assert_same(arc, backend_ledger, card)
    run = json.loads(backend_ledger.export(card))["environments"][0]["runs"][0]
    assert run["level_actions"] == [44, 400, 0]
    assert round(run["score"], 2) == 7.32
    assert arc.close_scorecard(card).model_dump_json() == backend_ledger.export(card)


def test_reset_rules_match_the_toolkit_after_every_step(backend_ledger: Ledger) -> None:
    arc = arcade()
    backend_ledger.attach(arc)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    for a in [1, 0, 0, 1, 1, 1, 3, 1, 0, 1, 1, 0, 2, 2, 0, 0, 1]:
        step(env, a)
        assert_same(arc, backend_ledger, card)
    runs = json.loads(backend_ledger.export(card))["environments"][0]["runs"]
    assert [r["state"] for r in runs] == ["NOT_FINISHED", "GAME_OVER", "NOT_FINISHED"]


@pytest.mark.parametrize("seed", range(6))
def test_random_agents_match_the_toolkit(backend_url: str, seed: int) -> None:
    rng = random.Random(1000 + seed)
    arc = arcade()
    with Ledger.open(backend_url) as led:
        led.attach(arc)
        cards = [
            play_random_card(arc, rng, steps=rng.randint(20, 80), check=lambda c: assert_same(arc, led, c))
            for _ in range(2)
        ]
        closed = {}
        for c in cards:
            assert_same(arc, led, c)
            closed[c] = arc.close_scorecard(c).model_dump_json()
            assert led.export(c) == closed[c]
        assert verify_ledger(led.store).ok
    with Ledger.open(backend_url) as again:  # another process's view: everything from the log alone
        assert {c: again.export(c) for c in cards} == closed


# -- every CLI command on each backend ---------------------------------------------------------------------------


def test_cli_commands_work_on_each_backend(backend_url: str) -> None:
    runner = CliRunner()

    def run(*args: str) -> str:
        res = runner.invoke(cli, ["--db", backend_url, *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    assert run("init").startswith("ledger ready at ")
    demo = run("demo")
    card = re.search(r"export (\S+) --indent 2", demo)
    assert card is not None
    card_id = card.group(1)
    listed = json.loads(run("cards", "--json"))
    assert [(c["card_id"], c["events"], round(c["score"], 2)) for c in listed] == [(card_id, 25, 26.56)]
    with Ledger.open(backend_url) as led:
        exported = led.export(card_id)
    assert run("export", card_id).rstrip("\n") == exported
    assert json.loads(run("replay", card_id, "--json"))["scorecard"] == json.loads(exported)
    assert "game dm01-00000001   score 44.79" in run("replay", card_id)
    rep = json.loads(run("verify", "--json"))
    assert (rep["ok"], rep["events"], rep["streams"], rep["errors"]) == (True, 26, 2, [])
    missing = runner.invoke(cli, ["--db", backend_url, "export", "no-such-card"])
    assert missing.exit_code == 1
    assert "no card 'no-such-card' in this ledger" in missing.output


def test_full_durability_appends_and_verifies(backend_url: str) -> None:
    store = open_store(backend_url, durability="full")
    store.migrate()
    got = store.append("card:x", [opened("x"), act(1)], expected_version=0)
    got += store.append("card:x", [act(2)], expected_version=2)
    got += store.append("card:x", [act(3)])
    assert [e.version for e in got] == [1, 2, 3, 4]
    assert rows(store) == got
    assert verify_ledger(store).ok
    store.close()
