"""The cards summary: one row per card (its tags and games in a keys table), a projection of the log that every
list reads a page of instead of replaying every card (the same ``?`` statements on both backends).

* It follows the log by position: its ``tracking`` row (seq and hash of the last event folded) is written in the
  transaction that writes the rows, so each event is folded once whoever catches up and whenever it is killed.
* Tailing by ``seq`` needs ``seq`` order to be commit order: SQLite has one writer; on PostgreSQL every insert into
  ``events`` holds the append advisory lock from its ``seq`` to its commit (an insert that skipped it would make
  ``verify`` report the summary differing from a rebuild).
* A card with an event that does not decode has no row (the log takes any bytes; ``verify`` reports the event).
* A read-only store never writes: when behind, it reads an in-memory copy with the tail folded (:class:`Overlay`).
* A rebuild holds one card at a time (the log in ``(stream, version)`` order): a row depends only on its card's
  events and baseline set, so this equals folding the log in ``seq`` order.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from itertools import batched
from typing import Any

import msgspec

from ledger.domain import baselines as bl
from ledger.domain.document import ScorecardDoc
from ledger.domain.events import CARD_STREAM, BaselineEntry, BaselinesRecorded, baselines_stream, decode
from ledger.domain.projection import CardState
from ledger.domain.scoring import calculator_of, score_card
from ledger.errors import StoreError
from ledger.rules.timeline import lapse
from ledger.store import tracking
from ledger.store.base import LogStore, StoreBase, SummaryOverlay, has_table, in_chunks, pg_sql
from ledger.store.cards import replay
from ledger.store.tag_figures import (
    FIGURES,
    KEY_COLUMNS,
    SELECT_ALL_SQL,
    Key,
    counts_of,
    old_rows,
    replace_all,
    write_delta,
)
from ledger.store.tag_figures import differences as figure_differences

SUMMARY = "card_summary"
KEYS = "card_summary_keys"
#: ``opened_key`` of a card without a CardOpened event: it sorts after every opened card.
NEVER = 2**62
#: Event types that change a card's counters and never its score or keys.
COUNTER_TYPES = frozenset({"action_taken", "action_ignored"})
#: Cards whose projection a writer keeps in memory (the least recently appended are dropped first).
CACHED_CARDS = 512


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


#: The table's columns, in the row's field order: a row's values are its fields as a tuple.
COLUMNS = SummaryRow.__struct_fields__
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
    return doc.score, doc.total_levels_completed, doc.total_levels, game_stats(doc)


def game_stats(doc: ScorecardDoc) -> str:
    """Per game, as JSON: ``[game_id, score, levels completed, level count, actions and score of each completed
    level, baseline of each level (-1: none)]`` from the game's best play. Only what a scored event changes is
    kept (not the actions of the level being played), so a counter-only update leaves it true."""
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
    return stream[len(CARD_STREAM) :] if stream.startswith(CARD_STREAM) else None


def baseline_set(
    sets: dict[str, dict[str, BaselineEntry]], set_id: str | None, first_bodies: Callable[[str], Sequence[bytes]]
) -> dict[str, BaselineEntry]:
    """A baseline set's entries by id, cached in ``sets`` (a set's content is its id); empty for None or a set not
    stored or unreadable. ``first_bodies`` reads a stream's first event's body (a list, empty for no stream)."""
    if set_id is None:
        return {}
    got = sets.get(set_id)
    if got is None:
        bodies = first_bodies(baselines_stream(set_id))
        try:
            ev = decode(bodies[0]) if bodies else None
            got = bl.as_map(ev.entries) if isinstance(ev, BaselinesRecorded) and ev.set_id == set_id else {}
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError, ValueError):
            got = {}
        if got:
            sets[set_id] = got
    return got


class Tracked(msgspec.Struct):
    """A card as a writer holds it: its projection, the version it reflects, its score (None until scored), keys."""

    state: CardState
    version: int
    scored: Scored | None
    keys: frozenset[tuple[str, str]]
    #: The projection is its writer's (:meth:`SummaryKeeper.take`): read, never folded into.
    handed: bool = False


class Change(msgspec.Struct, frozen=True):
    """What one append writes to the summary: the row, and the card's keys when they changed (else None)."""

    stream: str
    #: None (with ``row``): the card has an event that does not decode, and no row.
    tracked: Tracked | None
    row: SummaryRow | None
    keys: frozenset[tuple[str, str]] | None


#: Reads a stream's bodies with versions 1..N (inside the append transaction).
BodyReader = Callable[[str, int], list[bytes]]


class SummaryKeeper:
    """Per store: the projections of the cards this process appends to, and the baseline sets they use."""

    def __init__(self) -> None:
        self._cards: OrderedDict[str, Tracked] = OrderedDict()
        self._baselines: dict[str, dict[str, BaselineEntry]] = {}
        self._lock = threading.Lock()
        #: Whether the schema has the tag figures table (:mod:`ledger.store.tag_figures`; see :func:`probe`).
        self.figures: bool | None = None

    def change(
        self,
        stream: str,
        base_version: int,
        count: int,
        events: Callable[[], Sequence[tuple[str, bytes]]],
        read: BodyReader,
    ) -> Change | None:
        """The summary change of appending ``count`` events (``events()``: their types and bodies) after
        ``base_version``; None for a stream that is not a card. ``read`` (in the caller's transaction) replays the
        stream when the card is not held at ``base_version``. The bodies are decoded here: one the log cannot decode
        leaves the card without a row, as a rebuild does. A card held at the version these events end at was handed
        over by its writer (:meth:`take`; the keeper's own cards are never ahead of the log's position): it is
        scored as it is, its events not even read (its writer folded the very events it encoded; a log changed
        since is verify's to find). A handed card is only read: its next append is folded from the log."""
        card_id = card_id_of(stream)
        if card_id is None:
            return None
        with self._lock:
            # Taken out while the append runs: folded in place, it is put back only by ``committed``, so a rolled
            # back append leaves nothing held and the next one replays the stream.
            held = self._cards.pop(stream, None)
        version = base_version + count
        if held is not None and held.version == version:
            card = held.state
            got = card_score(card, baseline_set(self._baselines, card.baselines_id, lambda s: read(s, 1)))
            keys = keys_of(card)
            return Change(stream, Tracked(card, version, got, keys, handed=True), row_of(card, version, got), keys)
        try:
            if held is None or held.version != base_version or held.handed:
                state = replay(card_id, read(stream, base_version) if base_version else [])
                held = Tracked(state, base_version, None, keys_of(state))
            else:
                state = held.state
            read_events = events()
            types = [t for t, _ in read_events]
            replay(card_id, [b for _, b in read_events], state)
        except StoreError:
            # The log takes any bytes; a card with an event that is not one has no row (the rebuild agrees).
            return Change(stream, None, None, None)
        scored = held.scored
        rescore = scored is None or not COUNTER_TYPES.issuperset(types)
        if rescore or scored is None:
            scored = card_score(state, baseline_set(self._baselines, state.baselines_id, lambda s: read(s, 1)))
        keys = keys_of(state) if rescore else held.keys
        tracked = Tracked(state, version, scored, keys)
        return Change(stream, tracked, row_of(state, version, scored), keys if keys != held.keys else None)

    def take(self, handed: dict[str, tuple[CardState, int]]) -> None:
        """Hold the cards writers handed over (``StoreBase.hand_over``), each at the version its append left it."""
        while handed:
            stream, (state, version) = handed.popitem()
            self.committed(Change(stream, Tracked(state, version, None, frozenset(), handed=True), None, None))

    def committed(self, change: Change | None) -> None:
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


