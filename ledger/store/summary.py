"""The cards summary: one row per card (and its tags and games in a keys table), a projection of the log.

Every list (``ledger cards``, ``compare --tag``, the viewer's and the bundle's cards pages) reads a page of
``card_summary`` instead of replaying every card. The rule that keeps it a projection:

* it follows the log by position (:mod:`ledger.store.summary_tail`): its row of ``tracking`` holds the ``seq`` and
  hash of the last event folded, written in the same transaction as the rows, so each event is folded exactly
  once; a read catches it up to the log's head first; ``ledger verify`` and ``ledger rebuild-summary --check``
  prove the rows and keys equal a rebuild from the log up to that position;
* it stays cheap: the :class:`SummaryKeeper` keeps the projections of the cards it folded (per process, keyed by
  the version each reflects), folds only the new events, and scores a card (score, levels completed, level count)
  only for a batch that holds an event other than an action: an action changes counters, never those (levels are
  scored from their LevelCompleted marks). The keys table is rewritten only when the card's tags or games change.
  A card it does not hold (or whose last fold was rolled back) is replayed from its stream once;
* a card with an event that does not decode has no row (the log takes any bytes; ``verify`` reports the event).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from ledger.domain import baselines as bl
from ledger.domain.document import ScorecardDoc
from ledger.domain.events import CARD_STREAM, BaselineEntry, BaselinesRecorded, decode
from ledger.domain.projection import CardState
from ledger.domain.scoring import calculator_of, score_card
from ledger.errors import StoreError
from ledger.rules.timeline import lapse
from ledger.store.cards import replay

SUMMARY = "card_summary"
KEYS = "card_summary_keys"
#: ``opened_key`` of a card without a CardOpened event: it sorts after every opened card.
NEVER = 2**62
#: Event types that change a card's counters and never its score or keys.
COUNTER_TYPES = frozenset({"action_taken", "action_ignored"})
#: Cards whose projection a writer keeps in memory (the least recently appended are dropped first).
CACHED_CARDS = 512

COLUMNS = (
    "card_id",
    "version",
    "opened",
    "opened_key",
    "closed",
    "closed_key",
    "close_reason",
    "last_ts",
    "last_key",
    "state",
    "games",
    "plays",
    "actions",
    "events",
    "levels",
    "level_count",
    "score",
    "tags",
    "game_ids",
    "retracted",
    "retract_reason",
    "game_stats",
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_tags_enc = msgspec.json.Encoder()


class SummaryRow(msgspec.Struct, frozen=True):
    """One row of ``card_summary``: what a list shows of a card, and its sort keys (microseconds since 1970)."""

    card_id: str
    version: int
    opened: str | None
    opened_key: int
    closed: str | None
    closed_key: int | None
    close_reason: str | None
    last_ts: str | None
    last_key: int | None
    state: str
    games: int
    plays: int
    actions: int
    events: int
    #: Levels completed, as the document counts them (each game's best play).
    levels: int
    #: Levels of every game played (under the card's baselines): what ``levels`` counts out of.
    level_count: int
    score: float
    #: The card's tags as lists show them (``all_tags``: its own, then those given at capture), as JSON; every tag
    #: filter matches them through the keys table.
    tags: str | None
    #: The games played as JSON, in the order of their first play (as the card's document lists them).
    game_ids: str
    retracted: str | None
    retract_reason: str | None
    #: Per game as JSON (see :func:`game_stats`): what ``compare --tag`` aggregates per game and level.
    game_stats: str


#: (score, levels completed, level count, game stats JSON) of a card's document: what its row holds of its score.
Scored = tuple[float, int, int, str]


def micros(t: datetime) -> int:
    """``t`` as microseconds since 1970 (a naive time is taken as UTC, as the lists read it)."""
    aware = t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    # The timedelta's own fields: a third of the cost of ``// timedelta(microseconds=1)``, the same integer.
    d = aware - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def card_score(card: CardState, baselines: Mapping[str, BaselineEntry]) -> Scored:
    """The card's score, levels completed and level count under ``baselines`` and the card's own calculator (the
    toolkit that played it), as its document has them (an open competition card as it will close)."""
    every = card.environments if card.competition_mode and not card.closed else None
    return scored(score_card(card, baselines, all_environments=every, calculator=calculator_of(card)))


def scored(doc: ScorecardDoc) -> Scored:
    """(score, levels completed, level count, game stats) of a card's document: what its summary row holds of it."""
    return doc.score, doc.total_levels_completed, doc.total_levels, game_stats(doc)


