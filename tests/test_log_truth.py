"""The log is the only truth: a derived table edited by hand is ignored by every read or reported by ``verify``
(exit 1), on both backends, and a card whose chain is not whole is never shown as a whole card."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result
from sqlalchemy import create_engine, text

from ledger import Ledger
from ledger.cli import cli
from ledger.store.base import normalize_url
from ledger.store.cards import SNAPSHOT_KIND, BrokenChain
from ledger.store.merkle_store import TreeStore
from ledger.store.summary import COLUMNS as SUMMARY_COLUMNS
from ledger.store.tracking import write_mark

#: Commands that read one card and what each must print the same whatever the caches hold.
READS = (["export"], ["replay", "--json"], ["cards", "--json"], ["rescore", "--calculator", "0.9.1"])


def run(db: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)


@pytest.fixture
def demo(backend_url: str) -> Iterator[tuple[str, str]]:
    """A demo ledger (one closed card with a snapshot) and its card id."""
    assert run(backend_url, "demo").exit_code == 0
    with Ledger.open(backend_url) as led:
        (card,) = led.card_ids()
    yield backend_url, card


def sql(url: str, statement: str, **params: object) -> list[tuple]:
    """One statement on the ledger's database behind its back (committed)."""
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as conn:
            got = conn.execute(text(statement), params)
            return [tuple(r) for r in got] if got.returns_rows else []
    finally:
        engine.dispose()


def drop_guards(url: str, tables: tuple[str, ...]) -> None:
    """What an attacker with the database does first: the append-only triggers of ``tables`` gone."""
    if url.startswith("postgresql"):
        for t in tables:
            sql(url, f"ALTER TABLE {t} DISABLE TRIGGER ALL")
        return
    names = sql(url, "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'")
    for name, table in names:
        if table in tables:
            sql(url, f"DROP TRIGGER {name}")


def outputs(db: str, card: str) -> dict[str, str]:
    return {" ".join(a): run(db, *a, *([] if a[0] == "cards" else [card])).stdout for a in READS}


def verify(db: str) -> Result:
    return run(db, "verify")


def audit_consistency(db: str, card: str) -> str:
    """The message of ``ledger audit CARD``'s consistency check, which must have failed (exit 1)."""
    r = run(db, "audit", card, "--json")
    (check,) = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "consistency"]
    assert r.exit_code == 1 and check["status"] == "FAIL", check
    return str(check["message"])


def test_a_snapshot_edited_by_hand_is_ignored_and_verify_names_it(demo: tuple[str, str]) -> None:
    db, card = demo
    before = outputs(db, card)
    assert "score" in before["export"] and verify(db).exit_code == 0
    ((body,),) = sql(db, "SELECT body FROM snapshots")
    env = msgspec.msgpack.decode(bytes(body))
    state = msgspec.msgpack.decode(env[2])
    marks = next(iter(state["games"].values()))[0]["marks"]
    marks[0][1] -= 1  # the forgery: one level completed an action earlier
    env[2] = msgspec.msgpack.encode(state)
    sql(db, "UPDATE snapshots SET body = :b", b=msgspec.msgpack.encode(env))
    r = run(db, "export", card)
    assert r.exit_code == 0 and r.stdout == before["export"]
    assert r.stderr.count("cached state of card") == 1 and "was ignored" in r.stderr
    assert outputs(db, card) == before
    v = verify(db)
    assert v.exit_code == 1
    assert f"FAIL cached card state: snapshot of card:{card} (version" in v.stdout
    assert "1 derived row(s) differ from the log" in v.stdout
    assert audit_consistency(db, card).endswith(
        "its cached state does not decode, or its digest does not hold (reads ignore it)"
    )


def test_a_snapshot_forged_with_a_valid_digest_fails_verify_and_audit(demo: tuple[str, str]) -> None:
    db, card = demo
    with Ledger.open(db) as led:
        cached = led.cached_card(card)
        assert cached is not None
        version, state = cached
        next(iter(state.games.values()))[0].actions += 1
        led.save_snapshot(card, state, version, led.seq_at_version(card, version))
    v = verify(db)
    assert v.exit_code == 1 and "the cached state is not the replay of the log (differs in games)" in v.stdout
    a = run(db, "audit", card, "--json")
    assert a.exit_code == 1
    assert {c["name"]: c["status"] for c in json.loads(a.stdout)["checks"]}["consistency"] == "FAIL"


