"""Importing the ARC-AGI-3-Agents harness's recordings, and the import's honesty about what it could not read.

The recordings are written by ``tests/harness_recorder.py`` (the harness's swarm/agent/recorder logic, its
``action_input`` bug included) from seeded agents playing through the real toolkit; each imported card is compared
with the toolkit's own scorecard entry for that game.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.app.audit import audit_card
from ledger.app.verify import verify_ledger
from ledger.cli import cli
from ledger.domain.events import (
    ActionsInferred,
    BaselinesAttached,
    CardOpened,
    LevelReset,
    LinesSkipped,
    PlayStarted,
    RecordingImported,
    RunUsage,
    card_stream,
    decode,
    encode,
)
from ledger.imports.importing import import_recordings
from tests.harness_recorder import SwarmRun, environments, game_entry, run_swarm
from tests.test_harness_audit import resim
from tests.toolkit import ENV_DIR, arcade, step

VIS = "vis5-0000001a"  # every action shows in its frame: resets are always decidable
STATIC = ["cnt3-0000000a", "clk2-0000000b", "shrt-0000000e"]  # frames that do not change within a level


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return environments(tmp_path_factory.mktemp("envs"))


def events_of(led: Ledger, card_id: str) -> list[Any]:
    return [decode(b) for b in led.store.read_bodies(card_stream(card_id))[0]]


def invoke(db: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--db", str(db), *args])
    return r.exit_code, r.stdout, r.stderr


def without_resets(entry: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in entry.items() if k != "resets"}
    out["runs"] = [{k: v for k, v in r.items() if k != "resets"} for r in entry["runs"]]
    return out


def compare(led: Ledger, run: SwarmRun, summary: Any, seen: dict[str, int]) -> None:
    """Each agent's card against the toolkit's entry for its game: exact, resets included, unless lines were
    undecided, and then every other number exact and the reset gap no larger than the undecided lines."""
    for agent in run.agents:
        card_id = agent.recorder.guid
        got = game_entry(json.loads(led.export(card_id)), agent.game_id)
        want = game_entry(run.expected, agent.game_id)
        if sum(a.game_id == agent.game_id for a in run.agents) > 1:
            # Two agents on one game and one toolkit card: the toolkit's entry holds both; compare this guid's runs.
            guid = got["runs"][0]["guid"]
            got = {"runs": got["runs"], "resets": sum(r["resets"] for r in got["runs"])}
            want = {"runs": [r for r in want["runs"] if r["guid"] == guid]}
            want["resets"] = sum(r["resets"] for r in want["runs"])
        result = next(c for c in summary.cards if c.card_id == card_id)
        assert result.format == "harness" and result.resets_known and result.unreproduced == 0
        if result.undecided == 0:
            assert got == want, (agent.game_id, card_id)
            seen["exact"] += 1
        else:
            assert without_resets(got) == without_resets(want), (agent.game_id, card_id)
            assert 0 <= want["resets"] - got["resets"] <= result.undecided
            seen["undecided"] += 1
        evs = events_of(led, card_id)
        opened = evs[0]
        assert type(opened) is CardOpened and opened.card_id == card_id and opened.tags == [agent.kind]
        inferred = [e for e in evs if type(e) is ActionsInferred]
        assert len(inferred) == 1 and inferred[0].method == "resimulated" and inferred[0].resets_known
        assert (
            inferred[0].inferred == sum(1 for f in agent.frames[1:]) and len(inferred[0].undecided) == result.undecided
        )
        seen["level resets"] += any(type(e) is LevelReset for e in evs)
        seen["several plays"] += sum(type(e) is PlayStarted for e in evs) > 1
        seen["after the end"] += any(not f.frame for f in agent.frames[1:])
        seen["clicks"] += any(a == 6 for a, _, _ in agent.sent)


def test_seeded_harness_runs_import_to_the_toolkits_cards(tmp_path: Path, envs: Path) -> None:
    """Three swarms (one card each, several games, 130 actions per agent at most), LLM side lines in one, old
    ``score`` keys in another: every recording becomes its card, equal to the toolkit's entry for its game."""
    rec = tmp_path / "recordings"
    runs = [
        run_swarm(rec, [VIS, "cnt3-0000000a", "shrt-0000000e"], 11, env_dir=envs),
        run_swarm(rec, [VIS, VIS, "clk2-0000000b"], 12, env_dir=envs, llm=True),
        run_swarm(rec, [VIS, "cnt3-0000000a"], 13, env_dir=envs, old_style=True),
    ]
    seen = dict.fromkeys(("exact", "undecided", "level resets", "several plays", "after the end", "clicks"), 0)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        s = import_recordings(led, [rec], environments=envs)
        assert s.exit_code == 0, [str(p) for p in s.problems]
        assert [str(p) for p in s.problems if p.kind not in ("harness",)] == []
        seen["cross-checked"] = sum("final scorecard line agrees" in p.message for p in s.problems)
        assert s.totals()["imported"] == sum(len(r.agents) for r in runs) == 8
        assert "recordings" not in led.card_ids()
        for run in runs:
            compare(led, run, s, seen)
        assert s.inference()["inferred_actions"] == sum(len(a.sent) for r in runs for a in r.agents)
        assert s.skipped()["side lines (not frames)"] > 0
        assert verify_ledger(led.store).ok
        again = import_recordings(led, [rec], environments=envs)
        assert again.totals()["already_imported"] == 8 and again.totals()["events"] == 0
    # The runs covered what the test claims (a test that cannot fail proves nothing).
    assert seen["exact"] >= 4 and seen["undecided"] >= 1 and seen["cross-checked"] >= 1, seen
    assert all(seen[k] >= 2 for k in ("level resets", "several plays", "after the end", "clicks")), seen


def test_without_the_games_code_scores_are_exact_and_resets_unknown(tmp_path: Path, envs: Path) -> None:
    rec = tmp_path / "rec"
    run = run_swarm(rec, [VIS, "cnt3-0000000a"], 21, env_dir=envs)
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(rec))
    assert code == 0, err
    assert "resets unknown on 2 cards" in out and "from the frames, resets unknown" in out
    with Ledger.open(db) as led:
        base = json.loads(led.export(run.agents[0].recorder.guid))  # imported without baselines
        assert base["environments"][0]["runs"][0]["message"].startswith("No Matching EnvironmentInfo")
        from ledger.domain.baselines import as_map, canonical
        from ledger.toolkit.game_files import scan_environments

        bmap = as_map(canonical(scan_environments(envs)[0]))
        for agent in run.agents:
            got = game_entry(json.loads(led.export(agent.recorder.guid, baselines=bmap)), agent.game_id)
            assert without_resets(got) == without_resets(game_entry(run.expected, agent.game_id))
            evs = events_of(led, agent.recorder.guid)
            inferred = next(e for e in evs if type(e) is ActionsInferred)
            assert inferred.method == "frames" and not inferred.resets_known
            report = audit_card(led, agent.recorder.guid)
            imp = next(c for c in report.checks if c.name == "import")
            assert imp.status == "WARN" and "resets are unknown" in imp.message


