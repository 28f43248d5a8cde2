"""Compare by tag: per tag, game and level, how many cards, the best, the median and the quartiles. All from the tag
figures table (:mod:`ledger.store.tag_figures`), so the size never depends on the cards; only the cost reads each card's
usage. Quartiles interpolate linearly (numpy's default); means are exact, rounded once."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from ledger.ledger import Ledger

#: How many cards ``ledger compare`` shows side by side; more is a tag's job.
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
    #: The level's baseline as most of the cards' baseline sets have it.
    baseline: int | None
    reached: int
    completed: int
    #: Actions the completing cards spent on it (best: fewest).
    actions: Spread | None
    median_over_baseline: float | None
    score: Spread


class GameStats(msgspec.Struct, frozen=True, kw_only=True):
    game_id: str
    cards: int
    completed: int
    score: Spread
    levels: list[LevelStats]


class TagCost(msgspec.Struct, frozen=True, kw_only=True):
    """What a tag's cards that carry a cost (usage a file gave them) cost, and per level they completed."""

    cards: int
    cost: float
    levels_completed: int
    cost_per_level: float | None


class TagStats(msgspec.Struct, frozen=True, kw_only=True):
    #: Tags ranked by the median card score (ties: the mean, then more cards, then the tag).
    rank: int
    tag: str
    cards: int
    score: Spread
    best_card: str
    games: list[GameStats]
    cost: TagCost | None = None


class TagReport(msgspec.Struct, frozen=True, kw_only=True):
    tags: list[TagStats]
    missing: list[str]
    include_retracted: bool
    ledger_cards: int
    quartiles: str = QUARTILES_NOTE


Hist = list[tuple[float, int]]


def _at(hist: Hist, k: int) -> float:
    for value, n in hist:
        if k < n:
            return value
        k -= n
    raise IndexError(k)


def quantile(hist: Hist, q: float) -> float:
    total = sum(n for _, n in hist)
    pos = (total - 1) * q
    lo = int(pos)
    hi = min(lo + 1, total - 1)
    a, b = _at(hist, lo), _at(hist, hi)
    return a + (b - a) * (pos - lo)


def mean(hist: Hist) -> float:
    # Exact, then rounded once: the order of a float sum does not matter.
    total = sum(n for _, n in hist)
    return float(sum(Fraction(v) * n for v, n in hist) / total)


def spread(hist: Hist, *, low_is_best: bool = False) -> Spread:
    lo, hi = hist[0][0], hist[-1][0]
    return Spread(
        n=sum(n for _, n in hist),
        mean=mean(hist),
        best=lo if low_is_best else hi,
        q1=quantile(hist, 0.25),
        median=quantile(hist, 0.5),
        q3=quantile(hist, 0.75),
        worst=hi if low_is_best else lo,
    )


def _merge(hist: Hist, value: float, n: int) -> Hist:
    if n <= 0:
        return hist
    out = dict(hist)
    out[value] = out.get(value, 0) + n
    return sorted(out.items())


class _Game:
    """The figure rows of one game of one tag (see :mod:`ledger.store.tag_figures`)."""

    __slots__ = ("bases", "completed", "levels", "reached", "scores")

    def __init__(self) -> None:
        self.scores: Hist = []
        self.completed = 0
        self.reached: dict[int, int] = {}
        self.levels: dict[int, tuple[Hist, Hist]] = {}
        self.bases: list[tuple[str, int]] = []

    def add(self, metric: str, level: int, value: float, label: str, n: int) -> None:
        if metric == "G":
            self.scores.append((value, n))
        elif metric == "C":
            self.completed += n
        elif metric == "R":
            self.reached[int(value)] = self.reached.get(int(value), 0) + n
        elif metric == "B":
            self.bases.append((label, n))
        elif metric in ("A", "L"):
            acts, scores = self.levels.setdefault(level, ([], []))
            (acts if metric == "A" else scores).append((value, n))

    def stats(self, game_id: str) -> GameStats:
        # The baseline most cards have (ties: the first in the labels' order).
        label = min(self.bases, key=lambda b: (-b[1], b[0]))[0] if self.bases else "[]"
        base = msgspec.json.decode(label, type=list[int])
        cards = sum(n for _, n in self.scores)
        count = max([*self.reached, len(base), *self.levels], default=0)
        levels = []
        for lv in range(1, count + 1):
            acts, done_scores = self.levels.get(lv, ([], []))
            completed = sum(n for _, n in acts)
            # Every card that played the game has a score for every level: 0 where it did not complete it.
            scores = _merge(done_scores, 0.0, cards - completed)
            b = base[lv - 1] if lv <= len(base) and base[lv - 1] >= 0 else None
            act = spread(acts, low_is_best=True) if acts else None
            levels.append(
                LevelStats(
                    level=lv,
                    baseline=b,
                    reached=sum(n for got, n in self.reached.items() if got >= lv),
                    completed=completed,
                    actions=act,
                    median_over_baseline=act.median / b if act is not None and b else None,
                    score=spread(scores),
                )
            )
        return GameStats(
            game_id=game_id,
            cards=cards,
            completed=self.completed,
            score=spread(self.scores),
            levels=levels,
        )


