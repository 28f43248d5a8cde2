"""The post-mortem says only what the card's numbers support: over generated cards (won, stuck, dying, capped,
never started), every finding's claim is checked against the card it describes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ledger.domain import baselines as bl
from ledger.domain.events import (
    ActionIgnored,
    ActionTaken,
    BaselineEntry,
    CardOpened,
    GameOver,
    LevelCompleted,
    LevelReset,
    PlayStarted,
    Win,
)
from ledger.domain.projection import fold
from ledger.domain.scoring import LEVEL_CAP, best_play_index, score_card
from ledger.rules.postmortem import Finding, arithmetic, postmortem

GAME = "pm01-00000001"
T0 = datetime(2026, 1, 1, tzinfo=UTC)

#: One play: per level reached, (actions spent on it, level resets on it), then how the play ends on the last level
#: reached: "complete" (every level: a WIN), "die" (GAME_OVER), "stop" (left unfinished); and actions sent after
#: the end (ignored).
play_st = st.tuples(
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3)), min_size=1, max_size=7),
    st.sampled_from(["complete", "die", "stop"]),
    st.integers(0, 2),
)
card_st = st.tuples(st.lists(st.integers(1, 25), min_size=1, max_size=7), st.lists(play_st, min_size=1, max_size=5))


def _events(levels: int, plays: list[Any]) -> list[Any]:
    """The events capture writes for these plays of one game of ``levels`` levels."""
    ts = iter(T0 + timedelta(seconds=i) for i in range(100_000))
    evs: list[Any] = [CardOpened(ts=next(ts), card_id="c")]
    for n, (per_level, end, after) in enumerate(plays):
        guid = f"g{n % 2}"  # two guids: a later play of the same guid is a new play of it
        evs.append(PlayStarted(ts=next(ts), game_id=GAME, guid=guid, seed=0))
        done, total, state = 0, 0, "NOT_FINISHED"
        for i, (actions, resets) in enumerate(per_level[:levels]):
            last = i == len(per_level[:levels]) - 1
            for _ in range(resets):
                evs.append(LevelReset(ts=next(ts), game_id=GAME, guid=guid, levels_completed=done, state=state))
                total += 1
            for k in range(actions):
                finishing = k == actions - 1 and (not last or end == "complete")
                dying = k == actions - 1 and last and end == "die"
                lc = done + 1 if finishing else done
                state = "WIN" if finishing and lc == levels else "GAME_OVER" if dying else "NOT_FINISHED"
                evs.append(
                    ActionTaken(ts=next(ts), game_id=GAME, guid=guid, action=1, levels_completed=lc, state=state)
                )
                total += 1
                if dying:
                    evs.append(GameOver(ts=evs[-1].ts, game_id=GAME, guid=guid))
                if finishing:
                    if state == "WIN":
                        evs.append(Win(ts=evs[-1].ts, game_id=GAME, guid=guid))
                    evs.append(
                        LevelCompleted(ts=evs[-1].ts, game_id=GAME, guid=guid, levels_completed=lc, actions=total)
                    )
                    done = lc
            if actions == 0 or state != "NOT_FINISHED":
                break
        if state in ("WIN", "GAME_OVER"):
            evs += [ActionIgnored(ts=next(ts), game_id=GAME, guid=guid, action=1, state=state) for _ in range(after)]
    return evs


def _check(finding: Finding, card: Any, doc: Any, events: list[Any]) -> None:
    """Each claim of ``finding`` against the card and its document."""
    env = doc.environments[0]
    plays = card.games.get(GAME, [])
    # A finding about a play's levels names the play the game's score comes from.
    best = (finding.play or best_play_index(plays) + 1) - 1
    run = env.runs[best]
    if finding.kind in ("failed_level", "costliest_level", "completion_cap", "level_cap"):
        assert run.score == env.score, (finding.play, run.score, env.score)
    n_levels = len(run.level_scores or [])
    total_w = n_levels * (n_levels + 1) // 2
    nums, text = finding.numbers, finding.text
    assert finding.game_id == GAME and text.startswith(GAME)
    if finding.kind == "failed_level":
        lc = run.levels_completed
        assert lc < n_levels, "a completed game has no failed level"
        assert nums["stopped_on_level"] == lc + 1 and nums["levels_completed"] == lc
        assert nums["failed_levels"] == list(range(lc + 1, n_levels + 1))
        assert nums["failed_weight"] == sum(nums["failed_levels"]) and nums["total_weight"] == total_w
        assert abs(nums["share"] - nums["failed_weight"] / total_w * 100) < 1e-9
        assert nums["actions_on_level"] == (run.level_actions or [])[lc]
        assert nums["state"] == run.state
        # What happened leads; then the cost, said once.
        head = text.split(": ", 1)[1]
        if lc == 0:
            assert head.startswith(
                "never started level 1" if nums["actions_on_level"] == 0 else "never finished level 1"
            )
        else:
            assert head.startswith(f"completed level{'s 1-' + str(lc) if lc > 1 else ' 1'}, then ")
        assert ("ended GAME_OVER" in text) == (run.state == "GAME_OVER")
        assert text.count(f"{nums['failed_weight']} of {total_w}") == 1 and "cap" not in text
    elif finding.kind == "costliest_level":
        assert run.levels_completed == n_levels and env.score < 100
    elif finding.kind == "completion_cap":
        ar = arithmetic(run)
        assert ar is not None and ar.weighted_mean > ar.cap and abs(run.score - ar.cap) < 1e-9
    elif finding.kind == "level_cap":
        for lv in nums["levels"]:
            assert lv["level"] <= run.levels_completed and lv["uncapped"] > LEVEL_CAP
            assert (run.level_actions or [])[lv["level"] - 1] == lv["actions"]
    elif finding.kind == "restarting":
        # Every count is one the card shows, and the sentence states it.
        runs = env.runs
        assert not env.completed and env.levels_completed == 0 and all(r.levels_completed == 0 for r in runs)
        overs = sum(1 for r in runs if r.state == "GAME_OVER")
        seen: dict[Any, Any] = {}
        new_plays = 0
        for r in runs:
            new_plays += r.guid in seen and seen[r.guid] != "WIN"
            seen[r.guid] = r.state
        assert nums["resets"] == sum(r.resets or 0 for r in runs) == env.resets
        assert nums["new_plays"] == new_plays and nums["restarts"] == env.resets + new_plays
        assert nums["actions"] == env.actions and nums["plays"] == len(runs) and nums["game_over_plays"] == overs
        assert nums["actions"] <= 10 * nums["restarts"] and nums["restarts"] >= 3
        assert f"{env.resets} level reset(s) and {new_plays} new play(s) without a win" in text
        assert f"next to {env.actions} actions" in text and "0 levels completed" in text
        assert f"{overs} of {len(runs)} play(s) ended GAME_OVER" in text
        # "Dying" only where the card shows a play that ended GAME_OVER, and so the log holds its GAME_OVER.
        assert ("dying" in text) == (overs > 0)
        assert sum(1 for e in events if type(e) is GameOver) >= overs
    elif finding.kind == "after_end":
        p = plays[finding.play - 1]
        assert p.actions_after_end == nums["actions_after_end"] > 0
        assert nums["state"] == env.runs[finding.play - 1].state in ("WIN", "GAME_OVER")
        assert nums["actions"] == env.runs[finding.play - 1].actions
    else:
        raise AssertionError(f"unknown finding {finding.kind}")


def _numbers_in(text: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?", text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(card_st)
@example(([3, 4, 5, 6, 7, 8, 9], [([(40, 0)], "stop", 0)]))  # stuck on level 1 of 7
@example(([2, 2, 2], [([(1, 1)], "die", 0), ([(1, 1)], "die", 1), ([(2, 0), (2, 0), (2, 0)], "complete", 0)]))
@example(([5], [([(0, 0)], "stop", 0)]))  # never started
@example(([20, 20], [([(1, 0), (1, 0)], "complete", 0)]))  # won, both levels over the 115 cap
@example(([3, 3, 3, 3], [([(1, 3), (1, 3)], "stop", 0), ([(1, 2)], "stop", 0)]))  # resetting, never dying
@example(([1], [([(1, 1)], "complete", 0), ([(1, 0)], "complete", 0)]))  # the game's score is the second play's
# 6 level resets and 2 new plays without a win next to 58 actions, no GAME_OVER: resetting, not dying.
@example(([4, 4, 4], [([(13, 2)], "stop", 0), ([(12, 2)], "stop", 0), ([(13, 1)], "stop", 0), ([(14, 1)], "stop", 0)]))
# Restarts that completed levels (or the whole game) are progress: no "rather than progressing".
@example(([2, 2, 2], [([(1, 2), (1, 2)], "die", 0), ([(1, 2), (1, 2)], "die", 0), ([(1, 1)], "stop", 0)]))
@example(([2, 2], [([(1, 2), (1, 2)], "complete", 0), ([(1, 3)], "stop", 0), ([(1, 3)], "die", 0)]))
def test_every_finding_follows_from_the_card(data: tuple[list[int], list[Any]]) -> None:
    baselines, plays = data
    levels = len(baselines)
    events = _events(levels, plays)
    card = fold("c", events)
    entries = {GAME: BaselineEntry(game_id=GAME, baseline_actions=baselines)}
    doc = score_card(card, bl.as_map(bl.canonical(entries.values())))
    (game,) = postmortem(card, doc).games
    kinds = [(f.kind, f.play) for f in game.findings]
    assert len(kinds) == len(set(kinds)), f"a finding said twice: {kinds}"
    assert len({f.text for f in game.findings}) == len(game.findings)
    for f in game.findings:
        _check(f, card, doc, events)
        assert _numbers_in(f.text), f.text
    if game.findings and any(f.kind == "failed_level" for f in game.findings):
        assert game.findings[0].kind == "failed_level", "what happened leads"


def test_a_play_scored_0_for_want_of_baselines_says_so(tmp_path: Path) -> None:
    from ledger.rules.text import summary_lines
    from tests.cli_run import CORPUS_CARD
    from tests.cli_run import in_process as ledger

    t = datetime(2026, 1, 1, tzinfo=UTC)
    events: list[Any] = [CardOpened(ts=t, card_id="c"), PlayStarted(ts=t, game_id=GAME, guid="g")]
    for level in (1, 2):
        events += [ActionTaken(ts=t, game_id=GAME, guid="g", action=1, levels_completed=level, state="NOT_FINISHED")]
        events += [LevelCompleted(ts=t, game_id=GAME, guid="g", levels_completed=level, actions=level)]
    events.append(GameOver(ts=t, game_id=GAME, guid="g"))
    card = fold("c", events)
    for entries, why in (
        ({}, "the baselines of this game are unknown"),
        ({GAME: BaselineEntry(game_id=GAME)}, "the baselines of this game are unknown (its entry"),
        ({GAME: BaselineEntry(game_id=GAME, baseline_actions=[5])}, "fewer levels than the 2 it completed"),
    ):
        pm = postmortem(card, score_card(card, entries))
        (game,) = pm.games
        assert game.score == 0 and [f.kind for f in game.findings] == ["unscored"], game.findings
        assert why in game.findings[0].text and "its 2 completed level(s)" in game.findings[0].text
        assert "nothing stands out" not in "\n".join(summary_lines(pm))

    # A card imported without --environments: `ledger replay` says why its score is 0.
    db = str(tmp_path / "l.sqlite")
    assert ledger("--db", db, "import", str(CORPUS_CARD)).returncode == 0
    r = ledger("--db", db, "replay", CORPUS_CARD.name)
    assert r.returncode == 0 and "play 1 is not scored: the baselines of this game are unknown" in r.stdout, r.stdout
