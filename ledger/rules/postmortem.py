"""The post-mortem of a card: per game, the best play's levels and arithmetic, and what cost the score. Each
:class:`Finding` names the numbers it comes from, all the card's; the arithmetic is the calculator's."""

from __future__ import annotations

from typing import Any

import msgspec

from ledger.domain import calculators
from ledger.domain.calculators import Calculator
from ledger.domain.document import EnvironmentDoc, RunDoc, ScorecardDoc
from ledger.domain.projection import CardState, Play
from ledger.domain.scoring import (
    MSG_NO_BASELINES,
    MSG_SIZE_MISMATCH,
    best_play_index,
    calculator_of,
    uncapped_level_score,
)

#: "Many resets next to modest actions": at least this many restarts (level resets + new plays without a win)...
RESTARTS_MIN = 3
#: ...with at most this many actions per restart on average.
ACTIONS_PER_RESTART_MAX = 10.0


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    game_id: str
    text: str
    numbers: dict[str, Any]
    play: int | None = None


class LevelLine(msgspec.Struct, frozen=True, kw_only=True):
    """One level of the best play (``baseline`` None: the game has none)."""

    level: int
    weight: int
    baseline: int | None
    actions: int
    score: float
    completed: bool


class Arithmetic(msgspec.Struct, frozen=True, kw_only=True):
    weighted_mean: float
    total_weight: int
    scored_weight: int
    cap: float
    score: float
    text: str


class GameReport(msgspec.Struct, frozen=True, kw_only=True):
    game_id: str
    score: float
    plays: int
    best_play: int
    guid: str | None
    state: str | None
    levels: list[LevelLine]
    arithmetic: Arithmetic | None
    message: str | None
    findings: list[Finding]


class PostMortem(msgspec.Struct, frozen=True, kw_only=True):
    card_id: str
    score: float
    games: list[GameReport]


def num(v: float) -> str:
    """A number as people read it: integers without decimals, others with at most two."""
    return f"{v:.2f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def weights(n: int, calc: Calculator) -> list[int]:
    return list(range(1, n + 1)) if calc.weighted else [1] * n


def arithmetic(run: RunDoc, calc: Calculator = calculators.NEWEST) -> Arithmetic | None:
    """The run's mean and cap under ``calc``, e.g. ``(1x25 + 2x9.46 + 3x0)/6 = 7.32, cap 3/6 = 50 -> 7.32`` (a
    release without the completion cap has ``cap`` 100: it never binds)."""
    scores = run.level_scores or []
    if not scores or run.message:
        return None
    ws = weights(len(scores), calc)
    total_w = sum(ws)
    scored_w = sum(w for w, s in zip(ws, scores, strict=True) if s > 0)
    if calc.weighted:
        terms = " + ".join(f"{w}x{num(s)}" for w, s in zip(ws, scores, strict=True))
    else:
        terms = " + ".join(num(s) for s in scores)
    mean = sum(w * s for w, s in zip(ws, scores, strict=True)) / total_w
    if calc.completion_cap:
        cap = scored_w / total_w * 100
        text = f"({terms})/{total_w} = {mean:.2f}, cap {scored_w}/{total_w} = {num(cap)} -> {run.score:.2f}"
    else:
        cap = 100.0
        text = f"({terms})/{total_w} = {run.score:.2f}"
    return Arithmetic(
        weighted_mean=mean, total_weight=total_w, scored_weight=scored_w, cap=cap, score=run.score, text=text
    )


def _levels(run: RunDoc, calc: Calculator) -> list[LevelLine]:
    base = run.level_baseline_actions or []
    acts = run.level_actions or []
    scores = run.level_scores or []
    ws = weights(len(scores), calc)
    return [
        LevelLine(
            level=i + 1,
            weight=ws[i],
            baseline=None if b < 0 else b,
            actions=a,
            score=s,
            completed=i < run.levels_completed,
        )
        for i, (b, a, s) in enumerate(zip(base, acts, scores, strict=False))
    ]


def _unscored_finding(game_id: str, play_no: int, run: RunDoc) -> Finding:
    if run.message == MSG_SIZE_MISMATCH:
        why = f"the baseline set gives fewer levels than the {run.levels_completed} it completed"
    elif run.message == MSG_NO_BASELINES:
        why = "the baselines of this game are unknown (its entry in the card's baseline set has none)"
    else:
        why = "the baselines of this game are unknown (not in the card's baseline set, or the card has none)"
    return Finding(
        kind="unscored",
        game_id=game_id,
        play=play_no,
        text=(
            f"{game_id} play {play_no} is not scored: {why} ({run.message}), so its {run.levels_completed} "
            f"completed level(s) and {run.actions} action(s) count 0; score it under a set with --baselines SET"
        ),
        numbers={"levels_completed": run.levels_completed, "actions": run.actions, "message": run.message},
    )