@pytest.mark.heavy
def test_game_code_that_reproduces_none_of_a_recordings_lines_falls_back_to_the_frames(
    tmp_path: Path, envs: Path
) -> None:
    """Code that answers no line of a recording is not the game that made it (or its copies do not act as it does):
    the card is imported from the frames, as when the code does not start, not left out line by line."""
    rec = tmp_path / "rec"
    run = run_swarm(rec, ["lsx2-0000002b"], 4, env_dir=envs, max_actions=25)
    other = tmp_path / "other"
    shutil.copytree(envs, other)
    game = other / "lsx2" / "0000002b" / "lsx2.py"
    game.write_text(game.read_text().replace("ENERGY = 60", "ENERGY = 59"))  # another energy bar in every frame
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(rec), "--environments", str(other))
    assert code == 0, err
    assert "reproduces none of its 26 frame line(s): actions read from the frames only" in out + err
    with Ledger.open(db) as led:
        (card,) = led.card_ids()
        evs = events_of(led, card)
    inferred = next(e for e in evs if type(e) is ActionsInferred)
    assert inferred.method == "frames" and inferred.inferred == 26
    with Ledger.open(tmp_path / "same.sqlite") as led:  # the same file imported without the code: the same events
        import_recordings(led, [rec])
        (same,) = led.card_ids()
        assert [type(e) for e in events_of(led, same)] == [type(e) for e in evs]
    assert run.agents[0].game_id == "lsx2-0000002b"


# -- the benchmarking harness: the real file's shape, its run folders, its phantom copies -------------------------


def _benchmark_fixture(folder: Path, envs: Path, *, phantom: bool) -> tuple[Path, dict[str, Any]]:
    """The shape of arc-agi-3-benchmarking's recordings/ (commit 238e1bd): token lines between frame lines, three
    ACTION1 answers, and the run folder with run_meta.json and step_NNN.json; optionally a copy of the last frame
    recorded for an action the harness did not send (after a RESET)."""
    from tests.harness_recorder import convert

    arc = arcade(envs)
    card = arc.open_scorecard()
    env = arc.make(VIS, scorecard_id=card)
    name = f"{VIS}.conversationrollingwindow.gpt-x-openrouter.anim7"
    run_id = "546533b5-dc0c-4912-85de-a185df1221dc"
    path = folder / f"{name}.222f30a3-f3f6-48ee-b02c-583dea272051.recording.jsonl"
    run_dir = folder / f"{name}.{run_id}"
    run_dir.mkdir(parents=True)
    lines: list[str] = []
    total = 0
    actions = [1, 1, 1] + ([0, 2] if phantom else [])
    for i, a in enumerate(actions, 1):
        ts = f"2026-04-01T03:04:{19 + 2 * i:02d}.5"
        parsed = "RESET" if a == 0 else f"ACTION{a}"
        (run_dir / f"step_{i:03d}.json").write_text(
            json.dumps(
                {
                    "step": i,
                    "timestamp": ts + "5Z",
                    "model": "x",
                    "messages_sent": [],
                    "parsed_action": parsed,
                    "usage": {"prompt_tokens": 12000, "completion_tokens": 449, "total_tokens": 12449, "cost": 0.0125},
                }
            )
        )
        total += 12449
        tokens = {"tokens": 12449, "total_tokens": total, "conversation_length": 2 * i, "assistant": ""}
        lines.append(json.dumps({"timestamp": ts + "55969+00:00", "data": tokens}))
        if phantom and i == len(actions):
            frame = json.loads(lines[-2])["data"]  # the harness refused to send it: the last frame again
        else:
            from arcengine import GameAction

            frame = json.loads(convert(env.step(GameAction.from_id(a))).model_dump_json())
        lines.append(json.dumps({"timestamp": ts + "61483+00:00", "data": frame}))
    (run_dir / "run_meta.json").write_text(
        json.dumps(
            {
                "run_id": run_id,
                "game_id": VIS,
                "agent_name": name,
                "model": "x",
                "started_at": "2026-04-01T03:04:17Z",
                "ended_at": "2026-04-01T03:05:02Z",
                "usage": {"prompt_tokens": 36000, "completion_tokens": 1347, "total_tokens": 37347},
                "total_cost": 0.0375,
            }
        )
    )
    path.write_text("\n".join(lines) + "\n")
    expected = json.loads(arc.get_scorecard(card).model_dump_json())
    return path, expected


def test_the_benchmarking_files_shape_and_run_folder(tmp_path: Path, envs: Path) -> None:
    folder = tmp_path / "recordings"
    _, expected = _benchmark_fixture(folder, envs, phantom=False)
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(folder), "--environments", str(envs), "--json")
    assert code == 0, err
    doc = json.loads(out)
    (card,) = doc["cards"]
    assert card["card_id"] == "222f30a3-f3f6-48ee-b02c-583dea272051" and card["plays"] == 1
    assert (
        card["inferred_actions"] == 3
        and card["undecided_lines"] == 0
        and card["skipped"] == {"side lines (not frames)": 3}
    )
    assert any("parsed_action of 3 step(s)" in p["message"] for p in doc["problems"])
    with Ledger.open(db) as led:
        got = game_entry(json.loads(led.export(card["card_id"])), VIS)
        assert got == game_entry(expected, VIS) and got["actions"] == 3
        assert [e.action for e in events_of(led, card["card_id"]) if hasattr(e, "action")] == [1, 1, 1]


def test_a_phantom_copy_is_reported_and_skipped(tmp_path: Path, envs: Path) -> None:
    folder = tmp_path / "recordings"
    path, expected = _benchmark_fixture(folder, envs, phantom=True)
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(path), "--environments", str(envs))
    assert code == 0, err
    assert f"{path}:10: no action reproduces this line" in err
    assert "1 line no action reproduces" in out
    with Ledger.open(db) as led:
        card_id = path.name.split(".")[-3]
        assert game_entry(json.loads(led.export(card_id)), VIS) == game_entry(expected, VIS)
        (skipped,) = [e for e in events_of(led, card_id) if type(e) is LinesSkipped]
        assert [(s.line, s.reason) for s in skipped.lines] == [(10, "no action reproduces it")]


