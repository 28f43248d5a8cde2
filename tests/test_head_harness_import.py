"""Importing what arc-agi-3-benchmarking writes at its head (1f4a8cc): frame lines that name their action, forced
RESETs after GAME_OVER with no model call, an interrupted run, the run folder's usage on a live-captured card.

The files are written by ``tests/head_harness.py`` from seeded agents playing the test games through the real
toolkit, captured live by the ledger at the same time; each import is compared with that live card.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli import cli
from ledger.domain.events import ActionsInferred, LinesSkipped, RunUsage, card_stream, decode
from tests.harness_recorder import environments
from tests.head_harness import MODEL, HeadRun, run_head
from tests.toolkit import arcade

#: Test games whose frames do not change within a level (the old reader leaves most lines undecided there) and that
#: end in GAME_OVER often (forced RESETs).
GAMES = ["cnt3-0000000a", "clk2-0000000b"]


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return environments(tmp_path_factory.mktemp("envs"))


def invoke(db: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--db", str(db), *args])
    return r.exit_code, r.stdout, r.stderr


def events_of(db: Path, card_id: str) -> list[Any]:
    with Ledger.open(db) as led:
        return [decode(b) for b in led.store.read_bodies(card_stream(card_id))[0]]


def live_run(db: Path, folder: Path, envs: Path, game: str, seed: int, **kw: Any) -> HeadRun:
    """One head-harness run of ``game``, captured live into ``db`` as it plays."""
    with Ledger.open(db) as led:
        arc = arcade(envs)
        capture = led.attach(arc)
        run = run_head(arc, folder, [game], seed, **kw)
        capture.detach()
    return run


def export(db: Path, card_id: str) -> dict[str, Any]:
    code, out, err = invoke(db, "export", card_id)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def counts(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What of a card does not depend on its baselines: each run's actions, resets, levels, state."""
    return [
        (e["id"], r["guid"], r["actions"], r["resets"], r["levels_completed"], r["state"])
        for e in doc["environments"]
        for r in e["runs"]
    ]


@pytest.mark.parametrize("game,seed", [(GAMES[0], 3), (GAMES[1], 4)])
def test_a_head_recording_imports_as_the_live_card_with_and_without_the_code(
    tmp_path: Path, envs: Path, game: str, seed: int
) -> None:
    """Each line's action_input decides its action (RESET: a reset); nothing is searched or undecided; the forced
    RESETs' step files (no model call, no token line) keep the run folder in use, with its usage, cost and tags."""
    live_db, rec = tmp_path / "live.sqlite", tmp_path / "recordings"
    run = live_run(live_db, rec, envs, game, seed, max_actions=70)
    agent = run.agents[0]
    assert agent.forced > 0  # the run had GAME_OVERs: steps without a model call
    live = export(live_db, run.card_id)
    for args in ([], ["--environments", str(envs)]):
        db = tmp_path / f"fresh{len(args)}.sqlite"
        code, out, err = invoke(db, "import", str(rec), "--card-id", run.card_id, *args)
        assert code == 0, (out, err)
        assert "as each line names them (action_input), none inferred" in out, out
        assert "resets unknown" not in out + err and "run folder not used" not in err, (out, err)
        assert f"parsed_action of {agent.step_counter} step(s) from {agent.run_dir.name}/ used" in err, err
        got = export(db, run.card_id)
        assert counts(got) == counts(live)
        if args:
            assert "the game's code answers all" in err
            # The toolkit's document, byte for byte, but for the tags the harness gave open_scorecard (not in files).
            assert {**got, "tags": live["tags"]} == live
            code, out, err = invoke(db, "audit", run.card_id, "--environments", str(envs))
            assert code == 0 and "resets are unknown" not in out, (out, err)
        else:
            assert "each frame line names its action (action_input): no search" in err
            # Scored with the games' baselines (their metadata.json, no code): the live card's document.
            code, out, err = invoke(db, "baselines", "import", str(envs), "--label", "shipped")
            assert code == 0, err
            code, out, err = invoke(db, "export", run.card_id, "--baselines", "shipped")
            assert code == 0 and {**json.loads(out), "tags": live["tags"]} == live, err
        evs = events_of(db, run.card_id)
        (inferred,) = [e for e in evs if type(e) is ActionsInferred]
        assert (inferred.method, inferred.undecided, inferred.resets_known) == ("recorded", [], True)
        (usage,) = [e for e in evs if type(e) is RunUsage]
        want = sum(json.loads(p.read_text())["usage"]["total_tokens"] for p in agent.run_dir.glob("step_*.json"))
        assert (usage.model, usage.total_tokens) == (MODEL, want)
        assert usage.cost == pytest.approx(agent.total_usage["cost"])
        assert sum(lv.steps for lv in usage.levels) == agent.step_counter
        assert f"model:{MODEL}" in evs[0].tags and f"run:{agent.run_id}" in evs[0].tags
        code, out, err = invoke(tmp_path / f"json{len(args)}.sqlite", "import", str(rec), "--json", *args)
        (card,) = json.loads(out)["cards"]
        assert (card["recorded_actions"], card["inferred_actions"], card["resets_known"]) == (
            agent.action_counter,
            0,
            True,
        )
        assert json.loads(out)["harness"]["recorded_actions"] == agent.action_counter


