"""Audits that only FAIL where the record and the game code disagree: undecided actions and unrecorded seeds.

Harness recordings imported without the game's code leave open which action most lines answer (the frames do not
say): those actions keep their candidates, ``ledger audit`` says UNKNOWN, ``audit --environments`` decides them by
re-simulation. Toolkit recordings do not hold the seed a game was made with: the audit tries seeds until one
reproduces the play, and says UNKNOWN when none does, never FAIL.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import Ledger
from ledger.app.audit import audit_card
from ledger.domain.events import ActionTaken, AnyEvent, LevelCompleted, PlayStarted, card_stream, decode
from ledger.imports.importing import import_recordings
from tests.harness_recorder import environments, run_swarm
from tests.test_audit import ENV_DIR, audit_json, check, copy_ledger, master, raw, rewrite_card, run, statuses

__all__ = ["master"]  # the module-scoped fixture of test_audit, shared

GAMES = ["vis5-0000001a", "cnt3-0000000a", "clk2-0000000b", "shrt-0000000e"]


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return environments(tmp_path_factory.mktemp("envs"))


def resim(led: Ledger, card: str, envs: Path | None, decide: bool = False) -> Any:
    return next(c for c in audit_card(led, card, environments=envs, decide=decide).checks if c.name == "resimulation")


@pytest.mark.heavy
def test_undecided_actions_are_unknown_then_decided_by_the_game(tmp_path: Path, envs: Path) -> None:
    """Random agents (deaths, wins, clicks, resets) recorded by the harness, imported from the frames alone: no
    audit FAILs, with or without the game code; the actions the frames leave open keep their candidates."""
    rec = tmp_path / "rec"
    for seed in (3, 4):
        run_swarm(rec, GAMES, seed, env_dir=envs, max_actions=60)
    db = tmp_path / "l.sqlite"
    seen = {"open": 0, "decided": 0}
    opened: list[str] = []
    with Ledger.open(db) as led:
        assert import_recordings(led, [rec]).exit_code == 0
        cards = led.card_ids()
        assert len(cards) == 8
        for card in cards:
            evs = [decode(b) for b in led.store.read_bodies(card_stream(card))[0]]
            for e in evs:
                if type(e) is ActionTaken and e.candidates:
                    assert e.action == e.candidates[0] and len(e.candidates) > 1
            without, with_code = resim(led, card, None), resim(led, card, envs, decide=True)
            assert with_code.status == "PASS", (card, with_code.message)
            # One path, even where it takes a choice a later line rules out (a press that does not show, where a
            # RESET was): it is searched again from a state kept a few lines before, not from the card's start.
            one = resim(led, card, envs)
            assert one.status == "PASS" and one.details["searched"] is False, (card, one.message)
            if without.status == "UNKNOWN":
                assert "did not decide" in without.message and "--environments" in without.message
                seen["open"] += 1
                seen["decided"] += with_code.details["decided_actions"]
                opened.append(card)
            else:
                assert without.status == "SKIP"
    assert seen["open"] >= 4 and seen["decided"] >= 1, seen
    code, out = run("--db", str(db), "audit", cards[0])
    assert code == 0 and "FAIL" not in out
    # The audit says which way it took: one path of the game, or (--decide) every candidate of the open actions.
    code, out = run("--db", str(db), "audit", opened[0], "--environments", str(envs))
    assert code == 0 and "reproduced every one along one path" in out and "--decide" in out, out
    code, out = run("--db", str(db), "audit", opened[0], "--environments", str(envs), "--decide")
    assert code == 0 and "the game decided" in out and "along one path" not in out, out
    code, out = run("--db", str(db), "audit", opened[0], "--decide")
    assert code == 2 and "give --environments DIR as well" in out and "Traceback" not in out, out


def _events(db: Path, card: str) -> list[AnyEvent]:
    from tests.test_audit import card_events

    con = raw(db)
    try:
        return card_events(con, card)
    finally:
        con.close()


def test_an_undecided_action_no_candidate_of_which_fits_fails(tmp_path: Path, envs: Path) -> None:
    """Candidates edited so that none completes the level the record says was completed: FAIL, not UNKNOWN."""
    rec = tmp_path / "rec"
    run_swarm(rec, ["vis5-0000001a"], 5, env_dir=envs, max_actions=80)
    db = tmp_path / "l.sqlite"
    with Ledger.open(db) as led:
        import_recordings(led, [rec])
        (card,) = led.card_ids()
    events = _events(db, card)
    at = next(
        i
        for i, e in enumerate(events)
        if type(e) is ActionTaken and e.candidates and i + 1 < len(events) and type(events[i + 1]) is LevelCompleted
    )

    def tamper(evs: list[AnyEvent]) -> list[AnyEvent]:
        e = evs[at]
        assert type(e) is ActionTaken
        return [*evs[:at], msgspec.structs.replace(e, action=2, candidates=[2, 3, 4, 5]), *evs[at + 1 :]]

    con = raw(db)
    rewrite_card(con, card, tamper, fix_close=False)
    con.close()
    with Ledger.open(db) as led:
        c = resim(led, card, envs)
    assert c.status == "FAIL" and c.details["divergence"]["version"] == at + 1, c.message


def _unseed(evs: list[AnyEvent]) -> list[AnyEvent]:
    return [msgspec.structs.replace(e, seed=None) if isinstance(e, PlayStarted) else e for e in evs]


def test_a_seed_not_recorded_is_found(master: Any, tmp_path: Path) -> None:
    """The disputed card's cnt3 play made with seed 1, its seed dropped (as a toolkit recording drops it): the
    default seed disagrees, seed 1 reproduces it, and the audit passes and says so."""
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    first_guid = next(e.guid for e in _events(db, card) if isinstance(e, PlayStarted))
    con = raw(db)
    rewrite_card(con, card, _unseed)
    con.close()
    code, doc = audit_json(db, card, "--environments", str(ENV_DIR))
    r = check(doc, "resimulation")
    assert code == 0 and r["status"] == "PASS", r["message"]
    assert r["seeds_found"] == {first_guid: 1} and r["default_seed_plays"] == 3
    assert "seed(s) 1 (guid " in r["message"]


def test_an_edited_play_without_a_seed_is_unknown_or_fails(master: Any, tmp_path: Path) -> None:
    """An action changed in a play without a recorded seed: where the seed changes the game (cnt3) no seed
    reproduces it and the audit says UNKNOWN, seed not recorded; where it does not (clk2), FAIL."""
    src, card, _, _ = master
    db = copy_ledger(src, tmp_path / "l.sqlite")
    events = _events(db, card)

    def edit(game: str) -> Any:
        # ACTION2 on the first cnt3 play (which does nothing) becomes an ACTION1 press; a clk2 click moves.
        def tamper(evs: list[AnyEvent]) -> list[AnyEvent]:
            out = _unseed(evs)
            for i, e in enumerate(out):
                if type(e) is ActionTaken and e.game_id.startswith(game):
                    new = (
                        msgspec.structs.replace(e, action=1) if game == "cnt3" else msgspec.structs.replace(e, x=0, y=0)
                    )
                    if new != e and (game != "cnt3" or e.action == 2):
                        out[i] = new
                        return out
            raise AssertionError(game)

        return tamper

    con = raw(db)
    rewrite_card(con, card, edit("cnt3"), fix_close=False)
    con.close()
    code, doc = audit_json(db, card, "--environments", str(ENV_DIR))
    r = check(doc, "resimulation")
    assert r["status"] == "UNKNOWN" and r["message"].startswith("seed not recorded: no seed of 0..31 reproduces")
    db2 = copy_ledger(src, tmp_path / "l2.sqlite")
    con = raw(db2)
    rewrite_card(con, card, edit("clk2"), fix_close=False)
    con.close()
    code, doc = audit_json(db2, card, "--environments", str(ENV_DIR))
    assert statuses(doc)["resimulation"] == "FAIL" and code == 1, json.dumps(check(doc, "resimulation"))
    assert len(events) > 0


def test_the_viewer_draws_undecided_actions_as_the_game_decided_them(tmp_path: Path, envs: Path) -> None:
    """The replay frames of a card imported from the frames alone follow the play to its end (no divergence)."""
    from ledger.domain.events import Numbered
    from ledger.resim.frames import encode_grid, play_frames

    rec = tmp_path / "rec"
    run = run_swarm(rec, ["lsx2-0000002b"], 6, env_dir=envs, max_actions=40)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        import_recordings(led, [rec])
        (card,) = led.card_ids()
        rows = led.store.read_stream(card_stream(card))
    events = [Numbered(r.version, r.seq, decode(r.body)) for r in rows]
    assert any(type(n.event) is ActionTaken and n.event.candidates for n in events)
    plays = sum(type(n.event) is PlayStarted for n in events)
    drawn = []
    for play in range(1, plays + 1):
        frames = play_frames(events, "lsx2-0000002b", play, envs)
        assert frames.error is None and frames.diverged is None, (play, frames.diverged)
        assert len(frames.steps) == frames.total_steps
        drawn += [s.grid for s in frames.steps[1 if play == 1 else 0 :]]
    # Every grid drawn is the frame the harness recorded for that step (Arcade.make's first answer aside).
    recorded = [encode_grid(f.frame[-1])[0] if len(f.frame) else None for f in run.agents[0].frames[1:]]
    assert drawn == recorded


def test_toolkit_recordings_of_seeded_plays_pass_their_audit(tmp_path: Path) -> None:
    """Plays made with ``arc.make(game, seed=N)`` and recorded by the toolkit (which does not record N), imported and
    audited by the ``ledger`` commands (through Click's runner): the seed is found and the audit passes."""
    import random as _random

    from tests.cli_run import in_process as ledger
    from tests.cli_run import no_traceback
    from tests.toolkit import arcade, step

    arc = arcade(recordings_dir=str(tmp_path / "rec"))
    card = arc.open_scorecard()
    for seed in (1, 3):  # odd seeds: level 1 of cnt3 needs one more press than the default seed's
        env = arc.make("cnt3", scorecard_id=card, seed=seed, save_recording=True)
        rng = _random.Random(seed)
        for _ in range(12):
            step(env, rng.choice([1, 1, 2, 4]))
    arc.close_scorecard(card)
    db = str(tmp_path / "l.sqlite")
    r = ledger("--db", db, "import", str(tmp_path / "rec"))
    assert r.returncode == 0, r.stderr
    r = ledger("--db", db, "audit", card, "--environments", str(ENV_DIR), "--json")
    no_traceback(r)
    doc = json.loads(r.stdout)
    resim = check(doc, "resimulation")
    assert r.returncode == 0 and resim["status"] == "PASS", resim["message"]
    assert sorted(resim["seeds_found"].values()) == [1, 1]  # seed 3 starts cnt3 as seed 1 does: 1 is tried
    assert resim["default_seed_plays"] == 2
    # The viewer draws them with the seed found: frames to the end of each play, no divergence.
    from ledger.domain.events import Numbered
    from ledger.resim.frames import play_frames

    with Ledger.open(Path(db)) as led:
        events = [Numbered(r.version, r.seq, decode(r.body)) for r in led.store.read_stream(card_stream(card))]
    for play in (1, 2):
        frames = play_frames(events, "cnt3-0000000a", play, ENV_DIR)
        assert frames.error is None and frames.diverged is None and len(frames.steps) == frames.total_steps == 13


#: A game that reads the pixel a click lands on at a finer grain than its 8x8 camera's cells (as the public bp35
#: does with its own tiles): the mark goes to the clicked cell, and a second one shows the column within it.
PIXL = """
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite


class Pixl(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        mark = Sprite(pixels=[[3]], name="mark", x=0, y=0)
        fine = Sprite(pixels=[[4]], name="fine", x=0, y=7)
        level = Level(sprites=[mark, fine], grid_size=(8, 8))
        super().__init__(game_id="pixl", levels=[level], camera=Camera(width=8, height=8), available_actions=[1, 6])

    def step(self) -> None:
        if self.action.id == GameAction.ACTION6:
            x, y = self.action.data["x"], self.action.data["y"]
            self.current_level.get_sprites_by_name("mark")[0].set_position(x // 8, min(y // 8, 6))
            self.current_level.get_sprites_by_name("fine")[0].set_position(x % 8, 7)
        self.complete_action()
"""


@pytest.mark.heavy
def test_a_click_read_finer_than_the_camera_cells_is_found_at_its_pixel(tmp_path: Path, envs: Path) -> None:
    """Imported from the frames, a recording of clicks that a game reads by the pixel (one pixel per camera cell
    reproduces none of them): the audit with the code tries every display pixel and passes, both ways."""
    import random
    import shutil

    from arcengine import GameAction

    from tests.harness_recorder import Recorder, convert, game_dir
    from tests.toolkit import arcade

    mine = tmp_path / "envs"
    shutil.copytree(envs, mine)
    game_dir(mine, "pixl", PIXL)
    rng = random.Random(5)
    arc = arcade(mine)
    env = arc.make("pixl-01", scorecard_id=arc.open_scorecard())
    rec = Recorder(tmp_path / "rec", "pixl-01.seededrandom.12", rng)
    for k in range(12):
        if k % 3 == 2:
            raw = env.step(GameAction.ACTION1)
        else:  # never a cell's top-left pixel
            raw = env.step(
                GameAction.ACTION6, data={"x": rng.randrange(8) * 8 + rng.randint(1, 7), "y": rng.randrange(64)}
            )
        rec.record(json.loads(convert(raw).model_dump_json()))
    with Ledger.open(tmp_path / "l.sqlite") as led:
        assert import_recordings(led, [tmp_path / "rec"]).exit_code == 0
        (card,) = led.card_ids()
        first, every = resim(led, card, mine), resim(led, card, mine, decide=True)
        taken = first.details["reproduced_actions"]
    assert first.status == "PASS" and taken >= 8, first.message
    assert every.status == "PASS", every.message


def test_a_search_that_spends_the_game_steps_allowed_is_unknown_not_endless(
    tmp_path: Path, envs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the paths through the open actions are too many to search (a click game's clicks on nothing that still
    count), the audit stops once the guid's game steps allowed are spent and says UNKNOWN, why, and that --decide
    searches on; the import reads that recording's actions from the frames. Here the allowance is made tiny."""
    from ledger.toolkit import search_budget

    rec = tmp_path / "rec"
    run_swarm(rec, ["clk2-0000000b"], 3, env_dir=envs, max_actions=60)
    db = tmp_path / "l.sqlite"
    with Ledger.open(db) as led:
        assert import_recordings(led, [rec]).exit_code == 0
        (card,) = led.card_ids()
        assert resim(led, card, envs).status == "PASS"
        monkeypatch.setattr(search_budget, "BASE_STEPS", 5)
        monkeypatch.setattr(search_budget, "STEPS_PER_INPUT", 0)
        spent = resim(led, card, envs)
        assert spent.status == "UNKNOWN" and "given up at version" in spent.message, spent.message
        assert "--decide searches without a limit" in spent.message
        assert resim(led, card, envs, decide=True).status == "PASS"
        # A game whose every step is slow spends its CPU seconds first.
        monkeypatch.setattr(search_budget, "BASE_STEPS", 10**9)
        monkeypatch.setattr(search_budget, "BASE_SECONDS", 0.0)
        monkeypatch.setattr(search_budget, "SECONDS_PER_INPUT", 0.0)
        late = resim(led, card, envs)
        assert late.status == "UNKNOWN" and "given up at version" in late.message, late.message
        assert resim(led, card, envs, decide=True).status == "PASS"
        monkeypatch.setattr(search_budget, "BASE_STEPS", 5)
    code, out = run("--db", str(db), "audit", card, "--environments", str(envs))
    assert code == 0 and "UNKNOWN resimulation" in out and "Traceback" not in out, out
    coded = tmp_path / "coded.sqlite"
    with Ledger.open(coded) as led:
        res = import_recordings(led, [rec], environments=envs)
        assert res.exit_code == 0
        (card,) = led.card_ids()
        evs = [decode(b) for b in led.store.read_bodies(card_stream(card))[0]]
    (inferred,) = [e for e in evs if type(e).__name__ == "ActionsInferred"]
    assert inferred.method == "frames", inferred  # type: ignore[attr-defined]
    assert any("was given up after" in p.message for p in res.problems), res.problems
    code, out = run("--db", str(tmp_path / "cli.sqlite"), "import", str(rec), "--environments", str(envs))
    assert code == 0 and "was given up after" in out and "read from the frames: the notes say why" in out, out


def test_a_copy_of_a_game_over_or_win_line_is_skipped_from_the_frames_alone(tmp_path: Path, envs: Path) -> None:
    """The benchmarking harness writes the last frame again for an action it did not send. After GAME_OVER or WIN
    the game answers a game action with an empty frame and RESET with a new start, so a line repeating the end's
    frame never reached it: the import without the code skips it as the import with the code does (it was taken
    for a level RESET, and the audit of the card FAILed on an honest recording)."""
    rec = tmp_path / "rec"
    run_swarm(rec, GAMES, 3, env_dir=envs, max_actions=60)
    copies = 0
    for path in rec.glob("*.recording.jsonl"):
        out = []
        for line in path.read_text().splitlines():
            out.append(line)
            rec_line = json.loads(line)
            data = rec_line["data"]
            if isinstance(data, dict) and data.get("state") in ("GAME_OVER", "WIN") and data.get("frame"):
                at = datetime.fromisoformat(rec_line["timestamp"]) + timedelta(microseconds=1)
                rec_line["timestamp"] = at.isoformat()
                out.append(json.dumps(rec_line))
                copies += 1
        path.write_text("\n".join(out) + "\n")
    assert copies >= 2
    counts = {}
    for name, code in (("frames", None), ("coded", envs)):
        with Ledger.open(tmp_path / f"{name}.sqlite") as led:
            res = import_recordings(led, [rec], environments=code)
            assert res.exit_code == 0, res.problems
            counts[name] = {}
            for card in led.card_ids():
                evs = [decode(b) for b in led.store.read_bodies(card_stream(card))[0]]
                counts[name][card] = sum(1 for e in evs if type(e) is ActionTaken)
                c = resim(led, card, envs)
                assert c.status == "PASS", (name, card, c.message)
    assert counts["frames"] == counts["coded"]


def test_lines_an_import_lists_are_written_a_chunk_at_a_time_and_read_as_listed_at_once(
    tmp_path: Path, envs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long recording's frame digests and undecided lines are listed over several events (never all held, nor all
    in one row): each FramesNoted after the open actions it notes, the ActionsInferred of a file one after another,
    the first holding the count. The audit decides and counts as it does from one event of each."""
    import ledger.imports.importing_harness as ih
    from ledger.domain.events import ActionsInferred, FramesNoted

    rec = tmp_path / "rec"
    run_swarm(rec, GAMES[:2], 5, env_dir=envs, max_actions=60)
    found = {}
    for chunk in (ih.EVENT_LINES, 3):
        monkeypatch.setattr(ih, "EVENT_LINES", chunk)
        with Ledger.open(tmp_path / f"{chunk}.sqlite") as led:
            assert import_recordings(led, [rec]).exit_code == 0
            for card in led.card_ids():
                evs = [decode(b) for b in led.store.read_bodies(card_stream(card))[0]]
                open_since, noted, inferred = 0, [], []
                for e in evs:
                    if type(e) is ActionTaken and e.candidates:
                        open_since += 1
                    elif type(e) is FramesNoted:
                        assert len(e.digests) == open_since and len(e.digests) <= chunk
                        noted.append(len(e.digests))
                        open_since = 0
                    elif type(e) is ActionsInferred:
                        assert len(e.undecided) <= chunk and (e.inferred > 0) == (not inferred)
                        inferred.append(e.undecided)
                lines = [ln for part in inferred for ln in part]
                assert open_since == 0 and lines == sorted(set(lines))
                assert chunk > 3 or (len(noted) >= 5 and len(inferred) >= 2), (noted, inferred)
                checks = audit_card(led, card, environments=envs, decide=True).checks
                names = ("consistency", "resimulation", "import")
                found.setdefault(card, []).append([(c.name, c.status, c.details) for c in checks if c.name in names])
    for one, chunked in found.values():
        assert [c[:2] for c in one] == [c[:2] for c in chunked]
        assert [c[:2] for c in one] == [("consistency", "PASS"), ("resimulation", "PASS"), ("import", "WARN")]
        assert one[1][2]["decided_actions"] == chunked[1][2]["decided_actions"]
        assert one[2][2] == chunked[2][2]
    assert sum(one[1][2]["decided_actions"] for one, _ in found.values()) >= 1


def test_an_audit_that_decides_lets_go_of_the_inputs_its_states_agree_on(
    tmp_path: Path, envs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deciding every candidate keeps several states of a game for long stretches: now and then the inputs up to the
    state they all come from are noted and their paths cut there (what is held is the inputs since, not all of a
    long record), and the audit decides, counts and draws the same as when it keeps every path."""
    import ledger.resim.state_search as hs
    from ledger.domain.events import Numbered
    from ledger.resim.resimulate import resimulate

    rec = tmp_path / "rec"
    run_swarm(rec, GAMES, 6, env_dir=envs, max_actions=60)
    cuts = 0
    due = hs.SettleSchedule.due

    def counted(self: Any, kept: list[Any]) -> Any:
        nonlocal cuts
        found = due(self, kept)
        cuts += found is not None
        return found

    monkeypatch.setattr(hs.SettleSchedule, "due", counted)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        assert import_recordings(led, [rec]).exit_code == 0
        found: dict[int, list[Any]] = {}
        for every in (10**9, 1, 3):
            monkeypatch.setattr(hs, "SETTLE_EVERY", every)
            for card in led.card_ids():
                check = resim(led, card, envs, decide=True)
                rows = led.store.read_stream(card_stream(card))
                res = resimulate([Numbered(r.version, r.seq, decode(r.body)) for r in rows], envs, decide=True)
                found.setdefault(every, []).append((check.status, check.details, sorted(res.choices.items())))
            if every == 10**9:
                assert cuts == 0
    assert found[1] == found[10**9] == found[3]
    assert cuts >= 3 and sum(d["decided_actions"] for _, d, _ in found[1]) >= 1