@pytest.mark.parametrize("change", ["delete", "add", "rebind"])
def test_other_snapshot_edits(demo: tuple[str, str], change: str) -> None:
    db, card = demo
    before = outputs(db, card)
    if change == "delete":
        sql(db, "DELETE FROM snapshots")
        assert outputs(db, card) == before and verify(db).exit_code == 0  # a cache gone is only a cache gone
        return
    if change == "add":
        sql(
            db,
            "INSERT INTO snapshots (stream, kind, version, seq, body) VALUES ('card:nobody', :k, 1, 1, :b)",
            k=SNAPSHOT_KIND,
            b=b"\x93",
        )
    else:  # the row moved to another version and seq of the same card
        sql(db, "UPDATE snapshots SET version = version - 1, seq = seq - 1")
        assert "cached" in audit_consistency(db, card)
    assert outputs(db, card) == before
    v = verify(db)
    assert v.exit_code == 1 and "FAIL cached card state: snapshot of card:" in v.stdout


#: Each derived table beside the snapshots, changed, emptied of a row or given one the log does not make, and the line
#: of `verify` that names it (None: the edit is ignored by every read, so verify has nothing to report).
EDITS = {
    ("card_summary", "change"): (["UPDATE card_summary SET score = score + 1"], "FAIL cards summary:"),
    ("card_summary", "delete"): (["DELETE FROM card_summary"], "FAIL cards summary:"),
    ("card_summary", "add"): (
        [
            f"INSERT INTO card_summary ({', '.join(SUMMARY_COLUMNS)}) "
            f"SELECT 'ghost', {', '.join(SUMMARY_COLUMNS[1:])} FROM card_summary LIMIT 1"
        ],
        "FAIL cards summary:",
    ),
    ("tag_figures", "change"): (["UPDATE tag_figures SET n = n + 1 WHERE metric = 'S'"], "FAIL cards summary:"),
    ("tag_figures", "delete"): (["DELETE FROM tag_figures WHERE metric = 'S'"], "FAIL cards summary:"),
    ("tag_figures", "add"): (
        [
            "INSERT INTO tag_figures (tag, metric, game_id, level, retracted, value, label, n) "
            "VALUES ('ghost', 'S', '', 0, 0, 50.0, '', 1)"
        ],
        "FAIL cards summary:",
    ),
    ("merkle_nodes", "change"): (["UPDATE merkle_nodes SET hash = :zero WHERE idx = 0"], "FAIL Merkle tree:"),
    ("merkle_nodes", "delete"): (["DELETE FROM merkle_nodes"], "FAIL Merkle tree:"),
    ("merkle_nodes", "add"): (
        ["INSERT INTO merkle_nodes (level, idx, hash) VALUES (9, 99, :zero)"],
        "FAIL Merkle tree:",
    ),
    # Each follower's position, bound to the event it names by that event's hash.
    ("tracking", "summary"): (["UPDATE tracking SET hash = :other WHERE name = 'summary'"], "FAIL cards summary:"),
    ("tracking", "tree"): (["UPDATE tracking SET hash = :other WHERE name = 'merkle'"], "FAIL Merkle tree:"),
    ("tracking", "summary-behind"): (
        ["UPDATE tracking SET seq = seq - 5 WHERE name = 'summary'"],
        "FAIL cards summary:",
    ),
    ("tracking", "change"): (
        ["UPDATE tracking SET hash = :other WHERE name LIKE 'copy:%'"],
        "FAIL copy mark: from elsewhere.sqlite:",
    ),
    # A mark gone is a copy planned in full next time: nothing shown changes.
    ("tracking", "delete"): (["DELETE FROM tracking WHERE name LIKE 'copy:%'"], None),
    ("tracking", "add"): (
        ["INSERT INTO tracking (name, seq, hash, n) VALUES ('copy:other.sqlite', 3, :other, 1)"],
        "FAIL copy mark: from other.sqlite:",
    ),
}


@pytest.mark.parametrize(("table", "edit"), list(EDITS), ids=[f"{t}-{e}" for t, e in EDITS])
def test_every_edit_of_a_derived_table_is_ignored_or_reported_by_verify(
    demo: tuple[str, str], table: str, edit: str
) -> None:
    db, card = demo
    with Ledger.open(db) as led:
        TreeStore(led.store).catch_up()  # the demo's 26 events make a stored subtree (16 leaves and up)
        write_mark(led.store, "elsewhere.sqlite", 7, led.store.streams()[-1].head, 1)  # a finished copy's mark
    before = outputs(db, card)
    assert verify(db).exit_code == 0
    drop_guards(db, (table,))
    statements, named = EDITS[(table, edit)]
    for statement in statements:
        sql(db, statement, **{k: v for k, v in {"zero": bytes(32), "other": "ab" * 32}.items() if f":{k}" in statement})
    v = verify(db)
    if named is None:
        assert v.exit_code == 0 and outputs(db, card) == before
    else:
        assert v.exit_code == 1 and named in v.stdout, v.stdout