def test_an_interrupted_head_run_counts_nothing_answered_after_the_close(tmp_path: Path, envs: Path) -> None:
    """Ctrl-C: the card is closed and ``{}`` written while an agent thread answers one more action. A fresh import
    leaves that line out (said, and kept as a skipped line), as the live card does; its step's usage too."""
    live_db, rec = tmp_path / "live.sqlite", tmp_path / "recordings"
    run = live_run(live_db, rec, envs, GAMES[0], 5, max_actions=60, interrupt=True)
    agent = run.agents[0]
    lines = agent.path.read_text().splitlines()
    assert json.loads(lines[-2])["data"] == {} and "frame" in json.loads(lines[-1])["data"]
    live = export(live_db, run.card_id)
    db = tmp_path / "fresh.sqlite"
    code, out, err = invoke(db, "import", str(agent.path), "--card-id", run.card_id, "--environments", str(envs))
    assert code == 0, (out, err)
    assert f"{agent.path}:{len(lines)}: 1 frame line(s) after the final scorecard line {len(lines) - 1}" in err, err
    assert "1 after the card's close" in out
    got = export(db, run.card_id)
    assert counts(got) == counts(live) and {**got, "tags": live["tags"]} == live
    evs = events_of(db, run.card_id)
    (skipped,) = [e for e in evs if type(e) is LinesSkipped]
    assert [s.line for s in skipped.lines] == [len(lines)]
    # The step written for that last action is not one of the card's: its tokens are left out of the usage.
    last = json.loads((agent.run_dir / f"step_{agent.step_counter:03d}.json").read_text())
    (usage,) = [e for e in evs if type(e) is RunUsage]
    assert usage.total_tokens == agent.total_usage["total_tokens"] - last["usage"]["total_tokens"]
    assert "usage counts only the steps used" in err and "usage left out with the 1 step(s) not used" in err