def copied_changes(
    keeper: SummaryKeeper, rows: Sequence[tuple[str, int, str, bytes]], read: BodyReader
) -> list[Change | None]:
    """The summary changes of copied rows (``(stream, version, type, body)``, each stream in version order)."""
    groups: dict[str, list[tuple[str, int, str, bytes]]] = {}
    for r in rows:
        groups.setdefault(r[0], []).append(r)
    return [
        keeper.change(stream, g[0][1] - 1, len(g), lambda g=g: [(r[2], r[3]) for r in g], read)  # type: ignore[misc]
        for stream, g in groups.items()
    ]


class CardSummary(msgspec.Struct, frozen=True):
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
        closed by then under ``limits`` (STALE_MINUTES, MAX_OPEN_FOR_MINUTES) shown closed, ``lapsed``."""
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


def upsert_sql(columns: Sequence[str]) -> str:
    """The statement that writes a summary row's ``columns`` (``card_id`` first)."""
    return (
        f"INSERT INTO {SUMMARY} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
        f"ON CONFLICT (card_id) DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in columns[1:])}"
    )


UPSERT_SQL = upsert_sql(COLUMNS)
DELETE_KEYS_SQL = f"DELETE FROM {KEYS} WHERE card_id = ?"
DELETE_ROW_SQL = f"DELETE FROM {SUMMARY} WHERE card_id = ?"
COUNTERS_SQL = f"UPDATE {SUMMARY} SET version = ?, actions = ?, events = ?, last_ts = ?, last_key = ? WHERE card_id = ?"
INSERT_KEY_SQL = f"INSERT INTO {KEYS} (kind, value, card_id) VALUES (?, ?, ?)"
SELECT_ROWS_SQL = f"SELECT {', '.join(COLUMNS)} FROM {SUMMARY}"
SELECT_KEYS_SQL = f"SELECT card_id, kind, value FROM {KEYS}"

#: Sort keys: the columns a page is ordered by (then ``card_id``); opened and score have an index.
SORT_COLUMNS = {
    "opened": ("opened_key",),
    "score": ("score", "opened_key"),
    "actions": ("actions", "opened_key"),
    "events": ("events", "opened_key"),
    "id": (),
}


def figures_change(fetch: Callable[[str, Any], list[Any]], changes: Iterable[Change | None]) -> Counter[Key]:
    """How the tag figures move when ``changes`` are written (read before: the old rows are read through ``fetch``)."""
    done = [c for c in changes if c is not None]
    out: Counter[Key] = Counter()
    for r in (c.row for c in done):
        if r is not None:
            out.update(counts_of(r.tags, r.score, r.game_stats, r.retracted))
    for row in old_rows(fetch, [c.stream[len(CARD_STREAM) :] for c in done]).values():
        out.subtract(counts_of(*row))
    return out


def write_changes(
    executemany: Callable[[str, Any], Any], changes: Iterable[Change | None], figures: Counter[Key] | None = None
) -> None:
    """Write many cards' changes with one ``executemany`` of each kind (one parse, pipelined on PostgreSQL), and
    ``figures``, the tag figures' change (:func:`figures_change`, read before)."""
    done = [c for c in changes if c is not None]
    if figures:
        write_delta(executemany, figures)
    gone = [(c.stream[len(CARD_STREAM) :],) for c in done if c.row is None]
    rows = [c.row for c in done if c.row is not None]
    rekeyed = [(c.row.card_id, c.keys) for c in done if c.row is not None and c.keys is not None]
    if gone or rekeyed:
        executemany(DELETE_KEYS_SQL, [*gone, *((cid,) for cid, _ in rekeyed)])
    if gone:
        executemany(DELETE_ROW_SQL, gone)
    if rows:
        executemany(UPSERT_SQL, [msgspec.structs.astuple(r) for r in rows])
    keys = [(k, v, cid) for cid, ks in rekeyed for k, v in sorted(ks)]
    if keys:
        executemany(INSERT_KEY_SQL, keys)


class PageQuery(msgspec.Struct, frozen=True):
    """What one page of cards is: filters, the sort, where it starts, how many."""

    tags: tuple[str, ...] = ()
    games: tuple[str, ...] = ()
    #: "open"/"closed" as shown: a card the toolkit would have closed by ``now`` counts as closed.
    state: str | None = None
    since_key: int | None = None
    sort: str = "opened"
    descending: bool = False
    limit: int | None = None
    #: The card id the page starts after (keyset pagination: the next page after the last card shown).
    after: str | None = None
    include_retracted: bool = False
    #: Filter by tag row by row while walking the sort's index (EXISTS on the keys table), not by reading every card
    #: of the tag and sorting them: the plan for a tag of many cards (see :func:`tag_points_query`).
    walk: bool = False
    #: Microseconds since 1970: the moment the auto-close is judged at, and the toolkit's limits in microseconds.
    now_key: int = 0
    stale_us: int = 0
    max_open_us: int = 0


