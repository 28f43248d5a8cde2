"""What the pages show, read from a ledger without writing to it. :class:`CardCache` folds only the events appended
since a card was cached, so an open card's page can be polled."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from ledger.app.compare import GameTotals, LevelCell, game_totals, level_cells
from ledger.domain.calculators import Calculator
from ledger.domain.document import EnvironmentDoc, RunDoc, ScorecardDoc
from ledger.domain.events import Numbered, decode
from ledger.domain.projection import CardState
from ledger.domain.scoring import LEVEL_CAP, best_play_index, calculator_of, uncapped_level_score
from ledger.errors import StoreError, UnknownCard
from ledger.rules.postmortem import arithmetic, postmortem
from ledger.rules.server import baselines_source, unknown_baselines
from ledger.rules.text import calculator_line
from ledger.rules.timeline import limits, retraction_text
from ledger.store.summary import CardSummary, SummaryRow, row_of, scored

if TYPE_CHECKING:
    from ledger.app.listing import CardFilter
    from ledger.ledger import Ledger


class CardCache:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._cards: dict[str, tuple[CardState, int]] = {}
        self._lock = threading.Lock()

    def get(self, card_id: str) -> tuple[CardState, int]:
        """The card as it stands now and the number of its events (its stream version)."""
        with self._lock:
            cached = self._cards.get(card_id)
            if cached is None:
                # A cached projection another process wrote, then the rest folded. Versions run 1, 2, ... without
                # gaps, so ``events`` is the version the state covers: later reads fold from there.
                state = self.ledger.load_card(card_id)
                cached = (state, state.events)
            state, version = cached
            # The state moves forward in place: one that fails half-way (a body that does not decode, a gap) is
            # dropped, and read afresh next time.
            try:
                state, version = self.ledger.repository.advance(card_id, state, version)
            except StoreError:
                self._cards.pop(card_id, None)
                raise
            if version == 0:
                raise UnknownCard(card_id)
            self._cards[card_id] = (state, version)
            return state, version

    def stamp(self) -> int:
        """The log's last ``seq``: it changes whenever anything was appended."""
        return self.ledger.store.max_seq()


class CardRow(msgspec.Struct, frozen=True, kw_only=True):
    card_id: str
    tags: list[str]
    games: list[str]
    opened: str | None
    closed: str | None
    close_reason: str | None
    score: float
    plays: int
    actions: int
    levels_completed: int
    levels: int
    events: int
    retracted: str | None = None
    competition: bool = False


class LevelView(LevelCell, frozen=True, kw_only=True):
    """One level of one play: ``uncapped`` is (baseline/actions)^2 x 100 when it went over the 115 cap."""

    uncapped: float | None = None


class PlayView(msgspec.Struct, frozen=True, kw_only=True):
    n: int
    guid: str | None
    state: str | None
    actions: int
    resets: int
    levels_completed: int
    score: float
    best: bool
    message: str | None
    levels: list[LevelView]
    arithmetic: str | None
    actions_after_end: int


class GameView(GameTotals, frozen=True, kw_only=True):
    game_id: str
    best_play: int
    plays: list[PlayView]
    findings: list[str]
    #: The largest of the actions and baselines of any level: the bars' full width.
    scale: int


class CardView(msgspec.Struct, frozen=True, kw_only=True):
    row: CardRow
    source_url: str | None
    opaque: str | None
    competition_mode: bool | None
    baselines_id: str | None
    games: list[GameView]
    tags_scores: list[RunDoc]
    level_cap: float = LEVEL_CAP
    #: The calculator the page's numbers use (``arc-agi 0.9.6 (squared, 0.9.3-0.9.6)``) and its rules in words.
    calculator: str = ""
    rules: str = ""
    usage: list[str] = []
    #: Where the card's baselines came from, and the games whose baselines an ARC server has not revealed yet.
    baselines_source: str | None = None
    baselines_unknown: list[str] = []


def card_row(card: CardState, doc: ScorecardDoc) -> CardRow:
    # Its actions are the document's: a play's actions after its last scored level count in the summary, not there.
    row = msgspec.structs.replace(row_of(card, card.events, scored(doc)), actions=doc.total_actions)
    shown = CardSummary.of(row, datetime.now(UTC), limits(os.environ))
    return summary_row(row, msgspec.structs.replace(shown, competition=card.competition_mode is True))


