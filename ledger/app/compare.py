"""Cards side by side (``ledger compare`` and the viewer's compare page) and a leaderboard of tags. Cards whose
calculators differ are never ranked as they stand: every card is scored with one calculator."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.app.retract import choose_cards
from ledger.domain.calculators import Calculator
from ledger.domain.document import EnvironmentDoc, RunDoc, ScorecardDoc
from ledger.domain.projection import CardState
from ledger.domain.scoring import best_play_index, calculator_of
from ledger.rules.timeline import retraction_note

if TYPE_CHECKING:
    from ledger.app.tag_stats import TagReport
    from ledger.ledger import Ledger


class LevelCell(msgspec.Struct, frozen=True, kw_only=True):
    level: int
    baseline: int | None
    actions: int
    score: float
    completed: bool


class GameTotals(msgspec.Struct, frozen=True, kw_only=True):
    score: float
    levels_completed: int
    level_count: int
    actions: int
    resets: int
    completed: bool


def game_totals(env: EnvironmentDoc) -> dict[str, Any]:
    return {f: getattr(env, f) for f in GameTotals.__struct_fields__}


class CardGame(GameTotals, frozen=True, kw_only=True):
    plays: int
    best_play: int
    levels: list[LevelCell]
    message: str | None = None


class GameRow(msgspec.Struct, frozen=True, kw_only=True):
    """One game across the cards: ``cards[i]`` is the i-th compared card's entry, None when it did not play it."""

    game_id: str
    levels: int
    cards: list[CardGame | None]

    def baseline(self, lv: int) -> int | None:
        """Level ``lv``'s baseline (from 0) as the table shows it: the first compared card's with that level."""
        return next((e.levels[lv].baseline for e in self.cards if e is not None and lv < len(e.levels)), None)


class CardColumn(msgspec.Struct, frozen=True, kw_only=True):
    card_id: str
    tags: list[str]
    score: float
    games: int
    levels_completed: int
    levels: int
    actions: int
    closed: bool
    #: ``retracted on WHEN, reason: WHY`` for a retracted card; never ranked.
    retracted: str | None = None
    opened: str | None = None


class LeaderRow(msgspec.Struct, frozen=True, kw_only=True):
    rank: int
    tag: str
    cards: int
    mean_score: float
    best_score: float
    best_card: str


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    cards: list[CardColumn]
    games: list[GameRow]
    leaderboard: list[LeaderRow]
    #: The arc-agi release whose calculator scores every card, and the cards whose own calculator is another.
    calculator: str = ""
    rescored: list[str] = msgspec.field(default_factory=list)


def level_cells(run: RunDoc) -> list[LevelCell]:
    return [
        LevelCell(level=i + 1, baseline=None if b < 0 else b, actions=a, score=s, completed=i < run.levels_completed)
        for i, (b, a, s) in enumerate(
            zip(run.level_baseline_actions or [], run.level_actions or [], run.level_scores or [], strict=False)
        )
    ]


def _card_game(card: CardState, env: EnvironmentDoc) -> CardGame:
    plays = card.games.get(env.id, [])
    best = best_play_index(plays)
    runs = env.runs
    run = runs[best] if 0 <= best < len(runs) else runs[0]
    return CardGame(
        **game_totals(env), plays=len(plays), best_play=best + 1, levels=level_cells(run), message=run.message
    )


TagRow = tuple[str, int, float, float, str]


def _by_tag(cards: Iterable[tuple[str, Sequence[str], float]]) -> list[TagRow]:
    """(tag, cards, mean score, best score, best card) of each tag of ``cards`` (card id, tags, score)."""
    by_tag: dict[str, list[tuple[float, str]]] = {}
    for card, tags, score in cards:
        for t in dict.fromkeys(tags):
            by_tag.setdefault(t, []).append((score, card))
    return [(t, len(v), sum(s for s, _ in v) / len(v), *max(v, key=lambda x: x[0])) for t, v in by_tag.items()]


def _ranked(rows: Iterable[TagRow]) -> list[LeaderRow]:
    """Tags ranked by the mean score of their cards (ties: more cards, then the tag)."""
    return [
        LeaderRow(rank=i + 1, tag=tag, cards=n, mean_score=mean, best_score=best, best_card=card)
        for i, (tag, n, mean, best, card) in enumerate(sorted(rows, key=lambda r: (-r[2], -r[1], r[0])))
    ]