def test_a_copy_an_action_would_also_show_is_skipped_where_the_next_line_says_so(tmp_path: Path, envs: Path) -> None:
    """The benchmarking harness's copy of the last frame, here a RESET's level start, which a press that changes
    nothing (lsx3's ACTION5) shows too; the next RESET's full reset says the copy never reached the game (a full
    reset follows a RESET only). Taking the copy for the press lost the full reset and the play after it."""
    from arcengine import GameAction

    from tests.harness_recorder import convert

    game = "lsx3-0000003c"
    arc = arcade(envs)
    card = arc.open_scorecard()
    env = arc.make(game, scorecard_id=card)
    lines: list[str] = []
    for i, a in enumerate([1, 0, None, 0, 2, 3]):
        if a is None:
            data = json.loads(lines[-1])["data"]
        else:
            data = json.loads(convert(env.step(GameAction.from_id(a))).model_dump_json())
        lines.append(json.dumps({"timestamp": f"2026-04-01T03:04:{10 + i:02d}.5+00:00", "data": data}))
    expected = json.loads(arc.get_scorecard(card).model_dump_json())
    path = tmp_path / "rec" / f"{game}.agent.222f30a3-f3f6-48ee-b02c-583dea272051.recording.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(path), "--environments", str(envs))
    assert code == 0, err
    assert f"{path}:3: no action reproduces this line" in err and "1 line no action reproduces" in out, (out, err)
    with Ledger.open(db) as led:
        got = game_entry(json.loads(led.export("222f30a3-f3f6-48ee-b02c-583dea272051")), game)
        assert got == game_entry(expected, game), (got, game_entry(expected, game))
        assert [type(e).__name__ for e in events_of(led, "222f30a3-f3f6-48ee-b02c-583dea272051")].count(
            "PlayStarted"
        ) == 2
    # From the frames alone the copy is an action (the frames cannot tell it from the press): the audit says why
    # no path of the game fits, UNKNOWN, not a FAIL of an honest recording.
    frames_only = tmp_path / "frames.sqlite"
    code, out, err = invoke(frames_only, "import", str(path))
    assert code == 0, err
    with Ledger.open(frames_only) as led:
        check = resim(led, led.card_ids()[0], envs)
    assert check.status == "UNKNOWN" and "version 5 repeats the input before it" in check.message, check.message


# -- not a recording ---------------------------------------------------------------------------------------------