def _levels(run: RunDoc, calc: Calculator) -> list[LevelView]:
    out = []
    for c in level_cells(run):
        raw = uncapped_level_score(c.completed, c.actions, c.baseline, calc)
        over = raw if raw is not None and raw > calc.level_cap else None
        out.append(LevelView(**msgspec.structs.asdict(c), uncapped=over))
    return out


def rules(calc: Calculator) -> str:
    cap = f"at most {calc.level_cap:g}"
    if not calc.weighted:
        return f"A level scores baseline/actions x 100, {cap}; a play's score is the plain mean of its level scores"
    level = f"A level scores (baseline/actions)^2 x 100, {cap}; a play's score is the level-number-weighted mean"
    return level + (", capped by the weighted share of levels that scored" if calc.completion_cap else "")


def _game(card: CardState, env: EnvironmentDoc, findings: list[str], calc: Calculator) -> GameView:
    plays = card.games.get(env.id, [])
    best = best_play_index(plays)
    views = []
    for i, run in enumerate(env.runs):
        ar = arithmetic(run, calc)
        play = plays[i] if i < len(plays) else None
        views.append(
            PlayView(
                n=i + 1,
                guid=run.guid,
                state=run.state,
                actions=run.actions,
                resets=run.resets or 0,
                levels_completed=run.levels_completed,
                score=run.score,
                best=i == best,
                message=run.message,
                levels=_levels(run, calc),
                arithmetic=ar.text if ar is not None else None,
                actions_after_end=play.actions_after_end if play is not None else 0,
            )
        )
    scale = max([1] + [max(lv.actions, lv.baseline or 0) for p in views for lv in p.levels])
    return GameView(**game_totals(env), game_id=env.id, best_play=best + 1, plays=views, findings=findings, scale=scale)


def card_view(card: CardState, doc: ScorecardDoc, usage: Sequence[str] = ()) -> CardView:
    calc = calculator_of(card)
    pm = postmortem(card, doc, calc)
    findings = {g.game_id: [f.text for f in g.findings] for g in pm.games}
    unknown = unknown_baselines(card, doc)
    opaque = None if card.opaque is None else json.dumps(card.opaque, indent=1, sort_keys=True, default=str)
    return CardView(
        row=card_row(card, doc),
        source_url=card.source_url,
        opaque=opaque,
        competition_mode=card.competition_mode,
        baselines_id=card.baselines_id,
        # Findings and tag scores weigh levels by their baselines: none while those are not known.
        games=[
            _game(card, env, [] if env.id in unknown else findings.get(env.id, []), calc) for env in doc.environments
        ],
        tags_scores=[] if unknown else list(doc.tags_scores),
        usage=list(usage),
        baselines_source=baselines_source(card),
        baselines_unknown=unknown,
        level_cap=calc.level_cap,
        calculator=calculator_line(card, calc).removeprefix("calculator "),
        rules=rules(calc),
    )


def usage_of(cache: CardCache, card_id: str) -> list[str]:
    from ledger.app.usage import card_usage, usage_lines

    return usage_lines(card_usage(cache.ledger, card_id))


def load(cache: CardCache, card_id: str) -> tuple[CardState, ScorecardDoc, int]:
    from ledger.app.card_read import read_card

    card, version = cache.get(card_id)
    return card, read_card(cache.ledger, card_id, card=card).doc, version


def card_events(ledger: Ledger, card_id: str) -> list[Numbered]:
    from ledger.app.card_rows import card_rows

    # A page of rows at a time: the rows of a long card held beside its decoded events would double the memory.
    return [Numbered(r.version, r.seq, decode(r.body)) for r in card_rows(ledger, card_id)]


#: Cards on one page of the cards page (its HTML stays far under 300 KB whatever the ledger holds).
PAGE_SIZE = 100


def summary_row(r: SummaryRow, shown: CardSummary) -> CardRow:
    note = retraction_text(r.retracted, r.retract_reason) if r.retracted else None
    return CardRow(
        card_id=r.card_id,
        tags=msgspec.json.decode(r.tags) if r.tags else [],
        games=msgspec.json.decode(r.game_ids),
        opened=r.opened,
        closed=shown.closed,
        close_reason=shown.close_reason,
        score=r.score,
        plays=r.plays,
        actions=r.actions,
        levels_completed=r.levels,
        levels=r.level_count,
        events=r.events,
        retracted=note,
        competition=shown.competition,
    )


def page_rows(ledger: Ledger, f: CardFilter) -> list[CardRow]:
    from ledger.app.listing import shown_rows

    return [summary_row(r, shown) for r, shown in shown_rows(ledger, f)]