def leaderboard(columns: Sequence[CardColumn]) -> list[LeaderRow]:
    """The compared cards' tags ranked, retracted cards left out."""
    return _ranked(_by_tag((c.card_id, c.tags, c.score) for c in columns if c.retracted is None))


class Board(msgspec.Struct, frozen=True, kw_only=True):
    rows: list[LeaderRow]
    calculator: str
    rescored: list[str]


def ledger_board(ledger: Ledger, *, include_retracted: bool = False, calculator: str | None = None) -> Board:
    """Every tag of the ledger ranked, every card scored with one calculator (via the summary if it is all theirs)."""
    from ledger.app.card_read import one_of, own_calculators, recorded_calculators, rescored
    from ledger.store.summary import ranked_cards, tag_board

    recorded = recorded_calculators(ledger)
    cards = None if calculator is None and len({c.arithmetic for c in recorded}) == 1 else ranked_cards(ledger.store)
    # Every card scored alike (the common case) is known from the keys' index alone: the summary ranks them.
    own = own_calculators(ledger, [c for c, _, _ in cards]) if cards is not None else {}
    calc = one_of(own.values() if cards is not None else recorded, calculator)
    again = rescored(ledger, own, calc)
    if not again or include_retracted:
        rows = tag_board(ledger.store, include_retracted=include_retracted)
    else:
        rows = _by_tag((card, tags, again.get(card, score)) for card, tags, score in cards or [])
    return Board(rows=_ranked(rows), calculator=calc.version, rescored=list(again))


def one_calculator(cards: Sequence[CardState], calculator: str | None = None) -> Calculator:
    from ledger.app.card_read import one_of

    return one_of((calculator_of(c) for c in cards), calculator)


def comparison(cards: Sequence[tuple[CardState, ScorecardDoc]], calc: Calculator | None = None) -> Comparison:
    """The comparison of ``cards`` (each with its document scored by ``calc``); games in order of first play."""
    columns: list[CardColumn] = []
    entries: list[dict[str, CardGame]] = []
    for card, doc in cards:
        entries.append({env.id: _card_game(card, env) for env in doc.environments})
        columns.append(
            CardColumn(
                card_id=card.card_id,
                tags=card.all_tags,
                score=doc.score,
                games=len(doc.environments),
                levels_completed=doc.total_levels_completed,
                levels=doc.total_levels,
                actions=doc.total_actions,
                closed=card.closed,
                retracted=retraction_note(card),
                opened=card.opened_at.isoformat() if card.opened_at else None,
            )
        )
    games = []
    for g in dict.fromkeys(g for e in entries for g in e):
        row = [e.get(g) for e in entries]
        games.append(
            GameRow(game_id=g, levels=max((len(e.levels) for e in row if e is not None), default=0), cards=row)
        )
    rescored = [c.card_id for c, _ in cards if calc is not None and calculator_of(c).arithmetic != calc.arithmetic]
    return Comparison(
        cards=columns,
        games=games,
        leaderboard=leaderboard(columns),
        calculator=calc.version if calc is not None else "",
        rescored=rescored,
    )


def compare_cards(
    ledger: Ledger,
    card_ids: Sequence[str] = (),
    *,
    include_retracted: bool = False,
    hint: str = "add --include-retracted to compare it",
    calculator: str | None = None,
) -> Comparison:
    """The named cards, each once, scored with one calculator."""
    chosen = choose_cards(ledger, card_ids, include_retracted=include_retracted, hint=hint)
    states = _load_all(ledger, [s.card_id for s in chosen])
    calc = one_calculator(states, calculator)
    return comparison([(s, ledger.document(s.card_id, card=s, calculator=calc)) for s in states], calc)


@dataclass(frozen=True, slots=True)
class Compared:
    """`ledger compare` whole: the named cards side by side, and the figures of the ``--group`` tags."""

    side_by_side: Comparison | None
    report: TagReport | None

    def to_json(self) -> Any:
        if self.report is None:
            return self.side_by_side
        return {**msgspec.to_builtins(self.report), "side_by_side": msgspec.to_builtins(self.side_by_side)}

    def lines(self) -> list[str]:
        from ledger.app.tag_stats import SIDE_BY_SIDE, report_text

        parts = []
        if self.side_by_side is not None:
            parts.append(
                comparison_text(self.side_by_side)
                + f"\n\n(at most {SIDE_BY_SIDE} cards side by side; --tag T for figures)"
            )
        if self.report is not None:
            parts.append(report_text(self.report))
        return ["\n\n".join(parts)]