def test_jsonl_in_no_known_format_is_an_error_and_makes_no_card(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n')
    (folder / "events.jsonl").write_text('{"timestamp": "2026-01-01T00:00:00Z", "data": {"msg": "hi"}}\n')
    db = tmp_path / "l.sqlite"
    code, _, err = invoke(db, "import", str(folder))
    assert code == 2
    assert f"Error: {folder / 'events.jsonl'}: not a recording the ledger reads" in err
    assert "the toolkit's recordings" in err and "ARC-AGI-3-Agents harness" in err
    with Ledger.open(db) as led:
        assert led.card_ids() == []


# -- honest imports ----------------------------------------------------------------------------------------------


def _toolkit_recording(tmp_path: Path, seed: int = 0) -> tuple[Path, str]:
    arc = arcade(recordings_dir=str(tmp_path / "rec"))
    card = arc.open_scorecard()
    env = arc.make("cnt3", scorecard_id=card, save_recording=True)
    rng = random.Random(seed)
    for _ in range(14):
        step(env, rng.choice([1, 1, 2, 4]))
    (f,) = (tmp_path / "rec" / card).glob("*.jsonl")
    return f, card


def test_a_recording_rewritten_before_the_import_offset_is_refused(tmp_path: Path) -> None:
    f, _ = _toolkit_recording(tmp_path)
    db = tmp_path / "l.sqlite"
    assert invoke(db, "import", str(f))[0] == 0
    lines = f.read_bytes().split(b"\n")
    assert b'"ACTION1"' in lines[8] or b'"ACTION2"' in lines[8] or b'"ACTION4"' in lines[8]
    for a, b in ((b'"ACTION1"', b'"ACTION3"'), (b'"ACTION2"', b'"ACTION3"'), (b'"ACTION4"', b'"ACTION3"')):
        lines[8] = lines[8].replace(a, b)
    f.write_bytes(b"\n".join(lines))  # same size: only a whole-prefix hash sees it
    code, out, err = invoke(db, "import", str(f))
    assert code == 1, out
    assert "it was rewritten" in err and "0 already imported, 1 not imported" in out


def test_skipped_lines_are_recorded_and_the_audit_warns(tmp_path: Path) -> None:
    f, card = _toolkit_recording(tmp_path)
    lines = f.read_bytes().split(b"\n")
    cut = lines[5][: len(lines[5]) // 2]
    lines[5] = cut  # a line cut in the middle of the file
    f.write_bytes(b"\n".join(lines))
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(f))
    assert code == 0 and f"{f}:6: not JSON" in err
    with Ledger.open(db) as led:
        (ev,) = [e for e in events_of(led, card) if type(e) is LinesSkipped]
        assert ev.file == f.name and [(s.line, s.reason, s.size) for s in ev.lines] == [(6, "not JSON", len(cut))]
        import hashlib

        assert ev.lines[0].sha256 == hashlib.sha256(cut).hexdigest()
    code, out, _ = invoke(db, "audit", card)
    assert code == 0 and "WARN" in out and f"{f.name}:6 (not JSON)" in out


@pytest.mark.parametrize("what", ["levels_high", "levels_negative", "state", "time_backwards"])
def test_strict_refuses_impossible_values(tmp_path: Path, what: str) -> None:
    f, card = _toolkit_recording(tmp_path)
    lines = f.read_text().split("\n")
    d = json.loads(lines[4])
    if what == "levels_high":
        d["data"]["levels_completed"] = d["data"]["win_levels"] + 1
    elif what == "levels_negative":
        d["data"]["levels_completed"] = -1
    elif what == "state":
        d["data"]["state"] = "PAUSED"
    else:
        d["timestamp"] = "2000-01-01T00:00:00+00:00"
    lines[4] = json.dumps(d)
    f.write_text("\n".join(lines))
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", "--strict", str(f))
    assert code == 2 and f"{f}:5:" in err, (out, err)
    with Ledger.open(db) as led:
        assert card not in led.card_ids()
    code, out, err = invoke(db, "import", str(f))
    if what == "time_backwards":
        # Time going back is what files pasted together show: refused unless --allow-repeats.
        assert code == 2 and f"Error: {f}:5: timestamp" in err and "--allow-repeats" in out, (out, err)
        code, out, err = invoke(db, "import", "--allow-repeats", str(f))
    # Without --strict the value is reported and the card imported.
    assert code == 0 and f"{f}:5:" in err


def test_importing_again_with_environments_gives_baselines_to_cards_without(tmp_path: Path, envs: Path) -> None:
    f, card = _toolkit_recording(tmp_path)
    db = tmp_path / "l.sqlite"
    assert invoke(db, "import", str(f))[0] == 0
    with Ledger.open(db) as led:
        before = json.loads(led.export(card))
    assert before["score"] == 0 and "No Matching" in before["environments"][0]["runs"][0]["message"]
    code, out, err = invoke(db, "import", str(f), "--environments", str(ENV_DIR))
    assert code == 0 and "baselines attached to 1 card" in out, (out, err)
    with Ledger.open(db) as led:
        after = json.loads(led.export(card))
        assert (
            "message" not in after["environments"][0]["runs"][0]
            or "No Matching" not in after["environments"][0]["runs"][0]["message"]
        )
        assert any(type(e) is BaselinesAttached for e in events_of(led, card))
        assert audit_card(led, card).ok
        assert verify_ledger(led.store).ok
    # Once attached, nothing more to do.
    code, out, _ = invoke(db, "import", str(f), "--environments", str(ENV_DIR))
    assert code == 0 and "already imported" in out and "baselines attached" not in out


def test_a_harness_recording_rewritten_after_import_is_refused(tmp_path: Path, envs: Path) -> None:
    rec = tmp_path / "rec"
    run = run_swarm(rec, [VIS], 31, env_dir=envs, max_actions=20)
    path = run.agents[0].recorder.path
    db = tmp_path / "l.sqlite"
    assert invoke(db, "import", str(path), "--environments", str(envs))[0] == 0
    raw = bytearray(path.read_bytes())
    i = raw.index(b'"state": "NOT_FINISHED"')
    raw[i : i + 23] = b'"state": "GAME_OVER"   '
    path.write_bytes(bytes(raw))
    code, _, err = invoke(db, "import", str(path), "--environments", str(envs))
    assert code == 1 and "rewritten" in err
    with Ledger.open(db) as led:
        (ri,) = [e for e in events_of(led, run.agents[0].recorder.guid) if type(e) is RecordingImported]
        assert ri.prefix_sha256 is not None


def test_a_copy_of_the_harness_folder_elsewhere_is_the_same_card(tmp_path: Path, envs: Path) -> None:
    rec = tmp_path / "rec"
    run = run_swarm(rec, [VIS], 41, env_dir=envs, max_actions=15)
    other = tmp_path / "copy"
    shutil.copytree(rec, other)
    db = tmp_path / "l.sqlite"
    assert invoke(db, "import", str(rec), "--environments", str(envs))[0] == 0
    code, out, _ = invoke(db, "import", str(other), "--environments", str(envs))
    assert code == 0 and "already imported" in out
    with Ledger.open(db) as led:
        assert led.card_ids() == [run.agents[0].recorder.guid]


def test_a_grown_harness_recording_adds_only_its_new_lines(tmp_path: Path, envs: Path) -> None:
    """A run still going: import the first half (cut mid-line, as a live writer leaves it), then the rest."""
    rec = tmp_path / "rec"
    run = run_swarm(rec, [VIS], 51, env_dir=envs, max_actions=60)
    path = run.agents[0].recorder.path
    whole = path.read_bytes()
    cut = whole.index(b"\n", len(whole) // 2) + 40  # a partial line at the end
    path.write_bytes(whole[:cut])
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(path), "--environments", str(envs))
    assert code == 0 and "truncated last line" in err, (out, err)
    path.write_bytes(whole)
    code, out, err = invoke(db, "import", str(path), "--environments", str(envs))
    assert code == 0 and out.startswith("updated "), (out, err)
    with Ledger.open(db) as led:
        card_id = run.agents[0].recorder.guid
        assert game_entry(json.loads(led.export(card_id)), VIS) == game_entry(run.expected, VIS)
        reads = [e for e in events_of(led, card_id) if type(e) is RecordingImported]
        assert len(reads) == 2 and reads[-1].offset == len(whole)
        assert audit_card(led, card_id).ok
    code, out, _ = invoke(db, "import", str(path), "--environments", str(envs))
    assert code == 0 and out.startswith("already imported")


@pytest.mark.parametrize("what", ["cut", "levels_high", "time_backwards"])
def test_harness_bad_lines_are_recorded_and_strict_refuses_them(tmp_path: Path, envs: Path, what: str) -> None:
    run = run_swarm(tmp_path / "rec", [VIS], 61, env_dir=envs, max_actions=12)
    path = run.agents[0].recorder.path
    lines = path.read_text().split("\n")
    d = json.loads(lines[3])
    if what == "cut":
        lines[3] = lines[3][:200]
    elif what == "levels_high":
        d["data"]["levels_completed"] = d["data"]["win_levels"] + 1
        lines[3] = json.dumps(d)
    else:
        d["timestamp"] = "2000-01-01T00:00:00+00:00"
        lines[3] = json.dumps(d)
    path.write_text("\n".join(lines))
    db = tmp_path / "l.sqlite"
    code, _, err = invoke(db, "import", "--strict", str(path), "--environments", str(envs))
    assert code == 2 and f"{path}:4:" in err, err
    with Ledger.open(db) as led:
        assert led.card_ids() == []
    repeats = ["--allow-repeats"] if what == "time_backwards" else []
    code, _, err = invoke(db, "import", str(path), "--environments", str(envs), *repeats)
    assert code == 0 and f"{path}:4:" in err
    with Ledger.open(db) as led:
        card_id = run.agents[0].recorder.guid
        skipped = [e for e in events_of(led, card_id) if type(e) is LinesSkipped]
        if what == "cut":
            # The game never saw a line it cannot read: the next line is reproduced from the state before it.
            assert [(s.line, s.reason) for e in skipped for s in e.lines] == [(4, "not JSON")]
            # One action short of the toolkit's card, every later line still reproduced.
            got = game_entry(json.loads(led.export(card_id)), VIS)
            want = game_entry(run.expected, VIS)
            assert got["actions"] == want["actions"] - 1
            report = audit_card(led, card_id)
            assert next(c for c in report.checks if c.name == "import").status == "WARN"


def test_harness_import_on_each_backend(backend_ledger: Ledger, tmp_path: Path, envs: Path) -> None:
    run = run_swarm(tmp_path / "rec", [VIS, "cnt3-0000000a"], 71, env_dir=envs, max_actions=30)
    s = import_recordings(backend_ledger, [tmp_path / "rec"], environments=envs)
    assert s.exit_code == 0 and s.totals()["imported"] == 2
    vis = next(a for a in run.agents if a.game_id == VIS)
    got = game_entry(json.loads(backend_ledger.export(vis.recorder.guid)), VIS)
    assert got == game_entry(run.expected, VIS)
    again = import_recordings(backend_ledger, [tmp_path / "rec"], environments=envs)
    assert again.totals()["already_imported"] == 2


# -- a run captured live, then its recordings imported -------------------------------------------------------------


def test_a_run_captured_live_then_imported_is_one_card_compared(tmp_path: Path, envs: Path) -> None:
    """The harness's recordings of a run the ledger captured live: found by their guids, compared, never a second
    card; lines written after the live card closed are left out and reported; a changed copy differs (exit 1)."""
    db = tmp_path / "l.sqlite"
    rec = tmp_path / "rec"
    with Ledger.open(db) as led:
        arc = arcade(envs)
        capture = led.attach(arc)
        run = run_swarm(rec, [VIS, "cnt3-0000000a"], 71, env_dir=envs, max_actions=25, arc=arc)
        capture.detach()
        live_events = led.store.count()
    for with_envs in ([], ["--environments", str(envs)]):
        code, out, err = invoke(db, "import", str(rec), *with_envs)
        assert code == 0, (out, err)
        assert out.count(f"same card         {run.card_id}") == 2, out
        assert err.count(f"same card, equal: its plays are on card {run.card_id} (captured live)") == 2, err
        with Ledger.open(db) as led:
            assert led.card_ids() == [run.card_id] and led.store.count() == live_events
    # The harness kept stepping after the card closed (a Ctrl-C'd run): those lines are not counted.
    agent = next(a for a in run.agents if a.game_id == VIS)
    lines = agent.recorder.path.read_text().splitlines(keepends=True)
    final = lines.pop()  # the final scorecard line stays last
    frame = json.loads(lines[-1])
    if frame["data"]["state"] in ("GAME_OVER", "WIN"):  # a game action there is answered with an empty frame
        frame["data"]["frame"] = []
    later = [json.dumps({**frame, "timestamp": f"2099-01-01T00:00:0{i}+00:00"}) + "\n" for i in range(3)]
    agent.recorder.path.write_text("".join(lines + later) + final)
    code, out, err = invoke(db, "import", str(agent.recorder.path))
    assert code == 0, (out, err)
    assert "3 line(s) after the card closed at " in err and f"(from line {len(lines) + 1})" in err, err
    # A copy whose last frame says another level: the same run, differing - listed, exit 1, nothing written.
    changed = json.loads(lines[-1])
    changed["data"]["levels_completed"] = changed["data"]["levels_completed"] + 1
    agent.recorder.path.write_text("".join(lines[:-1]) + json.dumps(changed) + "\n" + final)
    code, out, err = invoke(db, "import", str(agent.recorder.path))
    assert code == 1 and f"differs           {run.card_id}: its plays are on card {run.card_id}" in out, (out, err)
    assert "levels_completed" in err
    with Ledger.open(db) as led:
        assert led.card_ids() == [run.card_id] and led.store.count() == live_events


def test_a_new_harness_card_says_how_its_id_was_made(tmp_path: Path, envs: Path) -> None:
    run = run_swarm(tmp_path / "rec", [VIS], 72, env_dir=envs, max_actions=8)
    path = run.agents[0].recorder.path
    code, out, err = invoke(tmp_path / "l.sqlite", "import", str(path))
    assert code == 0 and f"card id {run.agents[0].recorder.guid} is the recorder's uuid in the file name" in err
    # The empty final scorecard line of a local card is said too.
    assert "the final scorecard line is empty ({})" in err
    code, out, err = invoke(tmp_path / "m.sqlite", "import", str(path), "--card-id", run.card_id)
    assert code == 0 and out.startswith(f"imported          {run.card_id}:"), out


def test_a_benchmarking_run_gives_its_card_tags_usage_and_cost(tmp_path: Path, envs: Path) -> None:
    """The run folder's model and run id become the card's tags, its usage and cost are kept with the card (cost
    per level from the steps) and shown by replay; what the folder holds that was not used is listed."""
    folder = tmp_path / "recordings"
    path, _ = _benchmark_fixture(folder, envs, phantom=False)
    run_dir = next(d for d in folder.iterdir() if d.is_dir())
    (run_dir / "step_009.json").write_text(json.dumps({"step": 9, "timestamp": "2030-01-01T00:00:00Z"}))
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(path), "--environments", str(envs))
    assert code == 0, (out, err)
    assert f"Note: {run_dir}: run_meta.json keys not used: agent_name" in err
    assert f"Note: {run_dir}: 1 step file(s) unreadable or without a parsed_action, not used" in err
    card = "222f30a3-f3f6-48ee-b02c-583dea272051"
    with Ledger.open(db) as led:
        evs = events_of(led, card)
        assert evs[0].tags == [
            path.name.split(".")[1] + ".gpt-x-openrouter.anim7",
            "model:x",
            f"run:{run_dir.name[-36:]}",
        ]
        (usage,) = [e for e in evs if type(e) is RunUsage]
        assert (usage.model, usage.total_tokens, usage.cost, usage.ended_at) == (
            "x",
            37347,
            0.0375,
            "2026-04-01T03:05:02Z",
        )
        assert [(lv.levels_completed, lv.steps, lv.tokens) for lv in usage.levels] == [(0, 3, 3 * 12449)]
        assert usage.levels[0].cost == pytest.approx(3 * 0.0125)
    code, out, _ = invoke(db, "replay", card)
    assert code == 0 and f"run {run_dir.name[-36:]}, model x: 37347 tokens, $0.0375" in out
    assert "  level 1: 3 step(s), $0.0375, 37347 tokens" in out
    code, out, _ = invoke(db, "replay", card, "--json")
    assert json.loads(out)["run_usage"][0]["cost"] == 0.0375
    # The viewer's card page shows the same lines (a static bundle is the viewer's pages written out).
    code, out, err = invoke(db, "bundle", card, "-o", str(tmp_path / "site"))
    assert code == 0, (out, err)
    pages = [p.read_text() for p in (tmp_path / "site").rglob("*.html") if "Run usage and cost" in p.read_text()]
    assert len(pages) == 1 and "level 1: 3 step(s), $0.0375, 37347 tokens" in pages[0]


