"""The toolkit's scoring arithmetic, in its float order for every release. See docs/scoring.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from ledger.domain import calculators
from ledger.domain.calculators import Calculator
from ledger.domain.document import EnvironmentDoc, RunDoc, ScorecardDoc
from ledger.domain.events import BaselineEntry
from ledger.domain.projection import CardState, Play

LEVEL_CAP = calculators.NEWEST.level_cap

MSG_NO_INFO = "No Matching EnvironmentInfo found for {game_id}"
MSG_NO_BASELINES = "Human baseline actions are not available for this environment"
MSG_SIZE_MISMATCH = "Human baseline actions size mismatch"


def calculator_of(card: CardState) -> Calculator:
    return calculators.resolve(card.calculator)[0]


def uncapped_level_score(completed: bool, actions: int, baseline: int | None, calc: Calculator) -> float | None:
    """A completed level's score before the cap per level (None when it scores 0 by rule or has no baseline)."""
    if not completed or actions <= 0 or baseline is None:
        return None
    return ((baseline / actions) ** 2) * 100 if calc.squared else (baseline / actions) * 100


def level_score(completed: bool, actions: int, baseline: int, calc: Calculator = calculators.NEWEST) -> float:
    raw = uncapped_level_score(completed, actions, baseline, calc)
    return 0.0 if raw is None else min(raw, calc.level_cap)


class WeightedLevels(msgspec.Struct):
    """Levels pooled for a play's score, or a tag's levels across games, under ``calc``."""

    calc: Calculator = calculators.NEWEST
    indices: list[int] = msgspec.field(default_factory=list)
    scores: list[float] = msgspec.field(default_factory=list)
    actions: list[int] = msgspec.field(default_factory=list)
    baselines: list[int] = msgspec.field(default_factory=list)
    levels_completed: int = 0
    total_actions: int = 0
    games: set[str] = msgspec.field(default_factory=set)

    def add(self, index: int, completed: bool, actions: int, baseline: int, game_id: str | None = None) -> None:
        self.total_actions += actions
        if game_id:
            self.games.add(game_id)
        if completed:
            self.levels_completed += 1
        self.indices.append(index)
        self.scores.append(level_score(completed, actions, baseline, self.calc))
        self.actions.append(actions)
        self.baselines.append(baseline)

    def score(self) -> float:
        if not self.scores:
            return 0.0
        if not self.calc.weighted:
            return sum(self.scores) / len(self.scores)
        total_score = 0.0
        total_weights = 0
        max_weights = 0
        for s, w in zip(self.scores, self.indices, strict=True):
            total_score += s * w
            total_weights += w
            if s > 0:
                max_weights += w
        if not self.calc.completion_cap:
            return total_score / total_weights
        return min(total_score / total_weights, max_weights / total_weights * 100)


def level_split(play: Play, n_levels: int) -> list[tuple[bool, int]]:
    """(completed, actions) for each of ``n_levels`` levels of a play, as the toolkit splits its actions."""
    out: list[tuple[bool, int]] = []
    prev = 0
    for i in range(n_levels):
        if i < len(play.marks):
            at = play.marks[i][1]
            out.append((True, at - prev))
            prev = at
        else:
            out.append((False, play.actions - prev))
            prev = play.actions
    return out


def tags_for_level(info: BaselineEntry, level_idx: int, private: bool) -> list[str]:
    """The tags a level's score is pooled under: the game's tags, then (optionally) private and level tags."""
    tags = list(info.tags or [])
    if private:
        tags += [f"private_{t}" for t in info.private_tags or []]
        if info.level_tags and level_idx < len(info.level_tags):
            tags += [f"private_{t}" for t in info.level_tags[level_idx]]
    return tags


def _unscored_run(game_id: str, play: Play, message: str) -> RunDoc:
    # The toolkit's _raw_scores_from_card: per-level actions only (the level being played too unless it won),
    # baselines unknown (-1), no score.
    actions = [a for _, a in level_split(play, len(play.marks) + (play.state != "WIN"))]
    return RunDoc(
        id=game_id,
        guid=play.guid,
        score=0.0,
        levels_completed=play.levels_completed,
        actions=play.actions,
        resets=play.resets,
        state=play.state,
        completed=play.state == "WIN",
        level_scores=[0.0] * len(actions),
        level_actions=actions,
        level_baseline_actions=[-1] * len(actions),
        number_of_environments=0,
        message=message,
    )


