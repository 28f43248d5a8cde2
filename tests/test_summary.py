"""The cards summary is a projection: after captures, imports, closes, retractions and concurrent writers it equals
a rebuild from the log, on both backends; an old ledger gets it at migration; `cards` pages through it."""

from __future__ import annotations

import html
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.app import synthetic
from ledger.app.listing import CardFilter, list_cards
from ledger.capture.demo import run_demo
from ledger.cli import cli
from ledger.domain.baselines import as_map
from ledger.domain.events import ActionTaken, BaselineEntry, BaselinesRecorded, CardRetracted, PlayStarted, decode
from ledger.domain.projection import CardState, fold, new_card
from ledger.imports.importing import import_recordings
from ledger.store.summary import (
    PageQuery,
    SummaryRow,
    card_id_of,
    card_score,
    keys_of,
    play_owners,
    read_page,
    row_of,
)
from tests.replayed import differences, replayed_cards, stored

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "recordings_corpus" / "good"
FIXTURE = HERE / "fixtures" / "first_schema.sqlite"


@pytest.mark.heavy
def test_summary_equals_a_rebuild_after_every_kind_of_write(backend_url: str) -> None:
    with Ledger.open(backend_url) as led:
        ids = synthetic.write_cards(led, 5_000, seed=1)  # a season of cards, at the size CI affords
        synthetic.write_cards(led, 20, seed=2, per_step=True, first=5_000)
        demo = run_demo(led.repository)  # a capture through the real toolkit
        import_recordings(led, [CORPUS])
        # An open card, closed later; a retraction; an action after a retraction.
        rng = synthetic.random.Random(5)
        open_events = list(synthetic.card_events(rng, 999, synthetic.baselines(led), close=False))
        open_id = open_events[0].card_id  # type: ignore[union-attr]
        led.append_card(open_id, open_events, 0)
        assert not differences(led.store)
        led.close_card(open_id)
        now = datetime.now(UTC)
        led.append_card(ids[3], [CardRetracted(ts=now, reason="a bad run")], led.load_card(ids[3]).events)
        assert not differences(led.store)
        got = stored(led.store)
        assert got[ids[3]][0] is not None and got[ids[3]][0].retract_reason == "a bad run"
        assert got[demo][0] is not None and got[demo][0].state == "closed"
        assert len(got) == 5_000 + 20 + 1 + 1 + 1
        # A card whose action lands on a game never started: not counted, in the row as in the projection.
        v = led.load_card(ids[4]).events
        led.append_card(
            ids[4],
            [ActionTaken(ts=now, game_id="zz99", guid="x", action=1, levels_completed=0, state="NOT_FINISHED")],
            v,
        )
        assert not differences(led.store)
        assert led.store.rebuild_summary() == len(got)
        assert not differences(led.store)


def test_play_keys_name_the_card_of_each_guid_as_the_cards_hold_them(backend_url: str) -> None:
    # An import asks which card holds a recording's plays: one probe of the keys per guid, the same answer as
    # loading every card, for captured, imported and retracted cards, a guid no card holds, and one two cards hold.
    with Ledger.open(backend_url) as led:
        ids = synthetic.write_cards(led, 30, seed=3)
        run_demo(led.repository)
        import_recordings(led, [CORPUS])
        led.append_card(ids[0], [CardRetracted(ts=datetime.now(UTC), reason="x")], led.load_card(ids[0]).events)
        first = led.load_card(ids[1])
        game, plays = next(iter(first.games.items()))
        shared = plays[0].guid
        copy = list(synthetic.card_events(synthetic.random.Random(4), 77, synthetic.baselines(led)))
        later = copy[0].card_id  # type: ignore[union-attr]
        led.append_card(later, copy, 0)
        led.append_card(later, [PlayStarted(ts=datetime.now(UTC), game_id=game, guid=shared)], len(copy))
        loaded: dict[str, str] = {}
        for cid, card in led.load_cards(led.card_ids()).items():
            for held in card.games.values():
                for p in held:
                    loaded.setdefault(p.guid, cid)
        assert len(loaded) > 50
        got = play_owners(led.store, [*loaded, "no-such-guid"])
        assert got == loaded
        assert got[shared] == ids[1]