def test_two_harness_runs_put_together_are_refused(tmp_path: Path, envs: Path) -> None:
    """Two runs' recordings in one file (the later one after the earlier): two guids, so no card (exit 2)."""
    first = run_swarm(tmp_path / "a", [VIS], 73, env_dir=envs, max_actions=6).agents[0].recorder.path
    second = run_swarm(tmp_path / "b", [VIS], 74, env_dir=envs, max_actions=6).agents[0].recorder.path
    both = tmp_path / "c" / first.name
    both.parent.mkdir()
    both.write_bytes(first.read_bytes() + second.read_bytes())
    code, out, err = invoke(tmp_path / "l.sqlite", "import", str(both))
    assert code == 2 and "holds the frames of 2 plays" in err and out.startswith("not imported"), (out, err)
    with Ledger.open(tmp_path / "l.sqlite") as led:
        assert led.card_ids() == []


# -- a line cut by another write (Ctrl-C in the harness) -----------------------------------------------------------


@pytest.mark.parametrize("newline", [True, False], ids=["rest-on-next-line", "inside-one-line"])
def test_a_frame_line_cut_by_the_final_scorecard_line_is_recovered(tmp_path: Path, envs: Path, newline: bool) -> None:
    """The harness's signal handler writes the final ``{}`` line whole while the agent thread is between two writes
    of a frame line: the import takes the line apart, says so, and the card equals the toolkit's."""
    run = run_swarm(tmp_path / "rec", [VIS], 31, env_dir=envs, max_actions=40)
    path = run.agents[0].recorder.path
    lines = path.read_bytes().splitlines(keepends=True)
    final = lines.pop()  # {"timestamp": ..., "data": {}}\n, written by cleanup
    assert json.loads(final)["data"] == {}
    # The last frame line: one written wholly after the scorecard line was answered after the close (not counted).
    n = len(lines) - 1
    cut = lines[n].index(b"], [") + 2  # somewhere inside the frame
    lines[n] = lines[n][:cut] + (final if newline else final.rstrip(b"\n")) + lines[n][cut:]
    path.write_bytes(b"".join(lines))
    db = tmp_path / "l.sqlite"
    code, _, err = invoke(db, "import", str(path), "--environments", str(envs))
    assert code == 0, err
    said = [ln for ln in err.splitlines() if "cut by another write" in ln]
    rest = f"its rest is line {n + 2}" if newline else "and the rest of the line after it"
    assert (
        len(said) == 1
        and said[0].startswith(f"Note: {path}:{n + 1}: a record cut by another write: ")
        and rest in said[0]
    )
    assert "not JSON" not in err
    with Ledger.open(db) as led:
        got = game_entry(json.loads(led.export(run.agents[0].recorder.guid)), VIS)
        assert got == game_entry(run.expected, VIS)
        assert not [e for e in events_of(led, run.agents[0].recorder.guid) if type(e) is LinesSkipped]