def compare(
    ledger: Ledger, card_ids: Sequence[str], tags: Sequence[str], *, include_retracted: bool, calculator: str | None
) -> Compared:
    """The named cards side by side (if any), and the figures of the cards of each of ``tags`` (if any)."""
    from ledger.app.tag_stats import tag_report
    from ledger.errors import LedgerError

    side = (
        compare_cards(ledger, card_ids, include_retracted=include_retracted, calculator=calculator)
        if card_ids
        else None
    )
    report = tag_report(ledger, tags, include_retracted=include_retracted) if tags else None
    if report is not None and not report.tags and not card_ids:
        raise LedgerError("no card has tag " + ", ".join(repr(t) for t in tags))
    return Compared(side, report)


def _load_all(ledger: Ledger, ids: Sequence[str]) -> list[CardState]:
    # Their events are read a few hundred cards per query, not a round trip per card.
    from ledger.domain.events import card_stream
    from ledger.errors import UnknownCard
    from ledger.store.cards import replay
    from ledger.store.summary import stream_bodies

    bodies = stream_bodies(ledger.store, [card_stream(c) for c in ids])
    out = []
    for c in ids:
        mine = bodies[card_stream(c)]
        if not mine:
            raise UnknownCard(c)
        out.append(replay(c, mine))
    return out


def comparison_text(cmp: Comparison) -> str:
    letters = [letter(i) for i in range(len(cmp.cards))]
    lines = [calculator_note(cmp), "", "cards"] if cmp.calculator else ["cards"]
    for mark, c in zip(letters, cmp.cards, strict=True):
        tags = ", ".join(c.tags) if c.tags else "-"
        state = "closed" if c.closed else "open"
        lines.append(
            f"  {mark:>2}  {c.card_id}  score {c.score:.2f}  levels {c.levels_completed}/{c.levels}  "
            f"actions {c.actions}  {state}  tags {tags}"
        )
        if c.retracted:
            lines.append(f"      {c.retracted} (not ranked)")
    for g in cmp.games:
        lines += ["", f"game {g.game_id}", _game_header(letters)]
        for lv in range(g.levels):
            lines.append(_level_line(g, lv, letters))
        totals = [f"{_entry_total(e):>18}" for e in g.cards]
        lines.append(f"  {'game':>5}  {'':>8}" + "".join(f"  {t}" for t in totals))
    if cmp.games:
        lines += ["", "(* level not completed; a game's columns show its best play, then its score and levels)"]
    lines += ["", "leaderboard by tag"]
    if not cmp.leaderboard:
        lines.append("  no compared card has a tag")
    for r in cmp.leaderboard:
        lines.append(
            f"  {r.rank:>2}. {r.tag}  mean {r.mean_score:.2f} over {r.cards} card(s), best {r.best_score:.2f} "
            f"({r.best_card})"
        )
    return "\n".join(lines)


def calculator_note(cmp: Comparison) -> str:
    if not cmp.rescored:
        return f"scores with the calculator of arc-agi {cmp.calculator}, every card's own"
    marks = [letter(i) for i, c in enumerate(cmp.cards) if c.card_id in cmp.rescored]
    return (
        f"scores with the calculator of arc-agi {cmp.calculator}: card(s) {', '.join(marks)} played under another "
        "release are re-scored with it (ledger compare --calculator VERSION picks another)"
    )


def letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"A{i}"


def _game_header(letters: Sequence[str]) -> str:
    cols = "".join(f"  {mark + ' actions':>9} {'score':>7} " for mark in letters)
    return f"  {'level':>5}  {'baseline':>8}{cols}"


def _level_line(g: GameRow, lv: int, letters: Sequence[str]) -> str:
    base = g.baseline(lv)
    cells = []
    for e in g.cards:
        if e is None or lv >= len(e.levels):
            cells.append(f"  {'-':>9} {'-':>7} ")
            continue
        cell = e.levels[lv]
        done = "" if cell.completed else "*"
        cells.append(f"  {cell.actions:>9} {cell.score:>7.2f}{done or ' '}")
    return f"  {lv + 1:>5}  {('-' if base is None else base)!s:>8}" + "".join(cells)


def _entry_total(e: CardGame | None) -> str:
    if e is None:
        return "not played"
    return f"{e.score:.2f} ({e.levels_completed}/{e.level_count})"