def game_stats(doc: ScorecardDoc) -> str:
    """Per game of the document, as JSON: ``[game_id, score, levels completed, level count, actions of each
    completed level, score of each completed level, baseline of each level (-1: none)]``, levels from the game's
    best play (the play its score comes from).

    Only what changes with a scored event is kept (a completed level's actions are fixed when it completes; the
    actions of the level being played are not kept), so the capture path's counter-only update leaves it true.
    """
    out = []
    for env in doc.environments:
        run = max(env.runs, key=lambda r: r.levels_completed, default=None) if env.runs else None
        done = run.levels_completed if run is not None else 0
        acts = list((run.level_actions or [])[:done]) if run is not None else []
        scores = list((run.level_scores or [])[:done]) if run is not None else []
        base = list(run.level_baseline_actions or []) if run is not None else []
        out.append([env.id, env.score, env.levels_completed, env.level_count, acts, scores, base])
    return _tags_enc.encode(out).decode()


def row_of(card: CardState, version: int, scored: Scored) -> SummaryRow:
    """The summary row of ``card`` as folded up to ``version``."""
    plays = [p for ps in card.games.values() for p in ps]
    return SummaryRow(
        card_id=card.card_id,
        version=version,
        opened=_iso(card.opened_at),
        opened_key=micros(card.opened_at) if card.opened_at is not None else NEVER,
        closed=_iso(card.closed_at),
        closed_key=micros(card.closed_at) if card.closed_at is not None else None,
        close_reason=card.close_reason,
        last_ts=_iso(card.last_ts),
        last_key=micros(card.last_ts) if card.last_ts is not None else None,
        state="closed" if card.closed else "open",
        games=len(card.games),
        plays=len(plays),
        actions=sum(p.actions for p in plays),
        events=card.events,
        levels=scored[1],
        level_count=scored[2],
        score=scored[0],
        tags=_tags_enc.encode(card.all_tags).decode() if card.all_tags else None,
        game_ids=_tags_enc.encode(list(card.games)).decode(),
        retracted=_iso(card.retracted_at),
        retract_reason=card.retract_reason,
        game_stats=scored[3],
    )


def keys_of(card: CardState) -> frozenset[tuple[str, str]]:
    """What the keys table holds for a card: ``("t", tag)`` for every tag a filter matches (``all_tags``),
    ``("g", game id)`` and ``("b", base id)`` (the part before the first ``-``) for every game it played, and
    ``("c", release)`` for the arc-agi release whose calculator scores it, when the card records one, and
    ``("p", guid)`` for the guid of every play it holds (an import finds the card a recording's plays are on)."""
    out = {("t", t) for t in card.all_tags}
    if card.calculator is not None:
        out.add(("c", card.calculator))
    for gid, plays in card.games.items():
        out.add(("g", gid))
        out.add(("b", gid.split("-", 1)[0]))
        out.update(("p", p.guid) for p in plays)
    return frozenset(out)


def card_id_of(stream: str) -> str | None:
    """The card id of a card stream, None for any other stream."""
    return stream[len(CARD_STREAM) :] if stream.startswith(CARD_STREAM) else None


def _baseline_set(body: bytes) -> dict[str, dict[str, BaselineEntry]]:
    try:
        ev = decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}
    return {ev.set_id: bl.as_map(ev.entries)} if isinstance(ev, BaselinesRecorded) else {}