def test_a_cut_line_whose_rest_was_never_written_is_not_guessed(tmp_path: Path, envs: Path) -> None:
    run = run_swarm(tmp_path / "rec", [VIS], 32, env_dir=envs, max_actions=20)
    path = run.agents[0].recorder.path
    lines = path.read_bytes().splitlines(keepends=True)
    final = lines.pop()
    lines[-1] = lines[-1][: len(lines[-1]) // 2] + final  # the process exited before the rest was written
    path.write_bytes(b"".join(lines))
    _, _, err = invoke(tmp_path / "l.sqlite", "import", str(path), "--environments", str(envs))
    assert "cut by another write" not in err and f"{path}:{len(lines)}: not JSON: skipped" in err, err


# -- the real benchmarking pair's shape -----------------------------------------------------------------------------

RUN_ID = "546533b5-dc0c-4912-85de-a185df1221dc"
STEP_USAGE = [(12444, 0), (24845, 12288), (37246, 24704)]  # prompt tokens, cached tokens; 5 completion tokens each


def _real_pair(folder: Path, envs: Path) -> tuple[Path, Path, dict[str, Any]]:
    """The shape of the pair in arc-agi-3-benchmarking's recordings/ (commit 238e1bd), written here as data: the
    recording and the run folder of one run, whose names spell the model two ways; token lines 1.3 ms before each
    step file, frame lines 4 ms after; every usage field, a cost of 0.0 for 74,550 tokens."""
    from arcengine import GameAction

    from tests.harness_recorder import convert

    arc = arcade(envs)
    card = arc.open_scorecard()
    env = arc.make(VIS, scorecard_id=card)
    agent = f"{VIS}.conversationrollingwindow"
    path = folder / f"{agent}.gpt-5.4-openrouter.anim7.222f30a3-f3f6-48ee-b02c-583dea272051.recording.jsonl"
    run_dir = folder / f"{agent}.openai-gpt-5-4-2026-03-05.anim7.{RUN_ID}"
    run_dir.mkdir(parents=True)
    lines, total = [], 0
    for i, (prompt, cached) in enumerate(STEP_USAGE, 1):
        second = f"2026-04-01T03:04:{17 + 2 * i:02d}"
        usage = {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5, "reasoning_tokens": 0}
        usage |= {"cached_tokens": cached, "cache_write_tokens": 0, "cost": 0.0, "cost_details": {}}
        total += prompt + 5
        step = {"step": i, "timestamp": f"{second}.557281Z", "model": "gpt-5.4-2026-03-05", "messages_sent": []}
        step |= {"assistant_response": "ACTION1", "reasoning": None, "parsed_action": "ACTION1", "usage": usage}
        (run_dir / f"step_{i:03d}.json").write_text(json.dumps(step | {"retries": 0}, indent=2))
        tokens = {"tokens": prompt + 5, "total_tokens": total, "conversation_length": 2 * i, "assistant": ""}
        lines.append(json.dumps({"timestamp": f"{second}.555969+00:00", "data": tokens}))
        frame = json.loads(convert(env.step(GameAction.ACTION1)).model_dump_json())
        lines.append(json.dumps({"timestamp": f"{second}.561483+00:00", "data": frame}))
    meta = {"run_id": RUN_ID, "game_id": VIS, "agent_name": run_dir.name[:-37], "model": "gpt-5.4-2026-03-05"}
    meta |= {"started_at": "2026-04-01T03:04:17.229934Z", "ended_at": None, "duration_seconds": None}
    totals = {"prompt_tokens": 74535, "completion_tokens": 15, "total_tokens": 74550, "reasoning_tokens": 0}
    totals |= {"cached_tokens": 36992, "cache_write_tokens": 0, "cost": 0.0, "cost_details": {}}
    meta |= {"total_steps": 3, "total_usage": totals, "outcome": None, "run_dir": f"recordings/{run_dir.name}"}
    (run_dir / "run_meta.json").write_text(json.dumps(meta, indent=2))
    path.write_text("\n".join(lines) + "\n")
    return path, run_dir, json.loads(arc.get_scorecard(card).model_dump_json())


def test_the_real_benchmarking_pair_is_one_card_with_its_model_usage_and_cost(tmp_path: Path, envs: Path) -> None:
    folder = tmp_path / "recordings"
    path, run_dir, expected = _real_pair(folder, envs)
    # Another run of the game at the same time whose token counts are not the recording's: named, not used.
    other = folder / f"{VIS}.conversationrollingwindow.other-model.anim7.{RUN_ID[:-1]}0"
    shutil.copytree(run_dir, other)
    meta = json.loads((other / "run_meta.json").read_text())
    (other / "run_meta.json").write_text(json.dumps(meta | {"run_id": other.name[-36:]}))
    step = json.loads((other / "step_002.json").read_text())
    step["usage"]["total_tokens"] = 999
    (other / "step_002.json").write_text(json.dumps(step))
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(folder), "--environments", str(envs))
    assert code == 0, err
    card = "222f30a3-f3f6-48ee-b02c-583dea272051"
    assert out.startswith(f"imported          {card}: 1 file, 6 lines, 1 play")
    assert (
        f"Note: {path}: parsed_action of 3 step(s) from {run_dir.name}/ used (matched by game, run id and the times "
        "of its steps and their token counts)"
    ) in err
    assert (
        f"Note: {other}: run folder not used: not this recording's run: step_002 says 999 tokens, the recording's "
        "token line(s) before its frame line 4 say 24850"
    ) in err
    with Ledger.open(db) as led:
        assert game_entry(json.loads(led.export(card)), VIS) == game_entry(expected, VIS)
        evs = events_of(led, card)
        assert evs[0].tags == [
            "conversationrollingwindow.gpt-5.4-openrouter.anim7",
            "model:gpt-5.4-2026-03-05",
            f"run:{RUN_ID}",
        ]
        (usage,) = [e for e in evs if type(e) is RunUsage]
        assert (usage.input_tokens, usage.output_tokens, usage.total_tokens, usage.cost) == (74535, 15, 74550, 0.0)
        assert (usage.cached_tokens, usage.reasoning_tokens, usage.cache_write_tokens) == (36992, 0, 0)
        assert usage.usage_other == {"cost_details": {}}
        assert [(lv.steps, lv.tokens, lv.cost) for lv in usage.levels] == [(3, 74550, 0.0)]
        # Events written before these fields existed encode (and hash) as they did: the new fields are left out.
        old = msgspec.structs.replace(usage, cached_tokens=None, reasoning_tokens=None, cache_write_tokens=None)
        old = msgspec.structs.replace(old, usage_other=None)
        assert encode(decode(encode(old))) == encode(old) and b"cached" not in encode(old)
    code, out, _ = invoke(db, "replay", card)
    assert code == 0 and "$0.0000" not in out
    assert (
        f"run {RUN_ID}, model gpt-5.4-2026-03-05: 74550 tokens, cost reported as 0.0 (74535 input, 15 output, "
        "36992 cached, 0 reasoning, 0 cache-write, cost_details {})"
    ) in out
    assert "  level 1: 3 step(s), cost reported as 0.0, 74550 tokens" in out


