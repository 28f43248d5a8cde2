"""Compare by tag: per tag, per game and per level, how many cards, the best, the median and the quartiles.

A tag is how users name an agent; a tag of 100,000 cards cannot be shown card by card, so ``ledger compare --tag``
and the viewer's compare page show figures: what the cards of the tag scored, and per game and level how many
reached and completed it, with how many actions against the human baseline. Everything comes from the cards summary
(each card's score and its ``game_stats``, see :func:`ledger.storage.summary.game_stats`) in one query; the
output's size depends on the games and levels, never on the cards. The cards behind a figure are a page of
``ledger cards --tag T --game G --sort score`` (the viewer links to it).

The scores are the cards' own, as their summary rows hold them (each card scored the way its document is).

Quartiles are by linear interpolation between the sorted values (numpy's default, Python's
``statistics.quantiles(method="inclusive")``): for ``n`` values, the quartile ``q`` sits at position
``(n - 1) * q`` of the sorted list, between the two values around it.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from ledger.ledger import Ledger

#: How many cards ``ledger compare`` (and the viewer's compare page) shows side by side; more is a tag's job.
SIDE_BY_SIDE = 12

QUARTILES_NOTE = "quartiles by linear interpolation between the sorted values"


class Spread(msgspec.Struct, frozen=True, kw_only=True):
    """Figures of ``n`` values: the best (highest score, fewest actions), the quartiles, the worst."""

    n: int
    mean: float
    best: float
    q1: float
    median: float
    q3: float
    worst: float


class LevelStats(msgspec.Struct, frozen=True, kw_only=True):
    """One level of a game across the tag's cards that played the game (each card's best play)."""

    level: int
    #: The human baseline (actions) of the level, as most of the cards' baseline sets have it; None: none.
    baseline: int | None
    #: Cards whose best play got to this level (completed every level before it).
    reached: int
    #: Cards that completed it; the others that played the game never did (``reached - completed`` stopped on it).
    completed: int
    #: Actions the completing cards spent on it (best: fewest); None when no card completed it.
    actions: Spread | None
    #: Median actions of the completing cards over the baseline (1.0: as many as the human); None without either.
    median_over_baseline: float | None
    #: The level's score over every card that played the game (a level not completed scores 0).
    score: Spread


class GameStats(msgspec.Struct, frozen=True, kw_only=True):
    """One game across the tag's cards that played it."""

    game_id: str
    cards: int
    #: Cards that completed every level of the game.
    completed: int
    score: Spread
    best_card: str
    levels: list[LevelStats]


class TagStats(msgspec.Struct, frozen=True, kw_only=True):
    """One tag: its cards' scores and each game they played."""

    #: Tags ranked by the median card score (ties: the mean, then more cards, then the tag).
    rank: int
    tag: str
    cards: int
    score: Spread
    best_card: str
    games: list[GameStats]


class TagReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``compare --tag`` prints and the compare page shows for tags."""

    tags: list[TagStats]
    #: Tags asked for that no (listed) card has.
    missing: list[str]
    include_retracted: bool
    #: Cards in the ledger (retracted ones left out unless included): what the tags' cards are out of.
    ledger_cards: int
    quartiles: str = QUARTILES_NOTE


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (linear interpolation, see the module's docs)."""
    pos = (len(values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def spread(values: list[float], *, low_is_best: bool = False) -> Spread:
    """The figures of ``values`` (not empty); sorts them in place."""
    values.sort()
    best, worst = (values[0], values[-1]) if low_is_best else (values[-1], values[0])
    return Spread(
        n=len(values),
        mean=sum(values) / len(values),
        best=best,
        q1=quantile(values, 0.25),
        median=quantile(values, 0.5),
        q3=quantile(values, 0.75),
        worst=worst,
    )


class _Game:
    """What is gathered of one game of one tag while the rows stream by: per card a few appends, no more (the
    figures are computed once at the end)."""

    __slots__ = ("bases", "best", "cards", "completed", "done", "level_actions", "level_scores", "scores")

    def __init__(self) -> None:
        self.cards = 0
        self.completed = 0
        self.scores: list[float] = []
        self.best: tuple[float, str] | None = None
        #: Cards by the levels they reached (levels completed + 1, at most the level count).
        self.done: Counter[int] = Counter()
        self.level_actions: list[list[float]] = []
        self.level_scores: list[list[float]] = []
        self.bases: Counter[tuple[int, ...]] = Counter()

    def add(self, card_id: str, score: float, done: int, count: int, acts: list[int], scores: list[float]) -> None:
        self.cards += 1
        self.scores.append(score)
        if self.best is None or score > self.best[0]:
            self.best = (score, card_id)
        if count and done >= count:
            self.completed += 1
        self.done[min(done + 1, count)] += 1
        while len(self.level_actions) < len(acts):
            self.level_actions.append([])
            self.level_scores.append([])
        for i, a in enumerate(acts):
            self.level_actions[i].append(a)
            self.level_scores[i].append(scores[i])

    def reached(self, level: int) -> int:
        return sum(n for lv, n in self.done.items() if lv >= level)

    def stats(self, game_id: str) -> GameStats:
        base = self.bases.most_common(1)[0][0] if self.bases else ()
        count = max([*self.done, len(base), len(self.level_actions)], default=0)
        levels = []
        for lv in range(1, count + 1):
            acts = self.level_actions[lv - 1] if lv <= len(self.level_actions) else []
            # Every card that played the game has a score for every level: 0 where it did not complete it.
            done_scores = self.level_scores[lv - 1] if lv <= len(self.level_scores) else []
            scores = done_scores + [0.0] * (self.cards - len(acts))
            b = base[lv - 1] if lv <= len(base) and base[lv - 1] >= 0 else None
            act = spread(acts, low_is_best=True) if acts else None
            levels.append(
                LevelStats(
                    level=lv,
                    baseline=b,
                    reached=self.reached(lv),
                    completed=len(acts),
                    actions=act,
                    median_over_baseline=act.median / b if act is not None and b else None,
                    score=spread(scores),
                )
            )
        assert self.best is not None
        return GameStats(
            game_id=game_id,
            cards=self.cards,
            completed=self.completed,
            score=spread(self.scores),
            best_card=self.best[1],
            levels=levels,
        )


_stats_dec = msgspec.json.Decoder(list[tuple[str, float, int, int, list[int], list[float], list[int]]])


def tag_report(ledger: Ledger, tags: Sequence[str], *, include_retracted: bool = False) -> TagReport:
    """The figures of every tag in ``tags`` (each card counted once per tag it has), from one query."""
    from ledger.storage.summary_build import card_count, tag_stat_rows

    wanted = list(dict.fromkeys(tags))
    by_tag: dict[str, tuple[list[float], list[str | float], dict[str, _Game]]] = {}
    for tag, card_id, score, stats in tag_stat_rows(ledger.store, wanted, include_retracted=include_retracted):
        scores, best, games = by_tag.setdefault(tag, ([], [-1.0, ""], {}))
        scores.append(score)
        if score > float(best[0]):
            best[:] = [score, card_id]
        for game_id, g_score, done, count, acts, lv_scores, base in _stats_dec.decode(stats):
            g = games.get(game_id)
            if g is None:
                g = games[game_id] = _Game()
            g.add(card_id, g_score, done, count, acts, lv_scores)
            g.bases[tuple(base)] += 1
    out = []
    for tag in wanted:
        if tag not in by_tag:
            continue
        scores, best, games = by_tag[tag]
        out.append(
            TagStats(
                rank=0,
                tag=tag,
                cards=len(scores),
                score=spread(scores),
                best_card=str(best[1]),
                games=[g.stats(gid) for gid, g in sorted(games.items())],
            )
        )
    out.sort(key=lambda t: (-t.score.median, -t.score.mean, -t.cards, t.tag))
    out = [msgspec.structs.replace(t, rank=i + 1) for i, t in enumerate(out)]
    return TagReport(
        tags=out,
        missing=[t for t in wanted if t not in by_tag],
        include_retracted=include_retracted,
        ledger_cards=card_count(ledger.store, include_retracted=include_retracted),
    )


def cards_command(tag: str, game_id: str | None = None) -> str:
    """The ``ledger cards`` command that pages through the cards behind a tag's (and game's) figures."""
    game = f" --game {shlex.quote(game_id)}" if game_id else ""
    return f"ledger cards --tag {shlex.quote(tag)}{game} --sort score --limit 20"


def _f(x: float) -> str:
    return f"{x:.2f}"


def _a(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.1f}"


def report_text(report: TagReport) -> str:
    """The figures for a terminal: per tag a line, per game a line and a table of its levels."""
    lines: list[str] = []
    if len(report.tags) > 1:
        lines.append("tags by median card score")
        for t in report.tags:
            lines.append(
                f"  {t.rank:>2}. {t.tag}  median {_f(t.score.median)}  mean {_f(t.score.mean)}  "
                f"best {_f(t.score.best)}  over {t.cards} card(s)"
            )
        lines.append("")
    included = " (retracted ones included)" if report.include_retracted else ""
    for t in report.tags:
        s = t.score
        lines += [
            f"tag {t.tag}: {t.cards} card(s), of {report.ledger_cards} in the ledger{included}",
            f"  card score  best {_f(s.best)} ({t.best_card})  q1 {_f(s.q1)}  median {_f(s.median)}  "
            f"q3 {_f(s.q3)}  worst {_f(s.worst)}",
        ]
        for g in t.games:
            gs = g.score
            lines += [
                "",
                f"  game {g.game_id}: {g.cards} card(s) played it, {g.completed} completed it",
                f"    game score  best {_f(gs.best)} ({g.best_card})  q1 {_f(gs.q1)}  median {_f(gs.median)}  "
                f"q3 {_f(gs.q3)}  worst {_f(gs.worst)}",
                f"    {'level':>5} {'baseline':>8} {'reached':>8} {'completed':>9}   "
                f"{'actions: best':>13} {'q1':>6} {'median':>6} {'q3':>6}  {'median/base':>11}   "
                f"{'score: median':>13} {'q1':>6} {'q3':>6}",
            ]
            for lv in g.levels:
                a = lv.actions
                acts = (
                    f"{_a(a.best):>13} {_a(a.q1):>6} {_a(a.median):>6} {_a(a.q3):>6}"
                    if a is not None
                    else f"{'-':>13} {'-':>6} {'-':>6} {'-':>6}"
                )
                ratio = "-" if lv.median_over_baseline is None else f"{lv.median_over_baseline:.2f}"
                lines.append(
                    f"    {lv.level:>5} {'-' if lv.baseline is None else lv.baseline!s:>8} {lv.reached:>8} "
                    f"{lv.completed:>9}   {acts}  {ratio:>11}   {_f(lv.score.median):>13} {_f(lv.score.q1):>6} "
                    f"{_f(lv.score.q3):>6}"
                )
            lines.append(f"    the cards: {cards_command(t.tag, g.game_id)}")
        lines.append("")
    for m in report.missing:
        lines.append(f"no card has tag {m}")
    lines.append(
        f"(each card's best play per game; actions of the cards that completed the level; a level not completed "
        f"scores 0; {report.quartiles})"
    )
    return "\n".join(lines)
