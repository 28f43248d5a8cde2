"""Re-scoring: a card's plays under another baseline set and what changed (see docs/baselines.md). ``match``: ``exact``
is the toolkit's rule; ``base`` falls back to the first entry with the same 4-letter base id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import zip_longest
from typing import Literal

import msgspec

from ledger.domain import baselines as bl
from ledger.domain.calculators import Calculator
from ledger.domain.document import EnvironmentDoc, RunDoc, ScorecardDoc
from ledger.domain.events import BaselineEntry
from ledger.domain.projection import CardState
from ledger.domain.scoring import best_play_index, calculator_of, score_card

Match = Literal["exact", "base"]
MATCHES: tuple[Match, ...] = ("exact", "base")


class GameMatch(msgspec.Struct, frozen=True):
    """How a played game found its entry: ``used`` is the set's game id that scores it."""

    game_id: str
    used: str | None
    how: Literal["exact", "base", "missing"]
    #: With ``base``: every version of the base id the set holds, in game-id order.
    versions: list[str] = msgspec.field(default_factory=list)


def match_baselines(
    game_ids: Iterable[str], entries: Mapping[str, BaselineEntry], match: Match = "exact"
) -> tuple[Mapping[str, BaselineEntry], list[GameMatch]]:
    """The map the calculator should use for ``game_ids`` (read-only: maybe ``entries`` itself), and each match."""
    effective: dict[str, BaselineEntry] | None = None
    matches: list[GameMatch] = []
    by_base = bl.by_base_id(entries) if match == "base" else {}
    for gid in game_ids:
        if gid in entries:
            matches.append(GameMatch(gid, gid, "exact"))
            continue
        versions = sorted(e.game_id for e in by_base.get(gid.split("-", 1)[0], []))
        if versions:
            if effective is None:
                effective = dict(entries)  # copied only when a base match adds a key
            effective[gid] = entries[versions[0]]
            matches.append(GameMatch(gid, versions[0], "base", versions))
        else:
            matches.append(GameMatch(gid, None, "missing"))
    return (effective if effective is not None else entries), matches


def score_under(
    card: CardState,
    entries: Mapping[str, BaselineEntry],
    *,
    match: Match = "exact",
    all_environments: bool = False,
    calculator: Calculator | None = None,
) -> tuple[ScorecardDoc, list[GameMatch]]:
    """The card's document under ``entries`` and ``calculator`` (default: its own), and how each game matched."""
    effective, matches = match_baselines(card.games, entries, match)
    # The competition view: the set's game ids (in its canonical order), less those a played game used.
    used = {m.used for m in matches if m.used is not None}
    every = [gid for gid in sorted(entries) if gid not in used] if all_environments else None
    return score_card(card, effective, all_environments=every, calculator=calculator), matches


class LevelChange(msgspec.Struct, frozen=True):
    """One level of one play; None where the level is not in that side's list."""

    level: int
    baseline_old: int | None
    baseline_new: int | None
    actions_old: int | None
    actions_new: int | None
    score_old: float | None
    score_new: float | None


class RunChange(msgspec.Struct, frozen=True):
    guid: str | None
    best: bool
    state: str | None
    score_old: float | None
    score_new: float | None
    message_old: str | None
    message_new: str | None
    levels: list[LevelChange]


class GameChange(msgspec.Struct, frozen=True):
    """One game: its score on both sides (None: absent from that side's document)."""

    game_id: str
    played: bool
    used_old: str | None
    used_new: str | None
    how_new: str
    versions: list[str]
    score_old: float | None
    score_new: float | None
    delta: float
    runs: list[RunChange]


class TagChange(msgspec.Struct, frozen=True):
    tag: str
    score_old: float | None
    score_new: float | None
    delta: float


class CardRescore(msgspec.Struct, frozen=True):
    """A card as played and under the other set, games sorted by largest change first."""

    card_id: str
    played_set_id: str | None
    score_old: float
    score_new: float
    delta: float
    games: list[GameChange]
    tags: list[TagChange]
    #: The calculators of both sides (arc-agi releases): the card's own, and the one it is re-scored with.
    calculator_old: str = ""
    calculator_new: str = ""