def test_a_run_folder_given_alone_imports_its_recording(tmp_path: Path, envs: Path) -> None:
    folder = tmp_path / "recordings"
    path, run_dir, expected = _real_pair(folder, envs)
    db = tmp_path / "l.sqlite"
    code, _, err = invoke(db, "import", str(run_dir), "--environments", str(envs))
    assert code == 0, err
    assert f"Note: {run_dir}: a benchmarking run folder (run_meta.json, step files): it holds the actions" in err
    assert f"imported with the recording of its game whose lines span its steps, {path.name}" in err
    with Ledger.open(db) as led:
        assert game_entry(json.loads(led.export(path.name.split(".")[-3])), VIS) == game_entry(expected, VIS)
    # One of its files given is the run folder given.
    code, _, err = invoke(tmp_path / "n.sqlite", "import", str(run_dir / "run_meta.json"))
    assert code == 0 and f"imported with the recording of its game whose lines span its steps, {path.name}" in err
    path.unlink()
    code, _, err = invoke(tmp_path / "m.sqlite", "import", str(run_dir))
    assert code == 2 and f"no recording of game {VIS} beside it spans its steps" in err, err


#: A game that comes to hold what no copy can hold (a generator, after its first ACTION1): the search copies the state
#: an action leaves before it goes on from it.
GENS = """
from arcengine import ARCBaseGame, Camera, GameAction, Level, Sprite


class Gens(ARCBaseGame):
    def __init__(self, seed: int = 0) -> None:
        self.gen = None
        self.player = Sprite(pixels=[[3]], name="p", x=0, y=0)
        level = Level(sprites=[self.player], grid_size=(8, 8))
        super().__init__(game_id="gens", levels=[level], camera=Camera(width=8, height=8), available_actions=[1, 2])

    def step(self) -> None:
        if self.action.id == GameAction.ACTION1 and self.gen is None:
            self.gen = (i for i in range(3))
        self.player.set_position((self.player.x + 1) % 8, 0)
        self.complete_action()
"""


def test_a_game_state_no_copy_can_hold_falls_back_to_the_frames_and_its_audit_says_unknown(
    tmp_path: Path, envs: Path
) -> None:
    """No traceback when the search meets a state it cannot copy: the import reads the card from the frames and
    says why; the audit of that card with the code says UNKNOWN and why, never FAIL."""
    from tests.harness_recorder import game_dir

    mine = tmp_path / "envs"
    shutil.copytree(envs, mine)
    game_dir(mine, "gens", GENS)
    run = run_swarm(tmp_path / "rec", ["gens-01"], 3, env_dir=mine, max_actions=20)
    (rec,) = (tmp_path / "rec").glob("*.recording.jsonl")
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(rec), "--environments", str(mine))
    assert code == 0, err
    assert "the state of gens-01 could not be copied to search it (" in out + err
    assert "actions read from the frames only" in out + err
    with Ledger.open(db) as led:
        (card,) = led.card_ids()
        inferred = next(e for e in events_of(led, card) if type(e) is ActionsInferred)
        assert inferred.method == "frames"
        resim = next(c for c in audit_card(led, card, environments=mine).checks if c.name == "resimulation")
    assert resim.status == "UNKNOWN" and "could not be copied" in resim.message, resim
    assert run.agents[0].game_id == "gens-01"


def test_the_frame_lines_held_as_columns_give_back_each_line_as_recorded(tmp_path: Path) -> None:
    """A recording's frame lines are held as columns (FrameLines): each line read back has its own time to the
    microsecond with its own offset, guid (or none), state, levels, win_levels (or none), full_reset, actions and
    frame; equal values are one object."""
    from datetime import datetime

    from ledger.formats.builtin_readers import parse_name
    from ledger.formats.harness import read_harness

    stamps = ["2026-01-02T03:04:05.123456+00:00", "2026-01-02T05:04:05.5+02:00", "1969-12-31T23:59:59.999999Z"]
    lines = []
    for i in range(9):
        data: dict[str, Any] = {
            "game_id": "lsx3-0000003c",
            "frame": [[[i % 3, 1], [2, 3]]],
            "state": ["NOT_FINISHED", "GAME_OVER", "WIN"][i % 3],
            "levels_completed": i,
            "action_input": {"id": 0},
            "guid": None if i == 4 else "g-1",
            "full_reset": i % 2 == 0,
            "available_actions": [1, 2] if i % 2 else [6],
        }
        if i != 5:
            data["win_levels"] = 9 + i
        lines.append({"timestamp": stamps[i % 3], "data": data})
    path = tmp_path / "lsx3-0000003c.agent.0d9c2d53-8e1b-4c5e-9d43-5d0e6a2b1a11.recording.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    read = read_harness(path, parse_name(path.name))  # type: ignore[arg-type]
    assert len(read.frames) == 9
    for i, (f, x) in enumerate(zip(read.frames, lines, strict=True)):
        ts = datetime.fromisoformat(x["timestamp"])
        d = x["data"]
        assert (f.lineno, f.ts, f.ts.isoformat(), f.ts.utcoffset()) == (i + 1, ts, ts.isoformat(), ts.utcoffset())
        assert (f.guid, f.state, f.levels_completed, f.win_levels, f.full_reset) == (
            d["guid"],
            d["state"],
            d["levels_completed"],
            d.get("win_levels"),
            d["full_reset"],
        )
        assert f.available_actions == tuple(d["available_actions"])
        assert msgspec.json.decode(f.frame) == d["frame"]
    assert read.frames[-1] == read.frames[8] and read.frames[-9] == read.frames[0]
    assert read.frames[0].packed is read.frames[3].packed and read.frames[1].game_id is read.frames[7].game_id