DERIVED_TABLES = ("snapshots", "card_summary", "card_summary_keys", "tag_figures", "tracking", "merkle_nodes")


@pytest.mark.parametrize("table", DERIVED_TABLES)
def test_a_derived_table_dropped_by_hand_fails_verify_and_no_command_shows_a_traceback(
    demo: tuple[str, str], table: str
) -> None:
    db, card = demo
    with Ledger.open(db) as led:
        TreeStore(led.store).catch_up()
    sql(db, f"DROP TABLE {table}" + (" CASCADE" if db.startswith("postgresql") else ""))
    v = verify(db)
    assert v.exit_code == 1 and f"FAIL table missing: {table} (schema " in v.stdout, v.stdout
    assert "1 table(s) missing" in v.stdout
    # Every other command answers in one line and an exit code (catch_exceptions=False: a traceback fails here).
    for args in [*(a + ([] if a[0] == "cards" else [card]) for a in map(list, READS)), ["rebuild-summary"]]:
        r = run(db, *args)
        assert r.exit_code in (0, 1), (args, r.exit_code, r.output)
        if r.exit_code:
            assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("Error: "), (args, r.stderr)
    if table == "card_summary":
        r = run(db, "cards")
        assert r.exit_code == 1 and "has no cards summary table, though its schema" in r.stderr, r.stderr


@pytest.mark.parametrize("cached", [True, False], ids=["with snapshot", "without"])
@pytest.mark.parametrize("where", ["middle", "tail"])
def test_a_card_missing_events_is_refused_by_every_read(demo: tuple[str, str], cached: bool, where: str) -> None:
    db, card = demo
    if not cached:
        sql(db, "DELETE FROM snapshots")
    drop_guards(db, ("events",))
    ((top,),) = sql(db, "SELECT max(version) FROM events WHERE stream = :s", s=f"card:{card}")
    lo, hi = (5, 10) if where == "middle" else (top - 4, top)
    sql(db, "DELETE FROM events WHERE stream = :s AND version BETWEEN :lo AND :hi", s=f"card:{card}", lo=lo, hi=hi)
    if where == "tail" and not cached:
        # A chain cut at its end is still a chain: what is gone is told by `verify --expect-head` and checkpoints.
        assert run(db, "export", card).exit_code == 0
        return
    for args in (["export", card], ["replay", card], ["rescore", card, "--calculator", "0.9.1"]):
        r = run(db, *args)
        assert r.exit_code == 1, (args, r.output)
        assert r.stdout == "" and r.stderr.startswith(f"Error: card {card} is broken: "), (args, r.stderr)
        assert len(r.stderr.splitlines()) == 1
    shown = run(db, "export", card, "--allow-broken")
    assert shown.exit_code == 0 and "is BROKEN" in shown.stderr and json.loads(shown.stdout)["card_id"] == card
    text_replay = run(db, "replay", card, "--allow-broken")
    assert text_replay.exit_code == 0 and text_replay.stdout.startswith("BROKEN: ")
    with Ledger.open(db) as led, pytest.raises(BrokenChain):
        led.load_card(card)


def test_reads_of_a_whole_card_equal_a_full_replay_through_the_repository(demo: tuple[str, str]) -> None:
    db, card = demo
    with Ledger.open(db) as led:
        assert led.load_card(card) == led.load_card(card, use_cache=False)
        loaded = led.repository.read(card)
        assert loaded.broken is None and loaded.version == led.store.streams(f"card:{card}")[0].version


def test_only_the_repository_folds_a_cards_events() -> None:
    """One module loads cards: no other module of the package folds events, but the pure projection and checks."""
    root = Path(__file__).resolve().parent.parent / "ledger"
    pure = {"domain/projection.py", "domain/replay.py", "rules/audit_checks.py", "rules/evidence_file.py"}
    folding = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if str(p.relative_to(root)) not in pure | {"store/cards.py"}
        and ("import fold\n" in p.read_text() or "fold, " in p.read_text() or " fold(card" in p.read_text())
    ]
    assert folding == []