def score_run(
    game_id: str,
    play: Play,
    info: BaselineEntry | None,
    tags: dict[str, WeightedLevels] | None = None,
    private_tags: bool = False,
    calc: Calculator = calculators.NEWEST,
) -> RunDoc:
    """One play's run entry under ``calc``, its levels also pooled into ``tags`` when given."""
    if info is None:
        return _unscored_run(game_id, play, MSG_NO_INFO.format(game_id=game_id))
    baselines = info.baseline_actions
    if not baselines:
        return _unscored_run(game_id, play, MSG_NO_BASELINES)
    if len(baselines) < len(play.marks):
        return _unscored_run(game_id, play, MSG_SIZE_MISMATCH)
    levels = WeightedLevels(calc)
    private_tags = private_tags and calc.private_tags
    split = level_split(play, len(baselines))
    for i, ((completed, actions), baseline) in enumerate(zip(split, baselines, strict=True)):
        levels.add(i + 1, completed, actions, baseline)
        if tags is not None:
            for tag in tags_for_level(info, i, private_tags):
                tags.setdefault(tag, WeightedLevels(calc)).add(i + 1, completed, actions, baseline, game_id)
    return RunDoc(
        guid=play.guid,
        score=levels.score(),
        levels_completed=levels.levels_completed,
        actions=levels.total_actions,
        resets=play.resets,
        state=play.state,
        completed=play.state == "WIN",
        level_scores=levels.scores,
        level_actions=levels.actions,
        level_baseline_actions=levels.baselines,
    )


def best_play_index(plays: Sequence[Play]) -> int:
    """The first play with the most levels completed (-1: none)."""
    best, best_levels = -1, -1
    for i, p in enumerate(plays):
        if p.levels_completed > best_levels:
            best, best_levels = i, p.levels_completed
    return best


def environment(game_id: str, runs: list[RunDoc]) -> EnvironmentDoc:
    return EnvironmentDoc(
        id=game_id,
        runs=runs,
        score=max(r.score for r in runs),
        actions=sum(r.actions for r in runs),
        levels_completed=max(r.levels_completed for r in runs),
        completed=any(r.completed for r in runs),
        level_count=max(len(r.level_scores) if r.level_scores else 0 for r in runs),
        resets=sum(r.resets if r.resets else 0 for r in runs),
    )


def tag_run(tag: str, levels: WeightedLevels) -> RunDoc:
    """A tag's pooled score entry (the toolkit's ``to_score(include_levels=False)``)."""
    return RunDoc(
        id=tag,
        score=levels.score(),
        levels_completed=levels.levels_completed,
        actions=levels.total_actions,
        number_of_levels=len(levels.scores),
        number_of_environments=len(levels.games),
    )


def score_card(
    card: CardState,
    baselines: Mapping[str, BaselineEntry],
    *,
    private_tags: bool = False,
    all_environments: Sequence[str] | None = None,
    calculator: Calculator | None = None,
) -> ScorecardDoc:
    """The card's scorecard document under ``baselines`` and ``calculator`` (default: the card's own).
    ``all_environments``: game ids scored even if unplayed, as the competition server ``make``s them before close (one
    NOT_FINISHED run of 0 actions, no ``guid``)."""
    calc = calculator if calculator is not None else calculator_of(card)
    environments: list[EnvironmentDoc] = []
    tags: dict[str, WeightedLevels] = {}
    for game_id, plays in card.games.items():
        best = best_play_index(plays)
        if best == -1:
            continue
        runs = [
            score_run(game_id, p, baselines.get(game_id), tags if i == best else None, private_tags, calc)
            for i, p in enumerate(plays)
        ]
        environments.append(environment(game_id, runs))
    if all_environments is not None:
        keys = list(card.games)
        for game_id in all_environments:
            if any(k.startswith(game_id) for k in keys):
                continue
            run = score_run(game_id, Play(guid=""), baselines.get(game_id), tags, private_tags, calc)
            environments.append(environment(game_id, [msgspec.structs.replace(run, guid=None)]))
            keys.append(game_id)
    n_games = len(environments)
    total = sum(e.score for e in environments)
    return ScorecardDoc(
        source_url=card.source_url,
        tags=card.tags,
        opaque=card.opaque,
        card_id=card.card_id,
        score=total / n_games if n_games > 0 else 0.0,
        environments=environments,
        tags_scores=[tag_run(t, lv) for t, lv in tags.items()],
        competition_mode=card.competition_mode if calc.competition_field else None,
        total_environments_completed=sum(1 if e.completed else 0 for e in environments),
        total_environments=len(environments),
        total_levels_completed=sum(e.levels_completed for e in environments),
        total_levels=sum(e.level_count for e in environments),
        total_actions=sum(e.actions for e in environments),
    )