def test_the_run_folders_usage_attaches_to_the_live_card_once(tmp_path: Path, envs: Path) -> None:
    """Imported into the ledger that captured the run: the same card, compared; the run folder's usage is added to
    it as an event (no second card, its numbers and close unchanged, its audit still passes), and only once."""
    live_db, rec = tmp_path / "live.sqlite", tmp_path / "recordings"
    run = live_run(live_db, rec, envs, GAMES[1], 6, max_actions=50)
    before = export(live_db, run.card_id)
    code, out, err = invoke(live_db, "import", str(rec))
    assert code == 0 and f"same card         {run.card_id}" in out, (out, err)
    assert f"its usage attached to card {run.card_id}: " in err, err
    code, out, err = invoke(live_db, "import", str(rec), "--environments", str(envs))
    assert code == 0 and f"its usage is on card {run.card_id} already" in err, (out, err)
    with Ledger.open(live_db) as led:
        assert led.card_ids() == [run.card_id]
    assert export(live_db, run.card_id) == before
    assert len([e for e in events_of(live_db, run.card_id) if type(e) is RunUsage]) == 1
    code, out, err = invoke(live_db, "audit", run.card_id)
    assert code == 0, (out, err)
    code, out, _ = invoke(live_db, "replay", run.card_id)
    assert code == 0 and f"model {MODEL}: " in out
    # `cards` shows the usage on asking: a column each, and the keys in --json.
    agent = run.agents[0]
    tokens, cost = agent.total_usage["total_tokens"], agent.total_usage["cost"]
    code, out, err = invoke(live_db, "cards", "--columns", "tokens", "--columns", "cost")
    assert code == 0, err
    head, row = out.splitlines()[:2]
    assert head.split()[-3:] == ["tokens", "cost", "tags"] and f" {tokens}  ${cost:.4f}  " in row, out
    code, out, err = invoke(live_db, "cards", "--json", "--columns", "tokens", "--columns", "cost")
    (listed,) = json.loads(out)
    assert listed["tokens"] == tokens and listed["cost"] == pytest.approx(cost) and listed["card_id"] == run.card_id
    code, out, err = invoke(live_db, "cards", "--json")
    assert "tokens" not in json.loads(out)[0]


def test_a_named_run_folder_that_is_not_used_is_an_error_and_nothing_is_written(tmp_path: Path, envs: Path) -> None:
    """A run folder given to the import and not used for its recording says which fact disagrees: exit 2, no card.
    The same folder beside a recording given alone is a note (the recording is imported without it)."""
    rec = tmp_path / "recordings"
    run = live_run(tmp_path / "live.sqlite", rec, envs, GAMES[0], 7, max_actions=30)
    agent = run.agents[0]
    step = next(
        p for p in sorted(agent.run_dir.glob("step_*.json")) if json.loads(p.read_text())["usage"]["total_tokens"]
    )
    doc = json.loads(step.read_text())
    doc["usage"]["total_tokens"] += 1
    step.write_text(json.dumps(doc))
    db = tmp_path / "fresh.sqlite"
    code, out, err = invoke(db, "import", str(agent.run_dir))
    assert code == 2, (out, err)
    n = int(step.stem.split("_")[1])
    assert (
        f"the run folder {agent.run_dir} named to import is not used: not this recording's run: step_{n:03d} says"
        in err
    )
    with Ledger.open(db) as led:
        assert led.card_ids() == []
    code, out, err = invoke(db, "import", str(agent.path), "--strict")
    assert code == 2 and f"the run folder {agent.run_dir} beside it is not used (--strict): " in err, (out, err)
    with Ledger.open(db) as led:
        assert led.card_ids() == []
    code, out, err = invoke(db, "import", str(agent.path))
    assert code == 0 and f"run folder not used: not this recording's run: step_{n:03d} says" in err, (out, err)


def test_a_closed_online_card_whose_close_answer_showed_its_baselines_does_not_say_none_came(tmp_path: Path) -> None:
    """ONLINE with the game files at hand (the baselines known at open): the close answer shows the same baselines
    and adds no event, and the card's baselines line says so instead of "the server has revealed none yet"."""
    from arc_agi import Arcade, OperationMode

    from ledger.rules.server import baselines_source
    from tests import toolkit
    from tests.test_online_capture import API_KEY, _quiet, play, server

    with Ledger.open(tmp_path / "l.sqlite") as led, server() as srv:
        arc = Arcade(
            arc_api_key=API_KEY,
            arc_base_url=srv.url,
            operation_mode=OperationMode.ONLINE,
            environments_dir=str(toolkit.ENV_DIR),
            logger=_quiet,
        )
        led.attach(arc)
        card = arc.open_scorecard()
        play(arc, card, 1, toolkit.GAMES[:2], steps=15)
        assert "the server has revealed none yet" in baselines_source(led.load_card(card))
        arc.close_scorecard(card)
        said = baselines_source(led.load_card(card))
        assert said.endswith("its close answer showed the baselines it had already"), said