def tag_report(ledger: Ledger, tags: Sequence[str], *, include_retracted: bool = False) -> TagReport:
    """The figures of every tag in ``tags``: per tag one read of its figure rows and one of its best card."""
    from ledger.store.summary import best_card, card_count, tag_figure_rows

    wanted = list(dict.fromkeys(tags))
    out = []
    for tag in wanted:
        scores: Hist = []
        games: dict[str, _Game] = {}
        for metric, game_id, level, value, label, n in tag_figure_rows(
            ledger.store, tag, include_retracted=include_retracted
        ):
            if metric == "S":
                scores.append((value, n))
            else:
                games.setdefault(game_id, _Game()).add(metric, level, value, label, n)
        if not scores:
            continue
        score = spread(scores)
        out.append(
            TagStats(
                rank=0,
                tag=tag,
                cards=score.n,
                score=score,
                best_card=best_card(ledger.store, tag, score.best, include_retracted=include_retracted) or "",
                games=[g.stats(gid) for gid, g in sorted(games.items())],
                cost=tag_cost(ledger, tag, include_retracted=include_retracted),
            )
        )
    found = {t.tag for t in out}
    out.sort(key=lambda t: (-t.score.median, -t.score.mean, -t.cards, t.tag))
    out = [msgspec.structs.replace(t, rank=i + 1) for i, t in enumerate(out)]
    return TagReport(
        tags=out,
        missing=[t for t in wanted if t not in found],
        include_retracted=include_retracted,
        ledger_cards=card_count(ledger.store, include_retracted=include_retracted),
    )


def tag_cost(ledger: Ledger, tag: str, *, include_retracted: bool = False) -> TagCost | None:
    """The cost figures of the tag's cards that carry one, read per card: cost is kept as events, not figures."""
    from ledger.app.usage import rows_in, usage_costs
    from ledger.domain.events import card_stream
    from ledger.store.summary import SUMMARY, query, tagged_card_ids

    # The cards that carry any usage are found through the partial index of run_usage events (few, where any):
    # a tag of a ledger without usage costs one probe, not a read of each of its cards.
    with_usage = {str(r[0]) for r in query(ledger.store, "SELECT DISTINCT stream FROM events WHERE type = 'run_usage'")}
    if not with_usage:
        return None
    tagged = tagged_card_ids(ledger.store, [tag], include_retracted=include_retracted)
    costs = usage_costs(ledger, [c for c in tagged if card_stream(c) in with_usage])
    if not costs:
        return None
    levels = sum(
        int(r[0]) for r in rows_in(ledger, f"SELECT levels FROM {SUMMARY} WHERE card_id IN ({{}})", list(costs))
    )
    total = float(sum(Fraction(c) for c in costs.values()))
    return TagCost(
        cards=len(costs), cost=total, levels_completed=levels, cost_per_level=total / levels if levels else None
    )


def _cost_text(c: TagCost | None) -> str:
    if c is None:
        return "no card carries a cost"
    per = "no level completed" if c.cost_per_level is None else f"${c.cost_per_level:.4f} per level completed"
    return f"cost ${c.cost:.4f} over {c.cards} card(s) with one, {c.levels_completed} level(s) completed: {per}"


def cards_command(tag: str, game_id: str | None = None) -> str:
    game = f" --game {shlex.quote(game_id)}" if game_id else ""
    return f"ledger cards --tag {shlex.quote(tag)}{game} --sort score --limit 20"


def _f(x: float) -> str:
    return f"{x:.2f}"


def _a(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.1f}"


def report_text(report: TagReport) -> str:
    lines: list[str] = []
    if len(report.tags) > 1:
        lines.append("tags by median card score")
        for t in report.tags:
            lines.append(
                f"  {t.rank:>2}. {t.tag}  median {_f(t.score.median)}  mean {_f(t.score.mean)}  "
                f"best {_f(t.score.best)}  over {t.cards} card(s)"
                + ("" if t.cost is None else f"  {_cost_text(t.cost)}")
            )
        lines.append("")
    included = " (retracted ones included)" if report.include_retracted else ""
    for t in report.tags:
        s = t.score
        lines += [
            f"tag {t.tag}: {t.cards} card(s), of {report.ledger_cards} in the ledger{included}",
            f"  card score  best {_f(s.best)} ({t.best_card})  q1 {_f(s.q1)}  median {_f(s.median)}  "
            f"q3 {_f(s.q3)}  worst {_f(s.worst)}",
            f"  {_cost_text(t.cost)}",
        ]
        for g in t.games:
            gs = g.score
            lines += [
                "",
                f"  game {g.game_id}: {g.cards} card(s) played it, {g.completed} completed it",
                f"    game score  best {_f(gs.best)}  q1 {_f(gs.q1)}  median {_f(gs.median)}  "
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