def shown_closed_expr(dialect: str) -> str:
    """SQL for when a card is shown closed (its close, or the toolkit's auto-close if due by ``now``), or NULL.

    Parameters (microseconds): never, stale, max_open, now, never, stale, max_open.
    """
    due = f"{'min' if dialect == 'sqlite' else 'LEAST'}(coalesce(last_key, ?) + ?, opened_key + ?)"
    return f"(CASE WHEN close_reason IS NOT NULL THEN closed_key WHEN {due} <= ? THEN {due} ELSE NULL END)"


def page_query(dialect: str, q: PageQuery) -> tuple[str, list[Any]]:
    """The SQL of one page of ``card_summary`` rows (``?`` placeholders) and its parameters."""
    where: list[str] = []
    args: list[Any] = []
    if q.tags:
        # Any of the tags, as every command's repeated --tag means.
        marks = ", ".join("?" * len(q.tags))
        if q.walk:
            probe = (
                f"SELECT 1 FROM {KEYS} k WHERE k.kind = 't' AND k.value IN ({marks}) AND k.card_id = {SUMMARY}.card_id"
            )
            where.append(f"EXISTS ({probe})")
        else:
            where.append(f"card_id IN (SELECT card_id FROM {KEYS} WHERE kind = 't' AND value IN ({marks}))")
        args += list(q.tags)
    if q.games:
        marks = ", ".join("?" * len(q.games))
        where.append(f"card_id IN (SELECT card_id FROM {KEYS} WHERE kind IN ('g', 'b') AND value IN ({marks}))")
        args += list(q.games)
    shown_args = [NEVER, q.stale_us, q.max_open_us, q.now_key, NEVER, q.stale_us, q.max_open_us]
    if q.state is not None:
        where.append(f"{shown_closed_expr(dialect)} IS {'NOT ' if q.state == 'closed' else ''}NULL")
        args += shown_args
    if q.since_key is not None:
        where.append("opened_key >= ? AND opened_key < ?")
        args += [q.since_key, NEVER]
    if not q.include_retracted:
        where.append("retracted IS NULL")
    if q.sort == "closed":
        keys = [f"coalesce({shown_closed_expr(dialect)}, {NEVER})"]
        key_args = [*shown_args]
    else:
        keys = list(SORT_COLUMNS[q.sort])
        key_args = []
    order = [*keys, "card_id"]
    if q.after is not None:
        op = "<" if q.descending else ">"
        inner = f"SELECT {', '.join(order)} FROM {SUMMARY} WHERE card_id = ?"
        where.append(f"({', '.join(order)}) {op} ({inner})")
        args += key_args + key_args + [q.after]
    sql = SELECT_ROWS_SQL
    if where:
        sql += " WHERE " + " AND ".join(where)
    direction = " DESC" if q.descending else ""
    sql += " ORDER BY " + ", ".join(k + direction for k in order)
    args += key_args
    if q.limit is not None:
        sql += " LIMIT ?"
        args.append(q.limit)
    return sql, args


READ_BODIES_SQL = "SELECT body FROM events WHERE stream = ? AND version <= ? ORDER BY version"


def probe(keeper: SummaryKeeper, execute: Callable[[str, Any], Any], dialect: str) -> None:
    """Look whether the schema has the tag figures table: once when it has it, at every catch-up while it has not (a
    ledger at an earlier revision, until it is migrated). The summary tables need no look: every fold reads the
    summary's position, and the tracking table came after them."""
    if not keeper.figures:
        keeper.figures = has_table(execute, dialect, FIGURES)


def body_reader(execute: Callable[[str, Any], Any]) -> BodyReader:
    """Reads a stream's first bodies through ``execute`` (the append transaction's connection)."""
    return lambda stream, version: [bytes(r[0]) for r in execute(READ_BODIES_SQL, (stream, version))]


#: A tag with more cards than this is read along the opened-time index (see :func:`tag_points_query`).
MANY_CARDS = 5000


def tag_points_query(tag: str, limit: int, before: str | None = None, *, many: bool = False) -> tuple[str, list[Any]]:
    """(card_id, opened, opened_key, score) of the newest ``limit`` cards with ``tag`` that have an opened time and
    are not retracted, newest first; ``before``: only cards opened before that card (keyset paging). Two plans: a
    tag of few cards is read through the keys table and sorted; a tag of ``many`` walks the opened-time index from
    the newest, keeping the cards with the tag (its cost is the cards opened since its ``limit``-th newest)."""
    args: list[Any] = [tag, NEVER]
    older = ""
    if before is not None:
        older = f" AND (opened_key, card_id) < (SELECT opened_key, card_id FROM {SUMMARY} WHERE card_id = ?)"
        args.append(before)
    if many:
        has_tag = f"EXISTS (SELECT 1 FROM {KEYS} k WHERE k.kind = 't' AND k.value = ? AND k.card_id = s.card_id)"
    else:
        has_tag = f"s.card_id IN (SELECT card_id FROM {KEYS} WHERE kind = 't' AND value = ?)"
    sql = (
        f"SELECT s.card_id, s.opened, s.opened_key, s.score FROM {SUMMARY} s WHERE {has_tag} "
        f"AND s.retracted IS NULL AND s.opened_key < ?{older} ORDER BY s.opened_key DESC, s.card_id DESC LIMIT ?"
    )
    return sql, [*args, limit]


#: (the summary's position, the log's last seq, 1 while the event at the position is the one folded there).
POSITION_SQL = tracking.behind_sql(tracking.SUMMARY)
SET_POSITION_SQL = f"UPDATE {tracking.TABLE} SET seq = ?, hash = ? WHERE name = '{tracking.SUMMARY}'"
#: The streams of the (at most TAIL_CHUNK) events after a position, as they first appear: each one's first and last
#: version and last seq.
TAIL_SQL = (
    "SELECT stream, min(version), max(version), max(seq) FROM (SELECT stream, version, seq FROM events "
    "WHERE seq > ? ORDER BY seq LIMIT ?) AS tail GROUP BY stream ORDER BY min(seq)"
)
LAST_SQL = "SELECT seq, hash FROM events WHERE seq = ?"
#: A stream's events between two versions: read only for those a catch-up folds (not a card handed over).
EVENTS_SQL = "SELECT type, body FROM events WHERE stream = ? AND version BETWEEN ? AND ? ORDER BY version"
#: Events folded per transaction of a catch-up (a long tail, after a copy, is caught up in several).
TAIL_CHUNK = 20_000