def _range(levels: list[int]) -> str:
    return f"level {levels[0]}" if len(levels) == 1 else f"levels {levels[0]}-{levels[-1]}"


def _score_findings(game_id: str, play_no: int, run: RunDoc, ar: Arithmetic, calc: Calculator) -> list[Finding]:
    levels = _levels(run, calc)
    failed = [lv for lv in levels if not lv.completed]
    if failed:
        out = [_failed_level_finding(game_id, play_no, run, failed, ar)]
    elif ar.score < 100 and (costliest := _costliest_level_finding(game_id, play_no, levels, ar)) is not None:
        out = [costliest]
    else:
        out = []
    if ar.weighted_mean > ar.cap:
        out.append(_completion_cap_finding(game_id, play_no, ar))
    return out


def _failed_level_finding(game_id: str, play_no: int, run: RunDoc, failed: list[LevelLine], ar: Arithmetic) -> Finding:
    total_w = ar.total_weight
    stuck = failed[0]
    done = stuck.level - 1
    failed_w = sum(lv.weight for lv in failed)
    share = failed_w / total_w * 100
    baseline = "no baseline" if stuck.baseline is None else f"baseline {stuck.baseline}"
    ended = f", ended {run.state}" if run.state == "GAME_OVER" else ""
    reached = f"completed {_range(list(range(1, done + 1)))}, then " if done else ""
    if stuck.actions == 0:
        verb = "never started" if done == 0 else "took no action on"
        what = f"{reached}{verb} level {stuck.level} ({baseline}{ended})"
    else:
        what = f"{reached}never finished level {stuck.level} ({stuck.actions} action(s) there, {baseline}{ended})"
    rest = [lv.level for lv in failed[1:]]
    unreached = f"; {_range(rest)} never reached" if rest else ""
    whole = "all" if failed_w == total_w else num(share)
    weigh = f"the {len(failed)} levels not completed weigh" if rest else "it weighs"
    return Finding(
        kind="failed_level",
        game_id=game_id,
        play=play_no,
        text=(
            f"{game_id} play {play_no}: {what}{unreached}; {weigh} {failed_w} of {total_w}: {whole} of the game's "
            "100 points"
        ),
        numbers={
            "stopped_on_level": stuck.level,
            "levels_completed": done,
            "actions_on_level": stuck.actions,
            "baseline": stuck.baseline,
            "state": run.state,
            "failed_levels": [lv.level for lv in failed],
            "failed_weight": failed_w,
            "total_weight": total_w,
            "share": share,
        },
    )


def _costliest_level_finding(game_id: str, play_no: int, levels: list[LevelLine], ar: Arithmetic) -> Finding | None:
    total_w = ar.total_weight
    losses = [(lv.weight * (100 - min(lv.score, 100.0)) / total_w, lv) for lv in levels]
    loss, lv = max(losses, key=lambda t: t[0])
    if loss > 0:
        return Finding(
            kind="costliest_level",
            game_id=game_id,
            play=play_no,
            text=(
                f"{game_id}: every level was completed; level {lv.level} cost the most: {lv.actions} "
                f"action(s) for a baseline of {lv.baseline} scored {lv.score:.2f}, which at weight "
                f"{lv.weight} of {total_w} is {loss:.2f} points below a perfect 100 (game score "
                f"{ar.score:.2f})"
            ),
            numbers={
                "level": lv.level,
                "weight": lv.weight,
                "total_weight": total_w,
                "baseline": lv.baseline,
                "actions": lv.actions,
                "score": lv.score,
                "points_lost": loss,
            },
        )
    return None


def _completion_cap_finding(game_id: str, play_no: int, ar: Arithmetic) -> Finding:
    total_w = ar.total_weight
    return Finding(
        kind="completion_cap",
        game_id=game_id,
        play=play_no,
        text=(
            f"{game_id}: the completion cap bound: the weighted mean {ar.weighted_mean:.2f} is above the cap "
            f"{num(ar.cap)} (levels that scored weigh {ar.scored_weight} of {total_w}), so the score is "
            f"{ar.score:.2f}"
        ),
        numbers={
            "weighted_mean": ar.weighted_mean,
            "cap": ar.cap,
            "scored_weight": ar.scored_weight,
            "total_weight": total_w,
        },
    )