def baselines_map(set_id: str, bodies: Sequence[bytes]) -> dict[str, BaselineEntry]:
    """The entries of a baseline set from its stream's bodies (empty when the set is not stored or unreadable)."""
    return _baseline_set(bodies[0]).get(set_id, {}) if bodies else {}


class Tracked(msgspec.Struct):
    """A card as a writer holds it: its projection, the version it reflects, its score and keys."""

    state: CardState
    version: int
    #: (score, levels completed, level count, game stats) as the document has them; None until scored.
    scored: Scored | None
    keys: frozenset[tuple[str, str]]


class Change(msgspec.Struct, frozen=True):
    """What one append writes to the summary: the row, and the card's keys when they changed (else None)."""

    stream: str
    #: None (with ``row``): the card has an event that does not decode, and no row.
    tracked: Tracked | None
    row: SummaryRow | None
    keys: frozenset[tuple[str, str]] | None
    #: Instead of ``row``, for a batch of actions only: (version, actions, events, last_ts, last_key, card_id).
    counters: tuple[int, int, int, str | None, int | None, str] | None = None


#: Reads a stream's bodies with versions 1..N (inside the append transaction).
BodyReader = Callable[[str, int], list[bytes]]


class SummaryKeeper:
    """Per store: the projections of the cards this process appends to, and the baseline sets they use."""

    def __init__(self) -> None:
        self._cards: OrderedDict[str, Tracked] = OrderedDict()
        self._baselines: dict[str, dict[str, BaselineEntry]] = {}
        self._lock = threading.Lock()
        #: Whether the schema has the summary tables (None: not looked yet; a ledger still at an earlier revision
        #: has none, and gets them filled from the log when it is migrated; see ``summary_sql.probe``).
        self.enabled: bool | None = None
        #: Whether the schema has the tag figures table (:mod:`ledger.store.figures`); looked at with ``enabled``.
        self.figures: bool | None = None

    def change(
        self,
        stream: str,
        base_version: int,
        types: Sequence[str],
        bodies: Sequence[bytes],
        read: BodyReader,
        *,
        full: bool = False,
    ) -> Change | None:
        """The summary change of appending ``bodies`` (of ``types``) after ``base_version``; None for a stream
        that is not a card. ``read`` replays the stream when this process does not hold the card at
        ``base_version``; it and the baseline reads run in the caller's transaction.

        The bodies are decoded here, not taken from the caller's event objects: an event the log cannot decode
        (a value outside its type) leaves the card without a row, as a rebuild from the log does."""
        card_id = card_id_of(stream)
        if card_id is None or not self.enabled:
            return None
        with self._lock:
            # Taken out while the append runs: folded in place, it is put back only by ``committed``, so a rolled
            # back append leaves nothing held and the next one replays the stream.
            held = self._cards.pop(stream, None)
        try:
            if held is None or held.version != base_version:
                state = replay(card_id, read(stream, base_version) if base_version else [])
                held = Tracked(state, base_version, None, keys_of(state))
            else:
                state = held.state
            replay(card_id, bodies, state)
        except StoreError:
            # The log takes any bytes; a card with an event that is not one has no row (the rebuild agrees).
            return Change(stream, None, None, None)
        scored = held.scored
        rescore = scored is None or not COUNTER_TYPES.issuperset(types)
        if rescore or scored is None:
            scored = card_score(state, self.baselines(state.baselines_id, read))
        keys = keys_of(state) if rescore else held.keys
        version = base_version + len(bodies)
        tracked = Tracked(state, version, scored, keys)
        if not rescore and not full:
            # The capture hot path: only the counters an action moves.
            last = state.last_ts
            counters = (version, state.total_actions, state.events, _iso(last), micros(last) if last else None, card_id)
            return Change(stream, tracked, None, None, counters)
        return Change(stream, tracked, row_of(state, version, scored), keys if keys != held.keys else None)

    def baselines(self, set_id: str | None, read: BodyReader) -> dict[str, BaselineEntry]:
        """A baseline set by id (cached: a set's content is its id); empty for None or a set not stored."""
        if set_id is None:
            return {}
        got = self._baselines.get(set_id)
        if got is None:
            from ledger.domain.events import baselines_stream

            got = baselines_map(set_id, read(baselines_stream(set_id), 1))
            if got:
                self._baselines[set_id] = got
        return got

    def committed(self, change: Change | None) -> None:
        """Remember the card as the committed append left it."""
        if change is None:
            return
        with self._lock:
            if change.tracked is None:
                self._cards.pop(change.stream, None)
                return
            self._cards[change.stream] = change.tracked
            self._cards.move_to_end(change.stream)
            while len(self._cards) > CACHED_CARDS:
                self._cards.popitem(last=False)

    def forget(self, stream: str) -> None:
        """Drop what is held of a stream (after a failed append or a copy)."""
        with self._lock:
            self._cards.pop(stream, None)