def _delta(old: float | None, new: float | None) -> float:
    return (new if new is not None else 0.0) - (old if old is not None else 0.0)


def _levels(old: RunDoc | None, new: RunDoc | None) -> list[LevelChange]:
    def cols(r: RunDoc | None) -> tuple[list[int], list[int], list[float]]:
        if r is None:
            return [], [], []
        return r.level_baseline_actions or [], r.level_actions or [], r.level_scores or []

    (ob, oa, os_), (nb, na, ns) = cols(old), cols(new)

    def at(xs: Sequence[int] | Sequence[float], i: int) -> int | float | None:
        return xs[i] if i < len(xs) else None

    def base(xs: list[int], i: int) -> int | None:
        v = xs[i] if i < len(xs) else None
        return None if v is None or v < 0 else v

    return [
        LevelChange(i + 1, base(ob, i), base(nb, i), at(oa, i), at(na, i), at(os_, i), at(ns, i))  # type: ignore[arg-type]
        for i in range(max(len(os_), len(ns)))
    ]


def _runs(old: EnvironmentDoc | None, new: EnvironmentDoc | None, best: int) -> list[RunChange]:
    o = old.runs if old is not None else []
    n = new.runs if new is not None else []
    out = []
    for i, (ro, rn) in enumerate(zip_longest(o, n)):
        ref = ro if ro is not None else rn
        assert ref is not None
        out.append(
            RunChange(
                guid=ref.guid,
                best=i == best,
                state=ref.state,
                score_old=ro.score if ro is not None else None,
                score_new=rn.score if rn is not None else None,
                message_old=ro.message if ro is not None else None,
                message_new=rn.message if rn is not None else None,
                levels=_levels(ro, rn),
            )
        )
    return out


def compare(
    card: CardState,
    old: ScorecardDoc,
    new: ScorecardDoc,
    old_entries: Mapping[str, BaselineEntry],
    matches: Sequence[GameMatch],
    calculators: tuple[str, str] = ("", ""),
) -> CardRescore:
    old_envs = {e.id: e for e in old.environments}
    new_envs = {e.id: e for e in new.environments}
    how = {m.game_id: m for m in matches}
    games: list[GameChange] = []
    for gid in [*old_envs, *(g for g in new_envs if g not in old_envs)]:
        eo, en = old_envs.get(gid), new_envs.get(gid)
        plays = card.games.get(gid)
        m = how.get(gid)
        # An unplayed game (competition view) is scored by its own entry on either side.
        games.append(
            GameChange(
                game_id=gid,
                played=plays is not None,
                used_old=gid if gid in old_entries else None,
                used_new=m.used if m is not None else (gid if en is not None else None),
                how_new=m.how if m is not None else ("unplayed" if en is not None else "absent"),
                versions=m.versions if m is not None else [],
                score_old=eo.score if eo is not None else None,
                score_new=en.score if en is not None else None,
                delta=_delta(eo.score if eo is not None else None, en.score if en is not None else None),
                runs=_runs(eo, en, best_play_index(plays) if plays else 0),
            )
        )
    games.sort(key=lambda g: (-abs(g.delta), g.game_id))
    t_old = {t.id: t.score for t in old.tags_scores if t.id is not None}
    t_new = {t.id: t.score for t in new.tags_scores if t.id is not None}
    tags = [
        TagChange(t, t_old.get(t), t_new.get(t), _delta(t_old.get(t), t_new.get(t)))
        for t in [*t_old, *(x for x in t_new if x not in t_old)]
    ]
    tags.sort(key=lambda t: (-abs(t.delta), t.tag))
    return CardRescore(
        card_id=card.card_id,
        played_set_id=card.baselines_id,
        score_old=old.score,
        score_new=new.score,
        delta=new.score - old.score,
        games=games,
        tags=tags,
        calculator_old=calculators[0],
        calculator_new=calculators[1],
    )