def _cap_finding(game_id: str, play_no: int, run: RunDoc, calc: Calculator) -> Finding | None:
    capped = []
    for lv in _levels(run, calc):
        raw = uncapped_level_score(lv.completed, lv.actions, lv.baseline, calc)
        if raw is not None and raw > calc.level_cap:
            capped.append((lv, raw))
    if not capped:
        return None
    power = "^2" if calc.squared else ""
    terms = "; ".join(f"level {lv.level}: ({lv.baseline}/{lv.actions}){power} x 100 = {raw:.2f}" for lv, raw in capped)
    cap = num(calc.level_cap)
    return Finding(
        kind="level_cap",
        game_id=game_id,
        play=play_no,
        text=f"{game_id}: the {cap} cap per level was hit by play {play_no}: {terms}, scored {cap}",
        numbers={
            "cap": calc.level_cap,
            "levels": [
                {"level": lv.level, "baseline": lv.baseline, "actions": lv.actions, "uncapped": raw}
                for lv, raw in capped
            ],
        },
    )


def _restart_finding(env: EnvironmentDoc) -> Finding | None:
    """Many restarts next to few actions where no play completed a level: dying or resetting, not progressing."""
    runs = env.runs
    if env.completed or env.levels_completed > 0 or any(r.completed or r.levels_completed > 0 for r in runs):
        return None
    resets = sum(r.resets or 0 for r in runs)
    # A new play of a guid whose previous play did not win is a restart; a new play after a WIN is not.
    last_state: dict[str | None, str | None] = {}
    new_plays = 0
    for r in runs:
        if r.guid in last_state and last_state[r.guid] != "WIN":
            new_plays += 1
        last_state[r.guid] = r.state
    restarts = resets + new_plays
    actions = env.actions
    if restarts < RESTARTS_MIN or actions > ACTIONS_PER_RESTART_MAX * restarts:
        return None
    overs = sum(1 for r in runs if r.state == "GAME_OVER")
    per = actions / restarts
    verdict = (
        "the agent is dying and restarting rather than progressing"
        if overs
        else "the agent is resetting rather than progressing (no play ended GAME_OVER)"
    )
    return Finding(
        kind="restarting",
        game_id=env.id,
        text=(
            f"{env.id}: {resets} level reset(s) and {new_plays} new play(s) without a win ({restarts} restarts) "
            f"next to {actions} actions, {per:.1f} actions per restart, 0 levels completed; {overs} of "
            f"{len(runs)} play(s) ended GAME_OVER: {verdict}"
        ),
        numbers={
            "resets": resets,
            "new_plays": new_plays,
            "restarts": restarts,
            "actions": actions,
            "actions_per_restart": per,
            "levels_completed": 0,
            "game_over_plays": overs,
            "plays": len(runs),
        },
    )


def _after_end_findings(env: EnvironmentDoc, plays: list[Play]) -> list[Finding]:
    out = []
    for i, p in enumerate(plays):
        if p.actions_after_end <= 0:
            continue
        run = env.runs[i] if i < len(env.runs) else None
        state = run.state if run is not None else p.state
        end = state if state in ("GAME_OVER", "WIN") else "the game ended"
        out.append(
            Finding(
                kind="after_end",
                game_id=env.id,
                play=i + 1,
                text=(
                    f"{env.id} play {i + 1} (guid {p.guid}): {p.actions_after_end} action(s) sent after {end}, "
                    f"answered with empty frames and counted nowhere (a RESET was needed)"
                ),
                numbers={
                    "actions_after_end": p.actions_after_end,
                    "state": state,
                    "actions": run.actions if run is not None else p.actions,
                },
            )
        )
    return out


def postmortem(card: CardState, doc: ScorecardDoc, calc: Calculator | None = None) -> PostMortem:
    calc = calc if calc is not None else calculator_of(card)
    games = []
    for env in doc.environments:
        plays = card.games.get(env.id, [])
        best = best_play_index(plays)
        if 0 <= best < len(env.runs) and env.runs[best].score < env.score:
            # The game's score comes from another play (fewer levels, better scored): that is the one to explain.
            best = next(i for i, r in enumerate(env.runs) if r.score == env.score)
        run = env.runs[best] if 0 <= best < len(env.runs) else None
        findings: list[Finding] = []
        ar = arithmetic(run, calc) if run is not None else None
        if run is not None and run.message:
            findings.append(_unscored_finding(env.id, best + 1, run))
        if run is not None and ar is not None:
            findings += _score_findings(env.id, best + 1, run, ar, calc)
            if (cap := _cap_finding(env.id, best + 1, run, calc)) is not None:
                findings.append(cap)
        if (restart := _restart_finding(env)) is not None:
            findings.append(restart)
        findings += _after_end_findings(env, plays)
        games.append(
            GameReport(
                game_id=env.id,
                score=env.score,
                plays=len(plays),
                best_play=best + 1,
                guid=run.guid if run is not None else None,
                state=run.state if run is not None else None,
                levels=_levels(run, calc) if run is not None else [],
                arithmetic=ar,
                message=run.message if run is not None else None,
                findings=findings,
            )
        )
    return PostMortem(card_id=card.card_id, score=doc.score, games=games)
