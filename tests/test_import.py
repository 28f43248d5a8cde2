"""Importing the toolkit's own recordings gives back the toolkit's own scorecards, byte for byte.

Every run here is played through the real toolkit (OFFLINE ``Arcade``, ``save_recording=True``) and imported into
a fresh ledger; the expected JSON is ``get_scorecard(card).model_dump_json()`` taken before the card is closed.
"""

from __future__ import annotations

import json
import random
import shutil
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain import document
from ledger.domain.events import (
    ActionIgnored,
    ActionTaken,
    BaselinesRecorded,
    CardClosed,
    CardOpened,
    CardReopened,
    LevelReset,
    PlayStarted,
    RecordingImported,
    Win,
    baselines_stream,
    card_stream,
    decode,
)
from ledger.domain.projection import fold
from ledger.domain.scoring import score_card
from ledger.formats.finding import find_recordings
from ledger.formats.recordings import BLOCK, MAX_LINE, read_recording
from ledger.imports.importing import ImportSummary, import_recordings
from tests.toolkit import ENV_DIR, arcade, play_random_card, step

SCORING = (PlayStarted, ActionTaken, ActionIgnored, LevelReset)


def recording_arcade(recordings: Path, frames: bool | str = True, seed: int = 0) -> Any:
    """An OFFLINE Arcade whose every ``make`` records (with frames, without, or a random mix per guid)."""
    arc = arcade(recordings_dir=str(recordings))
    orig = arc.make
    pick = random.Random(seed)

    def make(*args: Any, **kwargs: Any) -> Any:
        with_frames = frames if isinstance(frames, bool) else pick.random() < 0.5
        return orig(*args, save_recording=True, include_frame_data=with_frames, **kwargs)

    arc.make = make
    return arc


def events_of(led: Ledger, card_id: str) -> list[Any]:
    return [decode(b) for b in led.store.read_bodies(card_stream(card_id))[0]]


def imported(led: Ledger, paths: list[Path], **kwargs: Any) -> ImportSummary:
    s = import_recordings(led, paths, **kwargs)
    assert s.exit_code == 0, [str(p) for p in s.problems]
    return s