def position(row: Sequence[Any], where: str) -> tuple[int, int]:
    """(the summary's position, the log's last seq) from a :data:`POSITION_SQL` row; raises where the event at the
    position is no longer the one the summary folded (a log changed behind the ledger's back)."""
    seq, head, same = row
    if not same:
        raise SummaryUnbound(
            f"the cards summary of the ledger at {where} reflects the log up to event seq {seq}, which the log no "
            "longer holds as it was: the log was changed behind the ledger's back (`ledger verify` says what "
            "differs; `ledger rebuild-summary` rebuilds the summary from the log as it is)"
        )
    return int(seq), int(head)


class SummaryUnbound(StoreError):
    """The summary's position names an event the log no longer holds as it was."""


def fold_tail(
    keeper: SummaryKeeper, fetch: Callable[[str, Any], list[Any]], position: int
) -> tuple[list[Change | None], tuple[int, str] | None, int]:
    """The summary changes of the (at most :data:`TAIL_CHUNK`) events after ``position``, the seq and hash of the
    last one (None: none) and how many there were, read in the caller's transaction."""
    streams = fetch(TAIL_SQL, (position, TAIL_CHUNK))
    if not streams:
        return [], None, 0

    def events(stream: str, first: int, last: int) -> Callable[[], list[tuple[str, bytes]]]:
        return lambda: [(t, bytes(b)) for t, b in fetch(EVENTS_SQL, (stream, first, last))]

    read = body_reader(fetch)
    changes = [keeper.change(s, lo - 1, hi - lo + 1, events(s, lo, hi), read) for s, lo, hi, _ in streams]
    seq, hash_ = fetch(LAST_SQL, (max(r[3] for r in streams),))[0]
    return changes, (int(seq), str(hash_)), sum(hi - lo + 1 for _, lo, hi, _ in streams)