def test_action_counters_equal_a_rebuild_and_an_event_the_log_cannot_decode_leaves_no_row(backend_url: str) -> None:
    # A captured action updates only the counters: times in another offset, naive and UTC come out as a rebuild
    # from the stored bytes has them. An event built in Python with a value outside its type is stored (the log
    # takes any bytes) but does not decode: the card then has no row, as in the rebuild.
    with Ledger.open(backend_url) as led:
        events = list(synthetic.card_events(synthetic.random.Random(9), 1, synthetic.baselines(led), close=False))
        card_id = events[0].card_id  # type: ignore[union-attr]
        led.append_card(card_id, events, 0)
        game, plays = next(iter(led.load_card(card_id).games.items()))
        version = len(events)
        times = [
            datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2))),
            datetime(2026, 3, 1, 12, 0, 1),
            datetime(2026, 3, 1, 12, 0, 2, 7, tzinfo=UTC),
        ]
        for ts in times:
            action = ActionTaken(
                ts=ts, game_id=game, guid=plays[0].guid, action=2, levels_completed=0, state="NOT_FINISHED"
            )
            led.append_card(card_id, [action], version)
            version += 1
            row = stored(led.store)[card_id][0]
            assert row is not None and row.last_ts == ts.isoformat() and row.version == version
            assert not differences(led.store)
        bogus = ActionTaken(ts=times[-1], game_id=game, guid=plays[0].guid, action=2, levels_completed=0, state="BOGUS")  # type: ignore[arg-type]
        led.append_card(card_id, [bogus], version)
        assert card_id not in stored(led.store)
        assert not differences(led.store)


def test_concurrent_writers_keep_the_summary(backend_url: str) -> None:
    with Ledger.open(backend_url) as led:
        synthetic.baselines(led)

    def writer(n: int) -> None:
        with Ledger.open(backend_url) as mine:
            synthetic.write_cards(mine, 40, seed=100 + n, per_step=n % 2 == 0, first=1000 * n)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with Ledger.open(backend_url) as led:
        assert len(stored(led.store)) == 160
        assert not differences(led.store)