# -- parity: hundreds of random runs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch", "frames"),
    # Batches 0 and 1 give frames and none; 2-5, mixed and more of the same random runs, are the heavy tier's.
    [
        (0, True),
        (1, False),
        *(pytest.param(*b, marks=pytest.mark.heavy) for b in [(2, "mixed"), (3, True), (4, False), (5, "mixed")]),
    ],
)
def test_random_runs_import_to_the_toolkits_scorecards(tmp_path: Path, batch: int, frames: bool | str) -> None:
    """50 seeded random cards per batch (300 in all): several games and guids per card, RESETs at random."""
    rng = random.Random(1000 + batch)
    arc = recording_arcade(tmp_path / "rec", frames, seed=batch)
    expected = {}
    for _ in range(50):
        card = play_random_card(arc, rng, steps=rng.randint(5, 70))
        expected[card] = arc.get_scorecard(card).model_dump_json()
    with Ledger.open(tmp_path / "l.sqlite") as led:
        s = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert s.totals()["imported"] == 50
        assert s.problems == []
        seen: Counter[str] = Counter()
        for card, want in expected.items():
            assert led.export(card) == want, card
            evs = events_of(led, card)
            assert type(evs[0]) is CardOpened and type(evs[-1]) is CardClosed
            assert evs[-1].reason == "end_of_import"
            plays = Counter(e.guid for e in evs if type(e) is PlayStarted)
            seen["several plays of one guid"] += any(n > 1 for n in plays.values())
            seen["several guids"] += len(plays) > 1
            seen["several games"] += len({e.game_id for e in evs if type(e) is PlayStarted}) > 1
            seen["after GAME_OVER"] += any(type(e) is ActionIgnored and e.state == "GAME_OVER" for e in evs)
            seen["level resets"] += any(type(e) is LevelReset for e in evs)
        assert verify_ledger(led.store).ok
        again = import_recordings(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert again.totals()["already_imported"] == 50 and again.totals()["events"] == 0
    # The batch really covered what it claims to (a test that cannot fail proves nothing).
    assert all(seen[k] >= 3 for k in ("several plays of one guid", "several guids", "several games")), seen
    assert seen["after GAME_OVER"] >= 3 and seen["level resets"] >= 10, seen


def _reset_twice_after_win_and_game_over(arc: Any, card: str) -> None:
    env = arc.make("cnt3", scorecard_id=card)
    for a in [1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 1, 3, 1, 1, 0, 0, 1]:
        step(env, a)
    clicks = arc.make("clk2", scorecard_id=card)
    for x, y in [(0, 0), (20, 28), (44, 44), (44, 44), (1, 1)]:
        step(clicks, 6, x, y)  # WIN on the third click; two more clicks after it get empty frames
    step(clicks, 0)  # RESET after WIN: a full reset, a new play of the same guid
    step(clicks, 6, 20, 28)


@pytest.mark.parametrize("frames", [True, False])
def test_resets_twice_and_actions_after_win_and_game_over(tmp_path: Path, frames: bool) -> None:
    arc = recording_arcade(tmp_path / "rec", frames)
    card = arc.open_scorecard()
    _reset_twice_after_win_and_game_over(arc, card)
    want = arc.get_scorecard(card).model_dump_json()
    with Ledger.open(tmp_path / "l.sqlite") as led:
        imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert led.export(card) == want
        evs = events_of(led, card)
        ignored = [(e.game_id[:4], e.action, e.state) for e in evs if type(e) is ActionIgnored]
        assert ignored == [
            *[("cnt3", 1, "WIN"), ("cnt3", 1, "WIN"), ("cnt3", 2, "WIN")],
            *[("cnt3", 1, "GAME_OVER"), ("cnt3", 1, "GAME_OVER")],
            *[("clk2", 6, "WIN"), ("clk2", 6, "WIN")],
        ]
        assert sum(type(e) is Win for e in evs) == 2
    doc = json.loads(want)
    runs = {e["id"][:4]: [(r["state"], r["actions"], r.get("resets")) for r in e["runs"]] for e in doc["environments"]}
    # RESET twice after level 1: two full resets (two new plays); after GAME_OVER a level reset then a full reset.
    assert runs == {
        "cnt3": [
            ("NOT_FINISHED", 2, 0),
            ("NOT_FINISHED", 0, 0),
            ("WIN", 7, 0),
            ("GAME_OVER", 3, 1),
            ("NOT_FINISHED", 1, 0),
        ],
        "clk2": [("WIN", 3, 0), ("NOT_FINISHED", 1, 0)],
    }


def test_a_card_folder_and_single_files_name_the_same_card(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec")
    card = arc.open_scorecard()
    _reset_twice_after_win_and_game_over(arc, card)
    want = arc.get_scorecard(card).model_dump_json()
    files = sorted((tmp_path / "rec" / card).glob("*.jsonl"))
    assert len(files) == 2
    for i, paths in enumerate([[tmp_path / "rec" / card], files]):
        with Ledger.open(tmp_path / f"l{i}.sqlite") as led:
            imported(led, paths, environments=ENV_DIR)
            assert led.card_ids() == [card]
            assert led.export(card) == want


def test_the_same_run_captured_live_and_imported(tmp_path: Path) -> None:
    """Live capture and the import of the run's recordings: the same export and the same scoring events."""
    rng = random.Random(77)
    arc = recording_arcade(tmp_path / "rec", "mixed", seed=3)
    with Ledger.open(tmp_path / "live.sqlite") as live:
        live.attach(arc)
        cards = [play_random_card(arc, rng, steps=rng.randint(20, 60)) for _ in range(12)]
        cards.append(arc.open_scorecard())
        _reset_twice_after_win_and_game_over(arc, cards[-1])
        with Ledger.open(tmp_path / "imported.sqlite") as imp:
            imported(imp, [tmp_path / "rec"], environments=ENV_DIR)
            for card in cards:
                assert imp.export(card) == live.export(card) == arc.get_scorecard(card).model_dump_json()
                a = [_scoring(e) for e in events_of(live, card) if isinstance(e, SCORING) or _is_mark(e)]
                b = [_scoring(e) for e in events_of(imp, card) if isinstance(e, SCORING) or _is_mark(e)]
                assert a == b and len(a) > 1
                # Same content-addressed baseline set as live capture stored.
                assert live.load_card(card).baselines_id == imp.load_card(card).baselines_id is not None
    # `ledger export` and `ledger replay` of the imported card: as for the captured one (bar how it was closed).
    for card in cards:
        outs = []
        for db in ("live.sqlite", "imported.sqlite"):
            export = CliRunner().invoke(cli, ["--db", str(tmp_path / db), "export", card])
            replay = CliRunner().invoke(cli, ["--db", str(tmp_path / db), "replay", card, "--json"])
            assert export.exit_code == replay.exit_code == 0
            doc = json.loads(replay.stdout)
            outs.append((export.stdout, doc["plays"], doc["scorecard"], doc["closed"]))
        assert outs[0][:3] == outs[1][:3]
        assert (outs[0][3], outs[1][3]) == (None, "end_of_import")


def _is_mark(e: Any) -> bool:
    return type(e).__name__ in ("LevelCompleted", "GameOver", "Win")


def _scoring(e: Any) -> dict[str, Any]:
    d = {k: getattr(e, k) for k in e.__struct_fields__ if k not in ("ts", "seed")}
    d["type"] = type(e).__name__
    return d


# -- idempotent and resumable --------------------------------------------------------------------------------------


def test_importing_twice_adds_nothing(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec")
    card = play_random_card(arc, random.Random(5), steps=40)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        first = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        n = led.store.count()
        assert first.totals()["imported"] == 1
        second = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert [c.status for c in second.cards] == ["already imported"]
        assert second.totals()["events"] == 0 and second.bytes_read == 0
        assert led.store.count() == n
        # The baseline set was stored once, with the first import; a second set was not made.
        assert len(led.baseline_set_ids()) == 1
        assert events_of(led, card)[0].baselines_id == led.baseline_set_ids()[0]


@pytest.mark.parametrize("frames", [True, False])
def test_a_grown_recording_appends_only_its_new_lines(tmp_path: Path, frames: bool) -> None:
    """A run still going: import, play on, import again. The card is reopened and closed again at its end."""
    arc = recording_arcade(tmp_path / "rec", frames)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    for a in [1, 1, 1, 3]:  # ends in GAME_OVER: the next import must know the game was over
        step(env, a)
    first_json = arc.get_scorecard(card).model_dump_json()
    with Ledger.open(tmp_path / "l.sqlite") as led:
        imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert led.export(card) == first_json
        n = len(events_of(led, card))
        for a in [1, 2]:  # empty frames: counted nothing by the toolkit
            step(env, a)
        step(env, 0)
        step(env, 1)
        other = arc.make("clk2", scorecard_id=card)  # a new file in the card's folder
        step(other, 6, 20, 28)
        want = arc.get_scorecard(card).model_dump_json()
        s = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert [c.status for c in s.cards] == ["updated"]
        assert s.cards[0].lines == 4 + 2
        assert led.export(card) == want
        evs = events_of(led, card)
        new = evs[n:]
        assert type(new[0]) is CardReopened and type(new[-1]) is CardClosed
        assert [e.state for e in new if type(e) is ActionIgnored] == ["GAME_OVER", "GAME_OVER"]
        assert sum(type(e) is CardClosed for e in evs) == 2
        progress = {e.file: e.lines for e in evs if type(e) is RecordingImported}
        assert sorted(progress.values()) == [2, 9]
        assert led.load_card(card).close_reason == "end_of_import"
        # Each close holds the hash of the document as the card stood then (what an audit compares).
        for i, e in enumerate(evs):
            if type(e) is CardClosed:
                doc = score_card(fold(card, evs[:i]), led.baselines(evs[0].baselines_id))
                assert e.document_sha256 == document.sha256(doc)
        assert verify_ledger(led.store).ok
        assert imported(led, [tmp_path / "rec"]).cards[0].status == "already imported"
    # A fresh import of the final files gives the same scorecard.
    with Ledger.open(tmp_path / "fresh.sqlite") as led:
        imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert led.export(card) == want


def test_a_line_still_being_written_is_read_next_time(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec")
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    for a in [1, 2, 1]:
        step(env, a)
    before_last = arc.get_scorecard(card).model_dump_json()
    step(env, 1)
    want = arc.get_scorecard(card).model_dump_json()
    (f,) = (tmp_path / "rec" / card).glob("*.jsonl")
    full = f.read_bytes()
    cut = full.rindex(b"\n", 0, len(full) - 1) + 1 + 5000  # the writer is 5000 bytes into the last line
    f.write_bytes(full[:cut])
    with Ledger.open(tmp_path / "l.sqlite") as led:
        s = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert [str(p).split(": ", 1)[1] for p in s.problems] == [
            "truncated last line (5000 bytes, no newline): skipped"
        ]
        assert s.problems[0].line == 5
        assert led.export(card) == before_last
        f.write_bytes(full)  # the writer finished the line
        s = imported(led, [tmp_path / "rec"])
        assert s.problems == [] and s.cards[0].status == "updated" and s.cards[0].lines == 1
        assert led.export(card) == want


def test_a_whole_last_record_without_its_newline_is_imported(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec", frames=False)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    for a in [1, 1]:
        step(env, a)
    want = arc.get_scorecard(card).model_dump_json()
    (f,) = (tmp_path / "rec" / card).glob("*.jsonl")
    f.write_bytes(f.read_bytes()[:-1])
    with Ledger.open(tmp_path / "l.sqlite") as led:
        s = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert s.problems == []
        assert led.export(card) == want
        with f.open("ab") as out:
            out.write(b"\n")  # the newline arrives later: a blank line, nothing new
        s = imported(led, [tmp_path / "rec"])
        assert s.cards[0].status == "updated" and s.totals()["plays"] == 0
        assert s.skipped() == {"blank": 1}
        assert led.export(card) == want


def test_a_rewritten_recording_is_refused(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec", frames=False)
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card)
    for a in [1, 1, 2]:
        step(env, a)
    (f,) = (tmp_path / "rec" / card).glob("*.jsonl")
    with Ledger.open(tmp_path / "l.sqlite") as led:
        imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        n = led.store.count()
        original = f.read_bytes()
        f.write_bytes(original.replace(b'"ACTION2"', b'"ACTION1"'))  # same size, other content
        s = import_recordings(led, [tmp_path / "rec"])
        assert s.exit_code == 1 and s.cards[0].status == "not imported"
        assert "it was rewritten, not imported" in str(s.problems[0])
        f.write_bytes(original[: len(original) // 2])
        s = import_recordings(led, [tmp_path / "rec"])
        assert s.exit_code == 1
        assert f"shorter than the {len(original)} bytes already imported" in str(s.problems[0])
        assert led.store.count() == n


def test_a_card_captured_live_is_compared_not_imported_again(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec")
    with Ledger.open(tmp_path / "l.sqlite") as led:
        led.attach(arc)
        card = play_random_card(arc, random.Random(2), steps=20)
        n = led.store.count()
        s = import_recordings(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert s.exit_code == 0 and s.cards[0].status == "same card", [str(p) for p in s.problems]
        assert any(f"same card, equal: its plays are on card {card} (captured live)" in str(p) for p in s.problems)
        assert led.store.count() == n
        # The same files laid flat (no card folder): found by their guids, compared the same way.
        flat = tmp_path / "Downloads"
        flat.mkdir()
        for f in (tmp_path / "rec" / card).iterdir():
            shutil.copy(f, flat / f.name)
        s = import_recordings(led, [flat])
        assert s.exit_code == 0 and [(c.card_id, c.status) for c in s.cards] == [(card, "same card")]
        # A changed copy differs: listed, exit 1, nothing written.
        f = next(flat.iterdir())
        lines = f.read_text().splitlines(keepends=True)
        f.write_text("".join(lines[: len(lines) // 2]))
        s = import_recordings(led, [flat])
        assert s.exit_code == 1 and s.cards[0].status == "differs"
        assert any(p.kind == "cross_check" for p in s.problems)
        assert led.store.count() == n
        assert led.export(card) == arc.get_scorecard(card).model_dump_json()


def test_two_imports_at_once_import_each_card_once(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec", frames=False)
    rng = random.Random(9)
    expected = {}
    for _ in range(15):
        c = play_random_card(arc, rng, steps=30)
        expected[c] = arc.get_scorecard(c).model_dump_json()
    db = tmp_path / "l.sqlite"
    Ledger.open(db).close()
    results: list[ImportSummary] = []

    def run() -> None:
        with Ledger.open(db) as led:
            results.append(import_recordings(led, [tmp_path / "rec"], environments=ENV_DIR))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.exit_code for r in results] == [0, 0]
    statuses = Counter(c.status for r in results for c in r.cards)
    assert statuses == {"imported": 15, "already imported": 15}
    with Ledger.open(db) as led:
        for c, want in expected.items():
            assert led.export(c) == want
            assert sum(type(e) is CardOpened for e in events_of(led, c)) == 1
        assert verify_ledger(led.store).ok


# -- baselines -----------------------------------------------------------------------------------------------------


def test_without_environments_a_card_has_no_baseline_set(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec")
    card = arc.open_scorecard()
    env = arc.make("wkex", scorecard_id=card)
    step(env, 1)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        imported(led, [tmp_path / "rec"])
        assert led.load_card(card).baselines_id is None
        assert led.baseline_set_ids() == []
        run = json.loads(led.export(card))["environments"][0]["runs"][0]
        assert run["message"] == "No Matching EnvironmentInfo found for wkex-0000000f"
        # Re-importing with --environments gives the card those baselines, and only once.
        s = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert s.cards[0].status == "updated" and s.cards[0].baselines_attached
        assert led.load_card(card).baselines_id == s.baselines_id is not None
        s = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        assert s.cards[0].status == "already imported" and not s.cards[0].baselines_attached


def test_environments_are_stored_content_addressed(tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec")
    for _ in range(2):
        card = arc.open_scorecard()
        step(arc.make("wkex", scorecard_id=card), 1)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        s = imported(led, [tmp_path / "rec"], environments=ENV_DIR)
        (set_id,) = led.baseline_set_ids()
        assert s.baselines_id == set_id
        (ev,) = [decode(b) for b in led.store.read_bodies(baselines_stream(set_id))[0]]
        assert type(ev) is BaselinesRecorded
        assert sorted(e.game_id for e in ev.entries) == sorted(i.game_id for i in arc.available_environments)
        assert {led.load_card(c).baselines_id for c in led.card_ids()} == {set_id}


# -- reading -------------------------------------------------------------------------------------------------------


def _frame_line(reasoning: str = "null", extra: str = "", second: int = 0) -> bytes:
    frame = "[[" + ", ".join(["[" + ", ".join(["5"] * 64) + "]"] * 64) + "]]"
    data = (
        '"game_id": "cnt3-0000000a", "state": "NOT_FINISHED", "levels_completed": 1, "win_levels": 3, '
        f'"action_input": {{"id": "ACTION6", "data": {{"x": 3, "y": 4}}, "reasoning": {reasoning}}}, '
        f'"guid": "g", "full_reset": false, "available_actions": [1, 6], "frame": {frame}{extra}'
    )
    return f'{{"timestamp": "2026-12-02T10:00:{second:02d}.000001+00:00", "data": {{{data}}}}}\n'.encode()


@pytest.mark.parametrize(
    ("reasoning", "extra"),
    [
        ("null", ""),
        ('{"a": 1, "frame": [[1]]}', ""),  # the first ', "frame": ' is inside the reasoning
        ('"say \\", \\"frame\\": [] here"', ""),  # ... or inside a string
        ("null", ', "later": "x"'),  # a key after the frame
    ],
)
def test_every_shape_of_a_frame_line_reads_the_same(tmp_path: Path, reasoning: str, extra: str) -> None:
    f = tmp_path / "c" / "cnt3-0000000a-g.jsonl"
    f.parent.mkdir()
    f.write_bytes(b"".join(_frame_line(reasoning, extra, second=i) for i in range(3)))
    r = read_recording(f)
    assert r.problems == [] and r.lines == 3 and r.end == f.stat().st_size
    o = r.observations[0]
    assert (o.action, o.x, o.y, o.levels_completed, o.state, o.frame_empty) == (6, 3, 4, 1, "NOT_FINISHED", False)


def test_a_second_record_glued_onto_a_cut_one_is_a_bad_line(tmp_path: Path) -> None:
    """A write that failed half-way, then the next record appended after it: not taken for the first record."""
    line = _frame_line()
    f = tmp_path / "c" / "cnt3-0000000a-g.jsonl"
    f.parent.mkdir()
    f.write_bytes(line + line[:6000] + _frame_line(second=1))
    r = read_recording(f)
    assert len(r.observations) == 1
    assert [(p.line, p.kind) for p in r.problems] == [(2, "not_json")]


def test_a_huge_line_is_streamed(tmp_path: Path) -> None:
    """A 20 MB line (a frame of a million layers) is read keeping only its head: same observation."""
    big = _frame_line().replace(b'"frame": [[', b'"frame": [' + b"[[0, 1], [2, 3]], " * 1_500_000 + b"[", 1)
    assert len(big) > MAX_LINE + BLOCK
    f = tmp_path / "c" / "cnt3-0000000a-g.jsonl"
    f.parent.mkdir()
    f.write_bytes(_frame_line() + big + b"x" * (MAX_LINE + 2 * BLOCK) + b"\n" + _frame_line(second=1))
    r = read_recording(f)
    assert [o.action for o in r.observations] == [6, 6, 6]
    assert [(p.line, p.kind) for p in r.problems] == [(3, "too_long")]
    assert r.lines == 4 and r.end == f.stat().st_size


def test_find_recordings_layouts(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    for card in ("c1", "c2"):
        (rec / card).mkdir(parents=True)
        (rec / card / "g-1.jsonl").write_text("")
    (rec / "c1" / "notes.txt").write_text("x")
    cards = find_recordings([rec]).cards
    assert {c: [f.name for f in fs] for c, fs in cards.items()} == {"c1": ["g-1.jsonl"], "c2": ["g-1.jsonl"]}
    cards = find_recordings([rec / "c1", rec / "c1" / "g-1.jsonl"]).cards
    assert list(cards) == ["c1"] and len(cards["c1"]) == 1
    shutil.copytree(rec / "c1", tmp_path / "copy" / "c1")
    problems = find_recordings([rec, tmp_path / "copy"]).problems
    assert [p.kind for p in problems] == ["duplicate"]


def test_import_on_each_backend(backend_ledger: Ledger, tmp_path: Path) -> None:
    arc = recording_arcade(tmp_path / "rec", "mixed", seed=1)
    rng = random.Random(31)
    cards = {}
    for _ in range(4):
        c = play_random_card(arc, rng, steps=40)
        cards[c] = arc.get_scorecard(c).model_dump_json()
    imported(backend_ledger, [tmp_path / "rec"], environments=ENV_DIR)
    for c, want in cards.items():
        assert backend_ledger.export(c) == want
    assert imported(backend_ledger, [tmp_path / "rec"]).totals()["already_imported"] == 4