def rescore_card(
    card: CardState,
    old_entries: Mapping[str, BaselineEntry],
    new_entries: Mapping[str, BaselineEntry],
    *,
    match: Match = "exact",
    all_environments: bool = False,
    calculator: Calculator | None = None,
) -> CardRescore:
    """The card as played and under ``new_entries`` and ``calculator``; ``all_environments``: the competition view."""
    own = calculator_of(card)
    new_calc = calculator if calculator is not None else own
    every_old = sorted(old_entries) if all_environments else None
    old = score_card(card, old_entries, all_environments=every_old, calculator=own)
    new, matches = score_under(card, new_entries, match=match, all_environments=all_environments, calculator=new_calc)
    return compare(card, old, new, old_entries, matches, (own.version, new_calc.version))


def by_largest_change(results: Iterable[CardRescore]) -> list[CardRescore]:
    return sorted(results, key=lambda r: (-abs(r.delta), r.card_id))


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _i(v: int | None) -> str:
    return "-" if v is None else str(v)


def _arrow(old: str, new: str) -> str:
    return old if old == new else f"{old} -> {new}"


def match_note(m: GameMatch) -> str | None:
    if m.how == "base":
        others = [v for v in m.versions if v != m.used]
        extra = f" (first of {len(m.versions)} versions; also {', '.join(others)})" if others else ""
        return f"{m.game_id}: scored with the baselines of {m.used}{extra}"
    if m.how == "missing":
        return f"{m.game_id}: not in the baseline set"
    return None


def rescore_text(
    results: Sequence[CardRescore],
    *,
    set_name: str,
    match: Match,
    all_environments: bool,
    calculator: str | None = None,
) -> str:
    changed = sum(1 for r in results if r.delta != 0)
    view = ", competition view (every game of each set)" if all_environments else ""
    calc = f", calculator arc-agi {calculator}" if calculator is not None else ""
    lines = [f"rescored {len(results)} card(s) under {set_name}{calc}, match {match}{view}: {changed} changed"]
    for r in results:
        played = r.played_set_id[:12] if r.played_set_id else "none"
        if calculator is not None:
            played += f", calculator {_arrow(r.calculator_old, r.calculator_new)}"
        lines.append("")
        lines.append(
            f"card {r.card_id}   score {_f(r.score_old)} -> {_f(r.score_new)} ({r.delta:+.2f})   played under {played}"
        )
        for g in r.games:
            used = ""
            if g.how_new == "base":
                others = [v for v in g.versions if v != g.used_new]
                used = f"   scored with {g.used_new}" + (f" (also in set: {', '.join(others)})" if others else "")
            elif g.how_new == "missing":
                used = "   not in the new set"
            elif not g.played:
                used = "   unplayed"
            lines.append(f"  game {g.game_id}   score {_f(g.score_old)} -> {_f(g.score_new)} ({g.delta:+.2f}){used}")
            for i, run in enumerate(g.runs):
                best = " (best)" if run.best else ""
                lines.append(
                    f"    play {i + 1}{best}  guid {run.guid or '-'}  state {run.state}  "
                    f"score {_arrow(_f(run.score_old), _f(run.score_new))}"
                )
                if run.message_old != run.message_new or run.message_new:
                    lines.append(f"      message: {_arrow(run.message_old or '-', run.message_new or '-')}")
                lines.append(f"      {'level':>5}  {'baseline':>14}  {'actions':>11}  {'score':>16}")
                for lv in run.levels:
                    lines.append(
                        f"      {lv.level:>5}  {_arrow(_i(lv.baseline_old), _i(lv.baseline_new)):>14}  "
                        f"{_arrow(_i(lv.actions_old), _i(lv.actions_new)):>11}  "
                        f"{_arrow(_f(lv.score_old), _f(lv.score_new)):>16}"
                    )
        moved = [t for t in r.tags if t.delta != 0 or t.score_old is None or t.score_new is None]
        if moved:
            lines.append("  tags: " + ", ".join(f"{t.tag} {_f(t.score_old)} -> {_f(t.score_new)}" for t in moved))
    return "\n".join(lines)