def test_a_line_map_holds_each_lines_value_in_line_order() -> None:
    """LineMap (what an import or an audit finds per line): a mapping of the lines set, in line order, each distinct
    value once; the last line may be set again, an earlier one may not (the caller's order is wrong)."""
    from ledger.formats.frame_lines import LineMap

    m: LineMap[list[int]] = LineMap(key=tuple)
    for line, value in ((3, [1, 2]), (7, [1, 2]), (9, [0]), (9, [5]), (12, [0])):
        m[line] = value
    assert dict(m) == {3: [1, 2], 7: [1, 2], 9: [5], 12: [0]} and len(m) == 4 and list(m) == [3, 7, 9, 12]
    assert m[3] is m[7] and m.get(8) is None and m.get(8, "x") == "x" and 12 in m and 4 not in m
    with pytest.raises(KeyError):
        m[1]
    with pytest.raises(ValueError):
        m[8] = [1]
    m.drop_from(8)
    assert dict(m) == {3: [1, 2], 7: [1, 2]}
    m[8] = [1]
    assert list(m.items()) == [(3, [1, 2]), (7, [1, 2]), (8, [1])]


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_lines_kept_a_chunk_at_a_time_read_back_as_they_were_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """FrameLines and LineMap keep full chunks in a temporary file (what a long recording's lines cost is not held in
    memory): read back in order, by place, from the end, in slices, by line, after lines dropped across chunks and
    set again, they give what a list and a dict of the same lines give; no file is left behind."""
    import tempfile
    from datetime import UTC, datetime, timedelta, timezone

    import ledger.formats.frame_lines as fl
    from ledger.formats.frame_lines import FrameLine, FrameLines, LineMap, pack

    monkeypatch.setattr(fl, "CHUNK", chunk)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rng = random.Random(chunk)
    lines: list[FrameLine] = []
    held = FrameLines()
    for i in range(1, 30):
        zone = rng.choice([UTC, timezone(timedelta(hours=2))])
        f = FrameLine(
            i,
            datetime(2026, 1, 1, tzinfo=zone) + timedelta(microseconds=rng.randrange(10**9)),
            "lsx3-0000003c",
            rng.choice([None, "g-1"]),
            rng.choice(["WIN", "NOT_FINISHED"]),
            rng.randrange(3),
            rng.choice([None, 5]),
            rng.random() < 0.5,
            pack(rng.choice([b"[]", b"[[[1]]]", b"[[[2]]]"])),
            rng.choice([(1, 2), (6,)]),
        )
        lines.append(f)
        held.append(f)
        assert list(held) == lines and len(held) == len(lines)
        assert [held[j] for j in range(-len(lines), len(lines))] == lines + lines
        assert held[2:7] == lines[2:7] and held[::-3] == lines[::-3]
    with pytest.raises(IndexError):
        held[len(lines)]
    assert held._spill._file is not None and os.listdir(tmp_path) == []  # unlinked as soon as it is made
    for _ in range(40):
        m: LineMap[list[int]] = LineMap(key=tuple)
        want: dict[int, list[int]] = {}
        last = 0
        for _ in range(rng.randrange(40)):
            r = rng.random()
            if r < 0.1 and want:  # a path searched again from an earlier line
                cut = rng.randrange(0, last + 2)
                m.drop_from(cut)
                want = {k: v for k, v in want.items() if k < cut}
                last = max(want, default=0)
                continue
            if r > 0.2 or not want:
                last += rng.randrange(1, 4)
            m[last] = want[last] = [rng.randrange(3)]
            assert list(m) == sorted(want) and len(m) == len(want) and list(m.items()) == sorted(want.items())
            assert [m.get(k) for k in range(last + 3)] == [want.get(k) for k in range(last + 3)]
            assert all((k in m) == (k in want) for k in range(last + 3))


def test_each_step_is_compared_with_the_token_lines_since_the_line_before() -> None:
    """The token count a matched step is compared with: the sum of the token lines written after the matched line
    before it and at or before its own frame line's time (a retried model call wrote several, a forced RESET none).
    Read side by side where both go forward in time, again for each line where they do not (lines out of order,
    --allow-repeats): the same counts as reading every token line for each step."""
    from datetime import UTC, datetime, timedelta

    from ledger.formats.frame_lines import LineMap
    from ledger.formats.run_folders import Step, _written_before

    rng = random.Random(8)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for case in range(60):
        shuffled = case % 3 == 0
        times = sorted(rng.randrange(40) for _ in range(rng.randrange(12)))
        if shuffled:
            rng.shuffle(times)
        tokens: LineMap[tuple[datetime, int]] = LineMap()
        for i, t in enumerate(times):
            tokens[i] = (t0 + timedelta(seconds=t), 1000 + i)
        at = sorted(rng.randrange(45) for _ in range(rng.randrange(1, 10)))
        if case % 5 == 0:
            rng.shuffle(at)
        lines = [(10 + i, t0 + timedelta(seconds=t), Step(i, t0, 1)) for i, t in enumerate(at)]
        want = []
        before = None
        for ln, when, chosen in lines:
            since = [n for ts, n in tokens.values() if ts <= when and (before is None or ts > before)]
            want.append((ln, chosen, sum(since) if since else None))
            before = when
        assert list(_written_before(tokens, lines)) == want, case


def test_a_temporary_directory_that_refuses_the_lines_kept_is_one_line_and_nothing_written(
    tmp_path: Path, envs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording longer than a chunk keeps its lines in the temporary directory: when it is full (or refuses them),
    the import and the audit say so in one line naming it, exit 1, and the import writes nothing of the card."""
    import errno
    import tempfile

    import ledger.formats.frame_lines as fl

    rec = tmp_path / "rec"
    run_swarm(rec, ["vis5-0000001a"], 3, env_dir=envs, max_actions=30)
    db = tmp_path / "l.sqlite"
    monkeypatch.setattr(fl, "CHUNK", 4)

    def full(*_a: Any, **_k: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    for args in ((), ("--environments", str(envs))):
        with monkeypatch.context() as m:
            m.setattr(tempfile, "TemporaryFile", full)
            r = CliRunner().invoke(cli, ["--db", str(db), "import", str(rec), *args])
        assert r.exit_code == 1 and "Traceback" not in r.output, r.output
        assert f"in the temporary directory {tempfile.gettempdir()}: No space left on device" in r.output, r.output
        with Ledger.open(db) as led:
            assert led.card_ids() == []
    r = CliRunner().invoke(cli, ["--db", str(db), "import", str(rec)])
    assert r.exit_code == 0, r.output
    with Ledger.open(db) as led:
        (card,) = led.card_ids()
    monkeypatch.setattr(tempfile, "TemporaryFile", full)
    r = CliRunner().invoke(cli, ["--db", str(db), "audit", card, "--environments", str(envs)])
    assert r.exit_code == 1 and "No space left on device" in r.output and "Traceback" not in r.output, r.output


def test_a_run_folder_that_decides_every_line_leaves_no_reset_unknown(tmp_path: Path, envs: Path) -> None:
    """Without the game's code, every line matched by a step file and none left open: resets are known (no "resets
    unknown" in the summary, none in the card's audit)."""
    folder = tmp_path / "recordings"
    _benchmark_fixture(folder, envs, phantom=False)
    db = tmp_path / "l.sqlite"
    code, out, err = invoke(db, "import", str(folder))
    assert code == 0, err
    assert "resets unknown" not in out and "0 undecided" in out, out
    card = "222f30a3-f3f6-48ee-b02c-583dea272051"
    with Ledger.open(db) as led:
        (inferred,) = [e for e in events_of(led, card) if type(e) is ActionsInferred]
    assert (inferred.method, inferred.resets_known) == ("frames", True)
    code, out, err = invoke(db, "audit", card)
    assert "resets are unknown" not in out, out