def _groups(rows: Sequence[tuple[str, int, str, bytes]]) -> dict[str, list[tuple[str, int, str, bytes]]]:
    groups: dict[str, list[tuple[str, int, str, bytes]]] = {}
    for r in rows:
        groups.setdefault(r[0], []).append(r)
    return groups


def copied_changes(
    keeper: SummaryKeeper, rows: Sequence[tuple[str, int, str, bytes]], read: BodyReader
) -> list[Change | None]:
    """The summary changes of copied rows (``(stream, version, type, body)``, each stream in version order)."""
    return [
        keeper.change(stream, g[0][1] - 1, [r[2] for r in g], [r[3] for r in g], read, full=True)
        for stream, g in _groups(rows).items()
    ]


@dataclass(frozen=True, slots=True)
class CardSummary:
    """One line of ``ledger cards``."""

    card_id: str
    opened: str | None
    closed: str | None
    close_reason: str | None
    games: int
    plays: int
    actions: int
    score: float
    events: int
    #: The card's tags (``open_scorecard(tags=...)``) then those given to ``serve``/``record --tag``, once each.
    tags: list[str] | None = None
    #: True when ``closed``/``close_reason`` are the toolkit's auto-close (idle/max_open) as of now, not an event.
    lapsed: bool = False
    #: When the card was retracted (``ledger retract``), None if it was not; ``retract_reason`` says why.
    retracted: str | None = None
    retract_reason: str | None = None
    #: False for an open card on an ARC server whose baselines nothing revealed yet: ``score`` is not a score then.
    baselines_known: bool = True
    competition: bool = False  # opened in competition mode: scored over every game of the server

    @classmethod
    def of(cls, row: SummaryRow, now: datetime, limits: tuple[int, int], baselines_known: bool = True) -> CardSummary:
        """The line of a card's summary row as every list shows it at ``now``: an open card the toolkit would have
        closed by then under ``limits`` (STALE_MINUTES, MAX_OPEN_FOR_MINUTES) shown closed, ``lapsed``: the one
        constructor, for ``ledger cards`` and the viewer's lists."""
        card = CardState(card_id=row.card_id, opened_at=_at(row.opened), close_reason=row.close_reason)
        due = lapse(card, _at(row.last_ts), now, *limits)
        return cls(
            card_id=row.card_id,
            opened=row.opened,
            closed=row.closed if due is None else due[0].isoformat(),
            close_reason=row.close_reason if due is None else due[1],
            games=row.games,
            plays=row.plays,
            actions=row.actions,
            score=row.score,
            events=row.events,
            tags=msgspec.json.decode(row.tags) if row.tags is not None else None,
            lapsed=due is not None,
            retracted=row.retracted,
            retract_reason=row.retract_reason,
            baselines_known=baselines_known,
        )


def _at(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso) if iso else None