def test_a_damaged_row_is_reported_and_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "l.sqlite"
    with Ledger.open(db) as led:
        ids = synthetic.write_cards(led, 30)
    con = sqlite3.connect(db)
    con.execute("UPDATE card_summary SET score = score + 1 WHERE card_id = ?", (ids[2],))
    con.execute("DELETE FROM card_summary_keys WHERE card_id = ?", (ids[5],))
    con.commit()
    con.close()
    with Ledger.open(db) as led:
        diff = differences(led.store)
        assert len(diff) == 2 and ids[2] in diff[0] + diff[1] and "score" in " ".join(diff)
        r = CliRunner().invoke(cli, ["--db", str(db), "verify"])
        assert r.exit_code != 0 and "cards summary" in r.output + r.stderr
        r = CliRunner().invoke(cli, ["--db", str(db), "rebuild-summary", "--check"])
        assert r.exit_code != 0 and "score" in r.output + r.stderr
        r = CliRunner().invoke(cli, ["--db", str(db), "rebuild-summary"])
        assert r.exit_code == 0, r.output
        assert not differences(led.store)
    r = CliRunner().invoke(cli, ["--db", str(db), "verify", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["ok"] is True


def test_a_row_for_a_card_the_log_does_not_hold_is_reported(tmp_path: Path) -> None:
    db = tmp_path / "l.sqlite"
    with Ledger.open(db) as led:
        ids = synthetic.write_cards(led, 3)
    con = sqlite3.connect(db)
    ghost = "00000000-0000-4000-8000-00000000dead"
    con.execute(
        "INSERT INTO card_summary SELECT ? , "
        + ", ".join(c for c in (r[1] for r in con.execute("PRAGMA table_info(card_summary)")) if c != "card_id")
        + " FROM card_summary WHERE card_id = ?",
        (ghost, ids[0]),
    )
    con.execute(
        "INSERT INTO card_summary_keys SELECT kind, value, ? FROM card_summary_keys WHERE card_id = ?", (ghost, ids[1])
    )
    con.commit()
    con.close()
    with Ledger.open(db) as led:
        diff = differences(led.store)
        assert diff == [f"card {ghost}: a summary row for a card the log does not hold"]


def test_an_old_ledger_gets_its_summary_at_migration(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    shutil.copy(FIXTURE, db)
    r = CliRunner().invoke(cli, ["--db", str(db), "cards"])  # a read command never migrates: it says what to do
    assert r.exit_code == 1 and "run `ledger init` once" in r.stderr and "Traceback" not in r.output + r.stderr
    r = CliRunner().invoke(cli, ["--db", str(db), "init"])
    assert r.exit_code == 0, r.output
    with Ledger.open(db) as led:
        assert led.store.triggers() >= {"events_no_update", "events_no_delete"}
        have = stored(led.store)
        assert set(have) == set(led.card_ids()) and have
        assert not differences(led.store)
        for cid in led.card_ids():
            row = have[cid][0]
            assert row is not None and row.score == led.document(cid).score


def test_cards_pages_return_every_card_once_in_order(backend_url: str) -> None:
    with Ledger.open(backend_url) as led:
        synthetic.write_cards(led, 120, seed=9)
        for sort, reverse in (("opened", False), ("score", True), ("actions", True), ("id", False), ("closed", False)):
            whole = [c.card_id for c in list_cards(led, CardFilter(sort=sort, reverse=reverse))]  # type: ignore[arg-type]
            seen: list[str] = []
            after = None
            while True:
                page = list_cards(led, CardFilter(sort=sort, reverse=reverse, limit=17, after=after))  # type: ignore[arg-type]
                if not page:
                    break
                seen += [c.card_id for c in page]
                after = page[-1].card_id
            assert seen == whole and len(set(seen)) == 120
        tagged = list_cards(led, CardFilter(tags=("nightly",), games=("ls20",), limit=500))
        cards = led.load_cards(c.card_id for c in tagged)
        assert tagged and all(
            "nightly" in cards[c].all_tags and any(g.startswith("ls20") for g in cards[c].games) for c in cards
        )
        every = led.load_cards(led.card_ids())
        want = {c for c, s in every.items() if "nightly" in s.all_tags and any(g.startswith("ls20") for g in s.games)}
        assert set(cards) == want


def test_retracted_cards_are_left_out_unless_asked(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.sqlite") as led:
        ids = synthetic.write_cards(led, 5)
        led.append_card(ids[1], [CardRetracted(ts=datetime.now(UTC), reason="x")], led.load_card(ids[1]).events)
        assert [c.card_id for c in list_cards(led)] == [i for i in ids if i != ids[1]]
        assert [c.card_id for c in list_cards(led, CardFilter(include_retracted=True))] == ids
        assert isinstance(led.load_card(ids[1]), CardState)


def test_the_viewer_and_the_bundle_page_their_cards(tmp_path: Path) -> None:
    from ledger.web.bundle import write_bundle
    from ledger.web.server import create_app

    db = tmp_path / "l.sqlite"
    with Ledger.open(db) as led:
        ids = synthetic.write_cards(led, 230, seed=4)
    with Ledger.open_readonly(db) as led:
        client = create_app(led).test_client()
        seen: list[str] = []
        url = "/?sort=date-asc"
        while url:
            body = client.get(url).get_data(as_text=True)
            assert len(body) < 300_000
            seen += re.findall(r'<tr data-card="([^"]+)"', body)
            nxt = re.search(r'href="(\?[^"]*)" id="next-page"', body)
            url = "/" + html.unescape(nxt.group(1)) if nxt else ""
        assert seen == ids  # oldest first, every card once
        tagged = client.get("/?tag=nightly&limit=1000").get_data(as_text=True)
        every = led.load_cards(ids)
        want = [c for c in ids if "nightly" in every[c].all_tags]
        assert set(re.findall(r'<tr data-card="([^"]+)"', tagged)) == set(want)
        write_bundle(led, ids[:150], tmp_path / "site")
    first = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    second = (tmp_path / "site" / "cards-2.html").read_text(encoding="utf-8")
    rows = re.findall(r'<tr data-card="([^"]+)"', first) + re.findall(r'<tr data-card="([^"]+)"', second)
    assert sorted(rows) == sorted(ids[:150]) and 'href="cards-2.html"' in first
    # The bundle's compare page: the 12 best scores side by side, and says so.
    compare = (tmp_path / "site" / "compare.html").read_text(encoding="utf-8")
    side = re.findall(r'<tr data-card="([^"]+)"', compare)
    assert len(side) == 12 and "the 12 best scores of the 150 cards in this bundle" in compare
    with Ledger.open_readonly(db) as led:
        every_score = sorted(r.score for r, _ in stored(led.store).values() if r is not None and r.card_id in ids[:150])
    shown = [float(x) for x in re.findall(r'data-k="card-score">([0-9.]+)<', compare)]
    assert len(shown) == 12 and min(shown) >= round(every_score[-12], 2)


def test_a_copy_keeps_the_summary(backend_url: str, tmp_path: Path) -> None:
    from ledger.app.copying import copy_ledger, open_destination, open_source

    src_path = tmp_path / "src.sqlite"
    with Ledger.open(src_path) as src_led:
        ids = synthetic.write_cards(src_led, 120, seed=6)
    for round_ in range(2):
        src, dst = open_source(str(src_path)), open_destination(backend_url)
        try:
            copy_ledger(src, dst, batch=700)  # batches that split cards
        finally:
            src.close()
            dst.close()
        if round_ == 0:  # the second copy extends cards the destination already holds
            with Ledger.open(src_path) as src_led:
                now = datetime.now(UTC)
                src_led.append_card(ids[0], [CardRetracted(ts=now, reason="r")], src_led.load_card(ids[0]).events)
                synthetic.write_cards(src_led, 30, seed=7, first=500)
    with Ledger.open(backend_url) as led:
        assert len(stored(led.store)) == 150
        assert not differences(led.store)
        assert ids[0] not in [c.card_id for c in list_cards(led)]


def test_ledger_cards_and_the_cards_list_give_the_same_summaries(backend_url: str) -> None:
    from ledger.domain.events import CardOnServer, CardOpened, PlayStarted

    with Ledger.open(backend_url) as led:
        ids = synthetic.write_cards(led, 6, seed=9)  # closed
        captured = run_demo(led.repository)  # through the real toolkit
        import_recordings(led, [CORPUS])
        rng = synthetic.random.Random(11)
        lapsed = list(synthetic.card_events(rng, 50, synthetic.baselines(led), close=False))  # open since 2026-01-01
        led.append_card(lapsed[0].card_id, lapsed, 0)  # type: ignore[union-attr]
        now = datetime.now(UTC)
        fresh = [
            CardOpened(ts=now, card_id="fresh-open", tags=["t1"], baselines_id=synthetic.baselines(led)),
            PlayStarted(ts=now, game_id=synthetic.GAMES[0], guid="g1"),
            ActionTaken(
                ts=now, game_id=synthetic.GAMES[0], guid="g1", action=1, levels_completed=0, state="NOT_FINISHED"
            ),
        ]
        led.append_card("fresh-open", fresh, 0)
        # An open card on an ARC server that has not revealed the baselines of its game: no score yet.
        on_server = [
            CardOpened(ts=now, card_id="on-server", tags=["t2"]),
            CardOnServer(ts=now, server="https://arc.example"),
            PlayStarted(ts=now, game_id="zz01-0000", guid="g2"),
            ActionTaken(ts=now, game_id="zz01-0000", guid="g2", action=1, levels_completed=0, state="NOT_FINISHED"),
        ]
        led.append_card("on-server", on_server, 0)
        led.append_card(ids[2], [CardRetracted(ts=now, reason="a bad run")], led.load_card(ids[2]).events)
        for include in (False, True):
            facade = {c.card_id: c for c in replayed_cards(led, include_retracted=include)}
            listed = {c.card_id: c for c in list_cards(led, CardFilter(include_retracted=include))}
            assert facade == listed
        every = {c.card_id: c for c in replayed_cards(led, include_retracted=True)}
        assert captured in every and every[ids[2]].retracted is not None and every[ids[0]].closed is not None
        assert every[lapsed[0].card_id].lapsed and every[lapsed[0].card_id].close_reason == "idle"  # type: ignore[union-attr]
        assert every["fresh-open"].closed is None and every["on-server"].baselines_known is False
        assert len(every) >= 6 + 1 + 1 + 3
        # The card page's line: closed as the lists show it, its totals the card's document's.
        from ledger.web.data import card_row

        for cid, c in led.load_cards(list(every)).items():
            doc = led.document(cid, card=c)
            row = card_row(c, doc)
            assert (row.closed, row.close_reason) == (every[cid].closed, every[cid].close_reason)
            totals = (doc.score, doc.total_actions, doc.total_levels_completed, doc.total_levels)
            assert (row.score, row.actions, row.levels_completed, row.levels) == totals


def test_the_streamed_rebuild_equals_the_rebuild_in_seq_order(tmp_path: Path) -> None:
    """verify and rebuild-summary fold one card at a time in the order of the (stream, version) index; the rows
    are those of the whole log folded in seq order, with cards appended to in turns (their events interleaved)."""
    import random

    from ledger.app.synthetic import baselines, card_events, write_cards
    from ledger.store.summary import query, rebuilt

    with Ledger.open(tmp_path / "l.sqlite") as led:
        write_cards(led, 40)
        rng, sid = random.Random(3), baselines(led)
        turns = [list(card_events(rng, n, sid, close=n % 2 == 0)) for n in range(40, 70)]
        versions = [0] * len(turns)
        while any(v < len(t) for v, t in zip(versions, turns, strict=True)):
            for i, t in enumerate(turns):
                if versions[i] < len(t):
                    led.append_card(t[0].card_id, [t[versions[i]]], versions[i])  # type: ignore[attr-defined]
                    versions[i] += 1
        whole = _folded_in_seq_order((e.stream, e.type, e.version, e.body) for e in led.store.scan())
        streamed = dict(rebuilt(lambda sql, args: query(led.store, sql, args)))
    assert streamed == whole and len(whole) == 70


def _folded_in_seq_order(
    events: Iterable[tuple[str, str, int, bytes]],
) -> dict[str, tuple[SummaryRow, frozenset[tuple[str, str]]]]:
    """Every card's row and keys from the whole log folded event by event, baseline sets as the log holds them:
    an order and a memory bound unlike the streamed rebuild's, so an independent oracle for it."""
    cards: dict[str, tuple[CardState, int]] = {}
    sets: dict[str, dict[str, BaselineEntry]] = {}
    for stream, _type, version, body in events:
        card_id = card_id_of(stream)
        if card_id is None:
            ev = decode(body)
            if isinstance(ev, BaselinesRecorded):
                sets[ev.set_id] = as_map(ev.entries)
            continue
        state = cards[card_id][0] if card_id in cards else new_card(card_id)
        fold(card_id, [decode(body)], state)
        cards[card_id] = (state, version)
    return {
        cid: (row_of(st, v, card_score(st, sets.get(st.baselines_id or "", {}))), keys_of(st))
        for cid, (st, v) in cards.items()
    }


# -- the summary follows the log by position: readers catch it up, even after killed writers ----------------------

_WRITER = (
    "import sys\n"
    "from ledger import Ledger\n"
    "from ledger.app import synthetic\n"
    "with Ledger.open(sys.argv[1]) as led:\n"
    "    synthetic.write_cards(led, 10_000, seed=int(sys.argv[2]), per_step=True, first=100_000 * int(sys.argv[2]))\n"
)


def _heads(led: Ledger) -> dict[str, int]:
    return {s.stream.split(":", 1)[1]: s.version for s in led.store.streams("card:")}


def test_readers_after_killed_writers_see_every_committed_event(backend_url: str) -> None:
    # Writers in three processes, a reader catching up alongside, then every writer SIGKILLed mid-stream (its
    # follower thread had not folded its last commits): the next reader, read-only (the tail folded in memory,
    # nothing written) or not (caught up in place), lists every committed event, and the tables equal a rebuild.
    with Ledger.open(backend_url) as led:
        synthetic.baselines(led)
    root = Path(__file__).resolve().parent.parent
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, backend_url, str(n)], cwd=root, stderr=subprocess.PIPE)
        for n in range(1, 4)
    ]
    try:
        with Ledger.open(backend_url) as reader:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(_heads(reader)) < 9:
                time.sleep(0.05)
            for _ in range(5):
                rows = read_page(reader.store, PageQuery(include_retracted=True))
                heads = _heads(reader)
                # Caught up before answering: a row never reflects less than the log held when the read began.
                assert all(heads[r.card_id] >= r.version for r in rows)
                time.sleep(0.1)
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
    assert all(p.returncode == -signal.SIGKILL for p in procs), [p.stderr.read() for p in procs if p.stderr]
    with Ledger.open(backend_url, readonly=True) as ro:
        position = _position(ro)
        heads = _heads(ro)
        rows = {r.card_id: r.version for r in read_page(ro.store, PageQuery(include_retracted=True))}
        assert rows == heads
        assert _position(ro) == position  # a read-only reader wrote nothing
    with Ledger.open(backend_url) as led:
        rows = {r.card_id: r.version for r in read_page(led.store, PageQuery(include_retracted=True))}
        assert rows == heads
        assert _position(led) == led.store.max_seq()
        assert not differences(led.store)


def _position(led: Ledger) -> int:
    from ledger.store.summary import POSITION_SQL

    return int(led.store.rows(POSITION_SQL)[0][0])


def test_a_card_its_writer_hands_over_is_scored_as_it_is_and_never_changed(backend_url: str) -> None:
    # The writer's own object is held (nothing decoded and folded again) and only read: the card's next append is
    # folded from the log into a card of the summary's own, and the rows still equal a rebuild. A writer that keeps
    # its card (live capture) does not hand it over.
    with Ledger.open(backend_url) as led:
        events = list(synthetic.card_events(synthetic.random.Random(3), 1, synthetic.baselines(led), close=False))
        card_id = events[0].card_id  # type: ignore[union-attr]
        mine = fold(card_id, events)
        led.append_card(card_id, events, 0, state=mine, hand_over=True)
        led.store.catch_up_summary()
        held = led.store._keeper._cards
        assert held[f"card:{card_id}"].state is mine
        assert not differences(led.store)
        game, plays = next(iter(mine.games.items()))
        action = ActionTaken(
            ts=synthetic.START, game_id=game, guid=plays[0].guid, action=2, levels_completed=0, state="WIN"
        )
        led.append_card(card_id, [action], len(events))
        led.store.catch_up_summary()
        assert held[f"card:{card_id}"].state is not mine and mine.events == len(events)
        assert mine == fold(card_id, events)
        assert not differences(led.store)
        row = stored(led.store)[card_id][0]
        assert row is not None and row.version == len(events) + 1
        others = list(synthetic.card_events(synthetic.random.Random(4), 2, synthetic.baselines(led), close=False))
        kept = fold(others[0].card_id, others)  # type: ignore[union-attr]
        led.append_card(kept.card_id, others, 0, state=kept)
        led.store.catch_up_summary()
        assert held[f"card:{kept.card_id}"].state is not kept
        assert not differences(led.store)


def test_an_import_hands_its_cards_over_to_the_summary(tmp_path: Path) -> None:
    taken: list[str] = []
    with Ledger.open(tmp_path / "l.sqlite") as led:
        hand_over = led.store.hand_over

        def spy(stream: str, state: CardState, version: int) -> None:
            taken.append(stream)
            assert state.events == version
            hand_over(stream, state, version)

        led.store.hand_over = spy  # type: ignore[method-assign]
        summary = import_recordings(led, [CORPUS])
        led.store.catch_up_summary()
        imported = [c.card_id for c in summary.cards if c.status == "imported"]
        assert imported and sorted(taken) == sorted(f"card:{c}" for c in imported)
        assert not differences(led.store)