def catch_up(
    store: StoreBase,
    con: Any,
    begin: Callable[[], object],
    commit: Callable[[], object],
    rollback: Callable[[], object],
    writing: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> int:
    """Bring the summary tables to the log's head on ``store``'s connection ``con``, a transaction per
    :data:`TAIL_CHUNK` events; returns how many events were folded. ``begin`` opens the transaction and takes what
    serializes catch-ups; ``writing`` wraps the writes (PostgreSQL: a pipeline, not a round trip per statement)."""
    keeper, fetch, run = keeper_of(store), store._fetcher(con), store._runner(con)
    folded = 0
    while True:
        changes: list[Change | None] = []
        try:
            # Inside the try: ``begin`` may fail once its transaction is open (a schema without the position table,
            # after a downgrade), and a SQLite writer left in it would hold the write lock.
            begin()
            # Once appends are held off: an importer hands its card over as soon as its append commits, so a
            # catch-up that waited for that append mostly finds the card here.
            keeper.take(store._handed)
            probe(keeper, fetch, store.dialect)
            # A statement of its own: on PostgreSQL under READ COMMITTED its snapshot sees what the catch-up that
            # held the position row committed (the locking statement's snapshot is older than the row it waited for).
            at = position(fetch(POSITION_SQL, ())[0], "this ledger")[0]
            changes, last, n = fold_tail(keeper, fetch, at)
            if last is None:
                commit()
                return folded
            figures = figures_change(fetch, changes) if keeper.figures else None
            with writing():
                write_changes(run, changes, figures)
                run(SET_POSITION_SQL, last)
            commit()
        except BaseException:
            with contextlib.suppress(Exception):
                rollback()
            # ``change`` took the cards out of the keeper: the next catch-up replays them from the log.
            raise
        for change in changes:
            keeper.committed(change)
        folded += n
        if n < TAIL_CHUNK:
            # Fewer than a chunk: the head as it was when read (a reader that wants a newer head asks again).
            return folded


def keeper_of(store: StoreBase) -> SummaryKeeper:
    """``store``'s keeper, made on first use (a read that lists nothing never loads this module)."""
    if store._keeper is None:
        store._keeper = SummaryKeeper()
    return store._keeper


def rebuild(store: StoreBase) -> int:
    """Rewrite the summary tables from the log in one write transaction that holds off appends; how many cards."""

    def work(con: Any) -> int:
        store._hold_appends(con)
        run = store._runner(con)
        n = write_streamed(store._fetcher(con), run, store.dialect)
        run(tracking.AT_HEAD_SQL, (tracking.SUMMARY,))
        return n

    return int(store._write_transaction(work, "cannot rebuild the cards summary of the ledger"))


def at_head(store: StoreBase) -> SummaryOverlay | None:
    """None once the summary tables reflect the log's head (caught up first when behind); for a read-only store
    that is behind, the :class:`Overlay` to read them from (built again when the head moved)."""
    try:
        row = store.rows(POSITION_SQL) or [(0, 0, 1)]
    except StoreError as e:
        if "tracking" in str(e):  # an earlier revision, open read-only: it is read as it is
            return None
        raise
    at, head = position(row[0], store.describe())
    if at >= head:
        return None
    if not store.readonly:
        store.catch_up_summary()
        return None
    if store._overlay is None or store._overlay.head != head:
        # One snapshot for the stored tables and the tail (a writer's catch-up may commit meanwhile).
        keeper, where = keeper_of(store), store.describe()
        store._overlay = store._snapshot(lambda con: build_overlay(store._fetcher(con), keeper, store.dialect, where))
    return store._overlay


class Overlay:
    """The summary tables as of the log's head for a store that must not write: an in-memory SQLite copy of the
    stored tables with the tail's changes applied, reused while the log's head stays where it was."""

    def __init__(
        self,
        head: int,
        rows: Sequence[Sequence[Any]],
        keys: Sequence[Sequence[Any]],
        figures: Sequence[Sequence[Any]] | None = None,
    ) -> None:
        self.head = head
        #: Whether the stored schema has the tag figures (then the copy keeps them as a catch-up would).
        self.figures = figures is not None
        self.con = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.lock = threading.Lock()
        cols = ", ".join(f"{c}{' PRIMARY KEY' if c == 'card_id' else ''}" for c in COLUMNS)
        self.con.execute(f"CREATE TABLE {SUMMARY} ({cols})")
        self.con.execute(f"CREATE TABLE {KEYS} (kind, value, card_id, PRIMARY KEY (kind, value, card_id))")
        self.con.executemany(f"INSERT INTO {SUMMARY} VALUES ({', '.join('?' * len(COLUMNS))})", rows)
        self.con.executemany(f"INSERT INTO {KEYS} VALUES (?, ?, ?)", [(k, v, c) for c, k, v in keys])
        key = ", ".join(KEY_COLUMNS)
        self.con.execute(f"CREATE TABLE {FIGURES} ({key}, n, PRIMARY KEY ({key}))")
        if figures:
            self.con.executemany(f"INSERT INTO {FIGURES} VALUES ({', '.join('?' * (len(KEY_COLUMNS) + 1))})", figures)

    def apply(self, changes: Sequence[Change | None]) -> None:
        """Apply the tail's changes as a catch-up writes them."""
        moved = None
        if self.figures:
            moved = figures_change(lambda sql, args: self.con.execute(sql, args).fetchall(), changes)
        write_changes(self.con.executemany, changes, moved)

    def query(self, sql: str, args: Sequence[Any]) -> list[Any]:
        """Rows of one ``?`` read statement written for either backend (PostgreSQL's LEAST is SQLite's min)."""
        with self.lock:
            try:
                return self.con.execute(sql.replace("LEAST(", "min("), tuple(args)).fetchall()
            except sqlite3.Error as e:
                raise StoreError(f"cannot read the cards summary folded in memory: {e}") from e


def build_overlay(
    fetch: Callable[[str, Any], list[Any]], keeper: SummaryKeeper, dialect: str, where: str
) -> Overlay | None:
    """An :class:`Overlay` at the log's head from the stored tables and the events after their position, read
    through ``fetch`` in one read transaction; None when the tables are at the head."""
    at, head = position(fetch(POSITION_SQL, ())[0], where)
    if at >= head:
        return None
    probe(keeper, fetch, dialect)
    figures = fetch(SELECT_ALL_SQL, ()) if keeper.figures else None
    overlay = Overlay(head, fetch(SELECT_ROWS_SQL, ()), fetch(SELECT_KEYS_SQL, ()), figures)
    while at < head:
        # ``change`` takes each card out of the keeper and nothing puts it back (nothing is committed): a card is
        # replayed from the log for each overlay, never continued from a fold that was not written.
        changes, last, _ = fold_tail(keeper, fetch, at)
        if last is None:
            break
        overlay.apply(changes)
        at = last[0]
    return overlay


#: Events read per query.
BATCH = 5_000
#: Cards compared (or written) per round trip.
CARDS_CHUNK = 500

#: Runs a read statement (``?`` placeholders) and returns its rows.
Read = Callable[[str, Sequence[Any]], list[Any]]

Built = tuple[SummaryRow, frozenset[tuple[str, str]]]
#: A card as the tables hold it: its row (None: only keys) and keys.
Stored = tuple[SummaryRow | None, frozenset[tuple[str, str]]]

FIRST_SQL = f"SELECT stream, type, version, body FROM events WHERE stream >= ? ORDER BY stream, version LIMIT {BATCH}"
# A row-value comparison: both backends walk the (stream, version) index from there.
NEXT_SQL = (
    "SELECT stream, type, version, body FROM events WHERE (stream, version) > (?, ?) "
    f"ORDER BY stream, version LIMIT {BATCH}"
)
SET_SQL = "SELECT body FROM events WHERE stream = ? AND version = 1"


def _as_bytes(body: Any) -> bytes:
    # A tampered column can hold any type: a body that is not bytes does not decode (the card gets no row, and
    # verify names the event), it never stops the rebuild.
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    return body.encode() if isinstance(body, str) else b""


def _card_events(read: Read) -> Iterator[tuple[str, list[tuple[int, bytes]]]]:
    """(card id, [(version, body), ...]) for every card stream, in the order of the events' index."""
    rows = read(FIRST_SQL, (CARD_STREAM,))
    current: str | None = None
    held: list[tuple[int, bytes]] = []
    while rows:
        for stream, _type, version, body in rows:
            if not isinstance(stream, str) or not stream.startswith(CARD_STREAM):
                continue
            if stream != current:
                if current is not None:
                    yield current[len(CARD_STREAM) :], held
                current, held = stream, []
            held.append((version, _as_bytes(body)))
        last = rows[-1]
        if len(rows) < BATCH:
            break
        rows = read(NEXT_SQL, (last[0], last[2]))
    if current is not None:
        yield current[len(CARD_STREAM) :], held


def rebuilt(read: Read) -> Iterator[tuple[str, Built | None]]:
    """Every card's summary row and keys as the log has them, one card at a time (None: an event of the card does
    not decode, so it has no row)."""
    sets: dict[str, dict[str, BaselineEntry]] = {}

    def first_bodies(stream: str) -> list[bytes]:
        return [_as_bytes(r[0]) for r in read(SET_SQL, (stream,))]

    for card_id, events in _card_events(read):
        try:
            state = replay(card_id, (b for _, b in events))
        except (StoreError, ValueError):
            yield card_id, None
            continue
        version = events[-1][0]
        yield (
            card_id,
            (
                row_of(state, version, card_score(state, baseline_set(sets, state.baselines_id, first_bodies))),
                keys_of(state),
            ),
        )


def _difference(cid: str, want: Built | None, got: Stored | None) -> str | None:
    if want is None and (got is None or (got[0] is None and not got[1])):
        return None
    if want is not None and got is not None and want == got:
        return None
    if got is None or got[0] is None:
        return f"card {cid}: no summary row" if want is not None else f"card {cid}: summary keys of a card with no row"
    if want is None:
        return f"card {cid}: a summary row for a card the log does not hold"
    if want[0] != got[0]:
        fields = [f for f in SummaryRow.__struct_fields__ if getattr(want[0], f) != getattr(got[0], f)]
        shown = ", ".join(f"{f} {getattr(got[0], f)!r} (log: {getattr(want[0], f)!r})" for f in fields)
        return f"card {cid}: summary row differs: {shown}"
    return f"card {cid}: summary keys differ: {sorted(got[1])} (log: {sorted(want[1])})"


#: The cards with a summary row or keys, a page at a time (after a card id): the summary's side of the orphans check.
SUMMARY_IDS_SQL = (
    f"SELECT card_id FROM {SUMMARY} WHERE card_id > ? UNION SELECT card_id FROM {KEYS} WHERE card_id > ? "
    "ORDER BY 1 LIMIT ?"
)


def _orphans(read: Read) -> Iterator[str]:
    # Two reads, not one join: the summary may be answered from memory (a store that cannot write folds the log's
    # tail into an in-memory copy of the summary tables), where the events table is not.
    after = ""
    while True:
        ids = [r[0] for r in read(SUMMARY_IDS_SQL, (after, after, CARDS_CHUNK))]
        if not ids:
            return
        streams = [CARD_STREAM + c for c in ids]
        marks = ", ".join("?" * len(streams))
        held = {r[0] for r in read(f"SELECT DISTINCT stream FROM events WHERE stream IN ({marks})", streams)}
        yield from (c for c in ids if CARD_STREAM + c not in held)
        after = ids[-1]


def check(store: LogStore, *, limit: int = 10, skip: frozenset[str] = frozenset()) -> tuple[int, list[str]]:
    """(cards the log holds, how the summary tables, caught up to the log's head, differ from a rebuild: one line
    per card, the first ``limit`` then a count), :data:`CARDS_CHUNK` cards per query; cards in ``skip`` are left out
    (their rows as stored count in the tag figures). The tag figures, where the schema has them, are compared with
    the counts of the rebuilt rows (held per figure value, not per card)."""
    figures = store.has_table(FIGURES)
    read = functools.partial(query, store)
    out: list[str] = []
    extra = 0
    cards = 0
    want_figures: Counter[Key] = Counter()

    def note(difference: str | None) -> None:
        nonlocal extra
        if difference is not None and len(out) < limit:
            out.append(difference)
        elif difference is not None:
            extra += 1

    def compared() -> Iterator[tuple[str, Built | None]]:
        nonlocal cards
        for cid, want in rebuilt(read):
            if want is not None:
                cards += 1
            if cid in skip:
                continue
            if figures and want is not None:
                r = want[0]
                want_figures.update(counts_of(r.tags, r.score, r.game_stats, r.retracted))
            yield cid, want

    for chunk in batched(compared(), CARDS_CHUNK):
        ids = [c for c, _ in chunk]
        where = f" WHERE card_id IN ({', '.join('?' * len(ids))})"
        have = _stored_of(read(SELECT_KEYS_SQL + where, ids), read(SELECT_ROWS_SQL + where, ids))
        for cid, want in chunk:
            note(_difference(cid, want, have.get(cid)))
    for cid in _orphans(read):
        if cid not in skip:
            note(f"card {cid}: a summary row for a card the log does not hold")
    if extra:
        out.append(f"+{extra} more cards")
    if figures:
        for tags, score, stats, retracted in old_rows(read, sorted(skip)).values():
            want_figures.update(counts_of(tags, score, stats, retracted))
        out += figure_differences(read(SELECT_ALL_SQL, ()), want_figures, limit=limit)
    return cards, out


def write_streamed(
    read: Read, execute: Callable[[str, Any], Any], dialect: str, columns: Sequence[str] = COLUMNS
) -> int:
    """Replace the summary tables (and the tag figures, where the schema has them) with a rebuild from the log in
    the caller's transaction, :data:`CARDS_CHUNK` cards per statement, writing ``columns`` (those the table has at a
    migration's revision); returns the number of cards."""
    upsert = upsert_sql(columns)
    pick = None if tuple(columns) == COLUMNS else [COLUMNS.index(c) for c in columns]
    figures = has_table(read, dialect, FIGURES)
    execute(f"DELETE FROM {KEYS}", ())
    execute(f"DELETE FROM {SUMMARY}", ())
    n = 0
    counts: Counter[Key] = Counter()
    for chunk in batched((built for _, built in rebuilt(read) if built is not None), CARDS_CHUNK):
        n += len(chunk)
        if figures:
            for r, _ in chunk:
                counts.update(counts_of(r.tags, r.score, r.game_stats, r.retracted))
        params = [msgspec.structs.astuple(row) for row, _ in chunk]
        execute(upsert, params if pick is None else [tuple(p[j] for j in pick) for p in params])
        keys = [(k, v, row.card_id) for row, ks in chunk for k, v in sorted(ks)]
        if keys:
            execute(INSERT_KEY_SQL, keys)
    if figures:
        replace_all(execute, counts)
    return n


def fill(conn: Any, columns: Sequence[str] = COLUMNS) -> int:
    """Build the summary tables from the log on SQLAlchemy connection ``conn`` (the migration's transaction),
    writing ``columns`` (those the table has at the migration's revision)."""
    read, execute = _migrating(conn)
    return write_streamed(read, execute, conn.dialect.name, columns)


def _migrating(conn: Any) -> tuple[Read, Callable[[str, Any], object]]:
    """(read, execute) of ``?`` statements on a migration's SQLAlchemy connection ``conn``, once it holds the position
    row every catch-up locks first: else a follower thread could hold it and wait for rows the migration rewrites,
    while the migration waits for it (a deadlock). SQLite needs none: a migration there holds the whole database
    (IMMEDIATE)."""
    dialect = conn.dialect.name
    fix = pg_sql if dialect == "postgresql" else str

    def read(sql: str, args: Any) -> list[Any]:
        return list(conn.exec_driver_sql(fix(sql), tuple(args)).fetchall())

    if dialect == "postgresql" and has_table(read, dialect, tracking.TABLE):
        read(POSITION_SQL + " FOR UPDATE", ())
    return read, lambda sql, params: conn.exec_driver_sql(fix(sql), params)


def fill_figures(conn: Any) -> int:
    """Fill the tag figures table from the summary rows as they stand, on SQLAlchemy connection ``conn`` (the
    migration's transaction): a page of rows at a time, the counts held per figure value; returns the rows
    written. The rows may lag the log: the catch-up that brings them to the head moves the figures with them."""
    read, execute = _migrating(conn)
    counts: Counter[Key] = Counter()
    after = ""
    while True:
        page = read(
            f"SELECT card_id, tags, score, game_stats, retracted FROM {SUMMARY} WHERE card_id > ? "
            "ORDER BY card_id LIMIT 5000",
            (after,),
        )
        if not page:
            break
        for _, tags, score, stats, retracted in page:
            counts.update(counts_of(tags, score, stats, retracted))
        after = page[-1][0]
    return replace_all(execute, counts)


def query(store: LogStore, sql: str, args: Iterable[Any] = ()) -> list[Any]:
    """Rows of one ``?`` read statement on ``store``; one on the summary tables is answered as of the log's head
    (caught up first, or on a read-only store from the :class:`Overlay`)."""
    try:
        if SUMMARY in sql or FIGURES in sql:
            overlay = store.summary_at_head()
            if overlay is not None:
                return overlay.query(sql, tuple(args))
        return store.rows(sql, tuple(args))
    except StoreError as e:
        no_figures = FIGURES in str(e) and not store.has_table(FIGURES)
        if no_figures and store.has_table(SUMMARY):
            raise StoreError(_no_table(store, "tag figures")) from e
        if SUMMARY not in str(e) or store.has_table(SUMMARY):
            raise
        raise StoreError(_no_table(store, "cards summary")) from e


def _no_table(store: LogStore, what: str) -> str:
    where, revision = store.describe(), store.revision()
    if revision != store.head_revision():  # a ledger from before the table: migrating builds it from the log
        return (
            f"the ledger at {where} has no {what} yet (schema {revision}): "
            "run `ledger init` once to build it from the log"
        )
    return (
        f"the ledger at {where} has no {what} table, though its schema ({revision}) has one: it was dropped; the "
        "log is intact (`ledger verify`), and `ledger copy --to NEW` copies it into a new ledger with every table"
    )


def read_page(store: LogStore, q: PageQuery) -> list[SummaryRow]:
    """One page of summary rows (see :class:`PageQuery`): one query."""
    if q.tags and q.limit is not None and q.sort in INDEXED_SORTS and store.dialect == "sqlite":
        # SQLite reads every card of an IN (...) list and sorts them; a tag of many cards is better walked along
        # the sort's index, each card probed in the keys table, stopping at the page's end.
        tagged = sum(tag_count(store, t) for t in q.tags)
        if tagged > MANY_CARDS:
            q = msgspec.structs.replace(q, walk=True)
    sql, args = page_query(store.dialect, q)
    return [SummaryRow(*r) for r in query(store, sql, args)]


#: Sorts an index serves in order (see ``migrations/versions/0003_summary.py``).
INDEXED_SORTS = frozenset({"opened", "score", "id"})


def count_page(store: LogStore, q: PageQuery) -> int:
    """How many cards match the filters of ``q`` (its sort, ``after`` and ``limit`` ignored): what a page is out of."""
    sql, args = page_query(store.dialect, msgspec.structs.replace(q, after=None, limit=None, sort="id"))
    where = sql.split(" ORDER BY ")[0].split(f" FROM {SUMMARY}", 1)[1]
    return int(query(store, f"SELECT count(*) FROM {SUMMARY}{where}", args)[0][0])


def _stored_of(key_rows: Iterable[Sequence[Any]], rows: Iterable[Sequence[Any]]) -> dict[str, Stored]:
    """Each card's row (None: only keys) and keys, from rows of :data:`SELECT_KEYS_SQL` and :data:`SELECT_ROWS_SQL`."""
    keys: dict[str, set[tuple[str, str]]] = {}
    for cid, kind, value in key_rows:
        keys.setdefault(cid, set()).add((kind, value))
    out: dict[str, Stored] = {r[0]: (SummaryRow(*r), frozenset(keys.pop(r[0], ()))) for r in rows}
    out.update({cid: (None, frozenset(ks)) for cid, ks in keys.items()})
    return out


def tagged_card_ids(store: LogStore, tags: Sequence[str], *, include_retracted: bool = False) -> list[str]:
    """The ids of the cards with any of ``tags`` (their own or given at capture), in the order they were opened:
    one query on the summary."""
    if not tags:
        return []
    sql = (
        f"SELECT card_id FROM {SUMMARY} WHERE card_id IN (SELECT card_id FROM {KEYS} WHERE kind = 't' "
        f"AND value IN ({', '.join('?' * len(tags))})){'' if include_retracted else ' AND retracted IS NULL'} "
        "ORDER BY opened_key, card_id"
    )
    return [r[0] for r in query(store, sql, tags)]


def play_owners(store: LogStore, guids: Sequence[str], chunk: int = 500) -> dict[str, str]:
    """guid -> the card holding a play of it, for those of ``guids`` a card holds (retracted cards too): the keys
    table's primary key probed per guid. Where several cards hold one guid, the card opened first (its
    ``opened_key``, then its id) is named, for every reader alike."""
    sql = (
        f"SELECT k.value, k.card_id FROM {KEYS} k JOIN {SUMMARY} s ON s.card_id = k.card_id "
        "WHERE k.kind = 'p' AND k.value IN ({}) ORDER BY k.value, s.opened_key, k.card_id"
    )
    out: dict[str, str] = {}
    for guid, card_id in in_chunks(functools.partial(query, store), sql, sorted(set(guids)), chunk=chunk):
        out.setdefault(guid, card_id)
    return out


def tag_board(store: LogStore, *, include_retracted: bool = False) -> list[tuple[str, int, float, float, str]]:
    """(tag, cards, mean score, best score, best card) for every tag (``all_tags``): one query on the summary."""
    live = "" if include_retracted else " AND s.retracted IS NULL"
    sql = (
        "SELECT tag, count(*), avg(score), max(score), "
        "max(CASE WHEN rank = 1 THEN card_id END) FROM ("
        "SELECT k.value AS tag, s.card_id AS card_id, s.score AS score, ROW_NUMBER() OVER "
        "(PARTITION BY k.value ORDER BY s.score DESC, s.opened_key, s.card_id) AS rank "
        f"FROM {KEYS} k JOIN {SUMMARY} s ON s.card_id = k.card_id WHERE k.kind = 't'{live}) ranked GROUP BY tag"
    )
    return [(r[0], int(r[1]), float(r[2]), float(r[3]), r[4]) for r in query(store, sql)]


def retracted_count(store: LogStore) -> int:
    """How many cards are retracted (what a list that leaves them out says it left out): one query."""
    return int(query(store, "SELECT count(*) FROM card_summary WHERE retracted IS NOT NULL")[0][0])


def distinct_keys(store: LogStore, kind: str) -> list[str]:
    """Every tag (``"t"``) or game id (``"g"``) of the ledger's cards, sorted: a loose scan of the keys table's
    primary key, one index seek per distinct value (``SELECT DISTINCT`` would step through every card)."""
    sql = (
        f"WITH RECURSIVE v(x) AS (SELECT (SELECT min(value) FROM {KEYS} WHERE kind = ?) UNION ALL "
        f"SELECT (SELECT min(value) FROM {KEYS} WHERE kind = ? AND value > v.x) FROM v WHERE v.x IS NOT NULL) "
        "SELECT x FROM v WHERE x IS NOT NULL ORDER BY x"
    )
    return [r[0] for r in query(store, sql, [kind, kind])]


def tag_points(store: LogStore, tag: str, limit: int, before: str | None = None) -> list[tuple[str, str, int, float]]:
    """:func:`tag_points_query`'s rows: two queries (how many cards the tag has, which chooses the plan; the page)."""
    many = tag_count(store, tag) > MANY_CARDS
    sql, args = tag_points_query(tag, limit, before, many=many)
    return [(r[0], r[1], int(r[2]), float(r[3])) for r in query(store, sql, args)]


def tag_count(store: LogStore, tag: str) -> int:
    """How many cards have ``tag`` (retracted ones too): a range of the keys table's primary key."""
    return int(query(store, f"SELECT count(*) FROM {KEYS} WHERE kind = 't' AND value = ?", [tag])[0][0])


def recent_tags(store: LogStore, cards: int) -> list[str]:
    """The tags of the ``cards`` newest cards that are not retracted, the most recently used first: one query."""
    sql = (
        f"SELECT tags FROM {SUMMARY} WHERE retracted IS NULL AND tags IS NOT NULL "
        "ORDER BY opened_key DESC, card_id DESC LIMIT ?"
    )
    seen: dict[str, None] = {}
    for (tags,) in query(store, sql, [cards]):
        seen.update(dict.fromkeys(msgspec.json.decode(tags)))
    return list(seen)


def stream_bodies(store: LogStore, streams: Sequence[str], chunk: int = 500) -> dict[str, list[bytes]]:
    """The bodies of many streams in version order, a query per ``chunk`` streams (not one per stream)."""
    out: dict[str, list[bytes]] = {s: [] for s in streams}
    sql = "SELECT stream, body FROM events WHERE stream IN ({}) ORDER BY stream, version"
    for stream, body in in_chunks(store.rows, sql, streams, chunk=chunk):
        out[stream].append(bytes(body))
    return out


def calculator_keys(store: LogStore, card_ids: Sequence[str] | None = None, chunk: int = 500) -> dict[str, str]:
    """card id -> the arc-agi release it records (the keys table's ``c`` key) for ``card_ids``, or for every card;
    a card that records none is absent. A query per ``chunk`` cards, or one in all."""
    sql = f"SELECT card_id, value FROM {KEYS} WHERE kind = 'c'"
    if card_ids is None:
        return {r[0]: r[1] for r in query(store, sql)}
    read = functools.partial(query, store)
    return {r[0]: r[1] for r in in_chunks(read, sql + " AND card_id IN ({})", card_ids, chunk=chunk)}


def ranked_cards(store: LogStore) -> list[tuple[str, list[str], float]]:
    """(card id, tags, score) of every card that is not retracted, in the order the leaderboard breaks ties (when
    opened, then id): what a leaderboard re-scored in Python ranks."""
    sql = f"SELECT card_id, tags, score FROM {SUMMARY} WHERE retracted IS NULL ORDER BY opened_key, card_id"
    return [(r[0], msgspec.json.decode(r[1]) if r[1] else [], float(r[2])) for r in query(store, sql)]


def tag_figure_rows(
    store: LogStore, tag: str, *, include_retracted: bool = False
) -> list[tuple[str, str, int, float, str, int]]:
    """(metric, game id, level, value, label, cards) of every figure value of ``tag`` (see
    :mod:`ledger.store.tag_figures`), in that order: one range of the table's primary key."""
    live = "" if include_retracted else " AND retracted = 0"
    sql = (
        f"SELECT metric, game_id, level, value, label, sum(n) FROM {FIGURES} WHERE tag = ?{live} "
        "GROUP BY metric, game_id, level, value, label ORDER BY metric, game_id, level, value, label"
    )
    return [(r[0], r[1], int(r[2]), float(r[3]), r[4], int(r[5])) for r in query(store, sql, [tag])]


def best_card(store: LogStore, tag: str, score: float, *, include_retracted: bool = False) -> str | None:
    """The first card opened (then the smallest id) of those with ``tag`` and ``score``: a walk of the score index
    over the cards with that score, stopping at the first with the tag."""
    live = "" if include_retracted else " AND s.retracted IS NULL"
    sql = (
        f"SELECT s.card_id FROM {SUMMARY} s WHERE s.score = ?{live} AND EXISTS (SELECT 1 FROM {KEYS} k "
        "WHERE k.kind = 't' AND k.value = ? AND k.card_id = s.card_id) "
        "ORDER BY s.score, s.opened_key, s.card_id LIMIT 1"
    )
    rows = query(store, sql, [score, tag])
    return rows[0][0] if rows else None


def card_count(store: LogStore, *, include_retracted: bool = False) -> int:
    """How many cards the summary holds (retracted ones left out unless included): one query."""
    live = "" if include_retracted else " WHERE retracted IS NULL"
    return int(query(store, f"SELECT count(*) FROM {SUMMARY}{live}")[0][0])


HEADS_SQL = (
    "SELECT e.stream, e.version, e.hash FROM events e JOIN (SELECT stream, max(version) AS v FROM events "
    "GROUP BY stream) m ON e.stream = m.stream AND e.version = m.v"
)


def stream_heads(store: LogStore) -> dict[str, tuple[int, str]]:
    """Every stream's head: version and hash (the max version per stream is read from the (stream, version) index
    alone, then one probe per stream for its hash): what ``copy`` compares first to skip a copy with nothing to do."""
    return {r[0]: (int(r[1]), r[2]) for r in query(store, HEADS_SQL)}