def test_a_card_imported_without_its_run_folder_gets_the_usage_when_imported_again_with_it(
    tmp_path: Path, envs: Path
) -> None:
    rec = tmp_path / "recordings"
    run = live_run(tmp_path / "live.sqlite", rec, envs, GAMES[0], 8, max_actions=30)
    agent = run.agents[0]
    away = tmp_path / agent.run_dir.name
    agent.run_dir.rename(away)
    db = tmp_path / "fresh.sqlite"
    code, out, err = invoke(db, "import", str(rec))
    assert code == 0 and out.startswith("imported"), (out, err)
    card = agent.guid
    assert not [e for e in events_of(db, card) if type(e) is RunUsage]
    away.rename(agent.run_dir)
    code, out, err = invoke(db, "import", str(rec))
    assert code == 0 and out.startswith(f"already imported  {card}"), (out, err)
    assert f"its usage attached to card {card}: {agent.total_usage['total_tokens']} tokens" in err, err
    code, out, err = invoke(db, "import", str(rec))
    assert code == 0 and "attached" not in err, (out, err)
    assert len([e for e in events_of(db, card) if type(e) is RunUsage]) == 1
    code, out, err = invoke(db, "audit", card)
    assert code == 0, (out, err)


def test_frame_lines_that_name_no_action_among_ones_that_do_are_found_the_named_ones_tried_first(
    tmp_path: Path, envs: Path
) -> None:
    live_db, rec = tmp_path / "live.sqlite", tmp_path / "recordings"
    run = live_run(live_db, rec, envs, GAMES[0], 9, max_actions=40)
    agent = run.agents[0]
    lines = agent.path.read_text().splitlines(keepends=True)
    frames = [i for i, ln in enumerate(lines) if '"frame"' in ln]
    for i in frames[5:8]:
        rec_line = json.loads(lines[i])
        del rec_line["data"]["action_input"]
        lines[i] = json.dumps(rec_line) + "\n"
    agent.path.write_text("".join(lines))
    db = tmp_path / "fresh.sqlite"
    code, out, err = invoke(db, "import", str(agent.path), "--card-id", run.card_id, "--environments", str(envs))
    assert code == 0, (out, err)
    assert f"{agent.path}:{frames[5] + 1}: 3 frame line(s) name no action (the first: line {frames[5] + 1})" in err
    assert counts(export(db, run.card_id)) == counts(export(live_db, run.card_id))


def test_a_scorecard_shaped_side_line_in_the_middle_is_no_close(tmp_path: Path, envs: Path) -> None:
    """Only ``{}`` or a run's entry (its guid, its runs) is the scorecard written at the close: another dict with
    actions and levels_completed between frame lines leaves every later line counted."""
    live_db, rec = tmp_path / "live.sqlite", tmp_path / "recordings"
    run = live_run(live_db, rec, envs, GAMES[1], 10, max_actions=30)
    agent = run.agents[0]
    lines = agent.path.read_text().splitlines(keepends=True)
    side = {"timestamp": json.loads(lines[10])["timestamp"], "data": {"actions": [1, 2], "levels_completed": 0}}
    lines.insert(10, json.dumps(side) + "\n")
    agent.path.write_text("".join(lines))
    db = tmp_path / "fresh.sqlite"
    code, out, err = invoke(db, "import", str(agent.path), "--card-id", run.card_id)
    assert code == 0 and "after the card's close" not in out + err, (out, err)
    assert counts(export(db, run.card_id)) == counts(export(live_db, run.card_id))
