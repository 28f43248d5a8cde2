"""The summary tables as a whole: read a page of them, fill them from the log, prove they equal a rebuild.

Works on both backends with the same ``?`` statements (:mod:`ledger.store.summary_sql`); a SQLite store is read
through its own ``sqlite3`` connections, a PostgreSQL store through its psycopg ones (no SQLAlchemy import for a
read command); :func:`fill` runs on a migration's SQLAlchemy connection.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from typing import Any

import msgspec

from ledger.errors import StoreError
from ledger.store import tracking
from ledger.store.base import LogStore, has_table
from ledger.store.figures import FIGURES, has_figures
from ledger.store.summary import COLUMNS, KEYS, SUMMARY, SummaryRow
from ledger.store.summary_sql import (
    MANY_CARDS,
    SELECT_KEYS_SQL,
    SELECT_ROWS_SQL,
    UPSERT_SQL,
    PageQuery,
    any_tag_query,
    count_query,
    distinct_keys_query,
    leaderboard_query,
    page_query,
    pg,
    recent_tags_query,
    tag_count_query,
    tag_points_query,
    upsert_sql,
)
from ledger.store.summary_tail import POSITION_SQL, has_position

Built = Mapping[str, tuple[SummaryRow, frozenset[tuple[str, str]]]]
EVENTS_SQL = "SELECT stream, type, version, body FROM events ORDER BY seq"


def _log(rows: Iterable[Any]) -> Iterator[tuple[str, str, int, bytes]]:
    return ((r[0], r[1], r[2], bytes(r[3])) for r in rows)


def fill(conn: Any, columns: Sequence[str] = COLUMNS) -> int:
    """Build the summary tables from the log on SQLAlchemy connection ``conn`` (the migration's transaction),
    writing ``columns`` (those the table has at the migration's revision)."""
    from ledger.store.summary_stream import write_streamed

    fix = pg if conn.dialect.name == "postgresql" else str
    upsert, pick = _upsert_of(columns)

    def read(sql: str, args: Any) -> list[Any]:
        return list(conn.exec_driver_sql(fix(sql), tuple(args)).fetchall())

    _hold_position(read, conn.dialect.name)

    # One card at a time, a batch of events per query: the log is never held whole, nor every card.
    return write_streamed(
        read,
        lambda sql, params: conn.exec_driver_sql(fix(sql), params),
        upsert,
        pick,
        figures=has_figures(read, conn.dialect.name),
    )


def _hold_position(read: Callable[[str, Any], list[Any]], dialect: str) -> None:
    """Take the lock every catch-up of the summary takes first (its position row) before a migration rewrites the
    summary: a store's follower thread catching up meanwhile then waits or steps aside, where it would otherwise hold
    the position and wait for rows the migration holds while the migration waits for the position (a deadlock).
    SQLite needs none: a migration there holds the whole database (IMMEDIATE)."""
    if dialect == "postgresql" and has_position(read, dialect):
        read(POSITION_SQL + " FOR UPDATE", ())


def fill_figures(conn: Any) -> int:
    """Fill the tag figures table from the summary rows as they stand, on SQLAlchemy connection ``conn`` (the
    migration's transaction): a page of rows at a time, the counts held per figure value; returns the rows
    written. The rows may lag the log: the catch-up that brings them to the head moves the figures with them."""
    from collections import Counter

    from ledger.store.figures import Key, counts_of, replace_all

    fix = pg if conn.dialect.name == "postgresql" else str
    _hold_position(lambda sql, args: list(conn.exec_driver_sql(fix(sql), tuple(args)).fetchall()), conn.dialect.name)
    counts: Counter[Key] = Counter()
    after = ""
    while True:
        page = conn.exec_driver_sql(
            fix(
                f"SELECT card_id, tags, score, game_stats, retracted FROM {SUMMARY} WHERE card_id > ? "
                "ORDER BY card_id LIMIT 5000"
            ),
            (after,),
        ).fetchall()
        if not page:
            break
        for _, tags, score, stats, retracted in page:
            counts.update(counts_of(tags, score, stats, retracted))
        after = page[-1][0]
    return replace_all(lambda sql, params: conn.exec_driver_sql(fix(sql), params), counts)


def _upsert_of(columns: Sequence[str]) -> tuple[str, list[int] | None]:
    if tuple(columns) == COLUMNS:
        return UPSERT_SQL, None
    return upsert_sql(columns), [COLUMNS.index(c) for c in columns]


def query(store: LogStore, sql: str, args: Iterable[Any] = ()) -> list[Any]:
    """Rows of one read statement (``?`` placeholders) on ``store``, on a single connection. A statement on the
    summary tables is answered as of the log's head: the summary is caught up first (or, on a read-only store,
    answered from the tail folded in memory: :class:`~ledger.store.summary_tail.Overlay`)."""
    try:
        if SUMMARY in sql or FIGURES in sql:
            overlay = store.summary_at_head()
            if overlay is not None:
                return overlay.query(sql, tuple(args))
        return _query(store, sql, args)
    except StoreError as e:
        no_figures = FIGURES in str(e) and not has_figures(lambda q, a: _query(store, q, a), store.dialect)
        if no_figures and has_summary(store):
            raise StoreError(
                f"the ledger at {store.describe()} has no tag figures yet (schema {store.revision()}): "
                "run `ledger init` once to build them from the log"
            ) from e
        if SUMMARY not in str(e) or has_summary(store):
            raise
        raise StoreError(
            f"the ledger at {store.describe()} has no cards summary yet (schema {store.revision()}): "
            "run `ledger init` once to build it from the log"
        ) from e


def _query(store: LogStore, sql: str, args: Iterable[Any] = ()) -> list[Any]:
    # Each store's own reader connections (sqlite3, psycopg): no SQLAlchemy for a read.
    return list(store._read(sql if store.dialect == "sqlite" else pg(sql), tuple(args)))  # type: ignore[attr-defined]


def read_page(store: LogStore, q: PageQuery) -> list[SummaryRow]:
    """One page of summary rows (see :class:`~ledger.store.summary_sql.PageQuery`): one query."""
    if q.tags and q.limit is not None and q.sort in INDEXED_SORTS and store.dialect == "sqlite":
        # SQLite reads every card of an IN (...) list and sorts them; a tag of many cards is better walked along
        # the sort's index, each card probed in the keys table, stopping at the page's end.
        tagged = sum(int(query(store, *tag_count_query(t))[0][0]) for t in q.tags)
        if tagged > MANY_CARDS:
            q = dataclasses.replace(q, walk=True)
    sql, args = page_query(store.dialect, q)
    return [SummaryRow(*r) for r in query(store, sql, args)]


#: Sorts an index serves in order (see ``migrations/versions/0003_summary.py``).
INDEXED_SORTS = frozenset({"opened", "score", "id"})


def count_page(store: LogStore, q: PageQuery) -> int:
    """How many cards match the filters of ``q`` (not only its page): one query."""
    sql, args = count_query(store.dialect, q)
    return int(query(store, sql, args)[0][0])


Stored = dict[str, tuple[SummaryRow | None, frozenset[tuple[str, str]]]]


def _stored(read: Callable[[str], list[Any]]) -> Stored:
    keys: dict[str, set[tuple[str, str]]] = {}
    for cid, kind, value in read(SELECT_KEYS_SQL):
        keys.setdefault(cid, set()).add((kind, value))
    out: Stored = {r[0]: (SummaryRow(*r), frozenset(keys.pop(r[0], ()))) for r in read(SELECT_ROWS_SQL)}
    out.update({cid: (None, frozenset(ks)) for cid, ks in keys.items()})
    return out


def stored(store: LogStore) -> Stored:
    """The summary tables as stored: each card's row (None: only keys) and keys."""
    return stored_at(store)[0]


def stored_at(store: LogStore) -> tuple[Stored, int | None]:
    """The summary tables caught up to the log's head, and the seq of the last event they reflect (None: a schema
    without the position), read consistently: a catch-up by another process between the reads is read again."""
    for _ in range(100):
        overlay = store.summary_at_head()
        if overlay is not None:
            return _stored(functools.partial(overlay.query, args=())), overlay.head
        before = _position(store)
        have = _stored(functools.partial(query if before is None else _query, store))
        if _position(store) == before:
            return have, before
    raise StoreError(f"the cards summary of the ledger at {store.describe()} kept moving while it was read")


def _position(store: LogStore) -> int | None:
    try:
        return int(_query(store, POSITION_SQL)[0][0])
    except StoreError:
        if has_position(lambda sql, args: _query(store, sql, args), store.dialect):
            raise
        return None


def differences(store: LogStore, *, limit: int = 10) -> list[str]:
    """How the summary tables differ from a rebuild from the log, one line each (empty: they are equal).

    The rule checked: every card has a row that reflects its stream up to the summary's position and equals the
    row a replay of the log up to there computes, with the same tags and games in the keys table (reading the
    tables caught them up to the log's head first).
    """
    return check(store, limit=limit)[1]


def check(store: LogStore, *, limit: int = 10, skip: frozenset[str] = frozenset()) -> tuple[int, list[str]]:
    """(cards the log holds, :func:`differences`), one card at a time in bounded memory (see
    :mod:`ledger.store.summary_stream`); cards in ``skip`` are left out."""
    from ledger.store.summary_stream import check_streamed

    figures = has_figures(lambda sql, args: _query(store, sql, args), store.dialect)
    return check_streamed(lambda sql, args: query(store, sql, args), limit=limit, skip=skip, figures=figures)


def has_summary(store: LogStore) -> bool:
    """True when the schema has the summary tables (a ledger at an earlier revision has not)."""
    return has_table(lambda sql, args: _query(store, sql, args), store.dialect, SUMMARY)


def compare(
    store: LogStore,
    built: Built,
    *,
    limit: int = 10,
    skip: Set[str] = frozenset(),
    have: Mapping[str, tuple[SummaryRow | None, frozenset[tuple[str, str]]]] | None = None,
) -> list[str]:
    """How the stored summary (``have``, else read now) differs from ``built`` (a rebuild from the log), one line
    each (cards in ``skip`` left out)."""
    if have is None:
        have = stored(store)
    out = []
    for cid in sorted((built.keys() | have.keys()) - skip):
        want, got = built.get(cid), have.get(cid)
        if want == got:
            continue
        if got is None or got[0] is None:
            out.append(f"card {cid}: no summary row")
        elif want is None:
            out.append(f"card {cid}: a summary row for a card the log does not hold")
        elif want[0] != got[0]:
            fields = [f for f in SummaryRow.__struct_fields__ if getattr(want[0], f) != getattr(got[0], f)]
            shown = ", ".join(f"{f} {getattr(got[0], f)!r} (log: {getattr(want[0], f)!r})" for f in fields)
            out.append(f"card {cid}: summary row differs: {shown}")
        else:
            out.append(f"card {cid}: summary keys differ: {sorted(got[1])} (log: {sorted(want[1])})")
    if len(out) > limit:
        out = [*out[:limit], f"+{len(out) - limit} more cards"]
    return out


def rebuild_summary(store: LogStore) -> int:
    """Rewrite the summary tables from the log, in one transaction that holds the append lock; returns the
    number of cards."""
    if store.dialect == "sqlite":
        with store._writer.connection() as con:  # type: ignore[attr-defined]
            from ledger.store.summary_stream import write_streamed

            con.execute("BEGIN IMMEDIATE")
            try:
                n = write_streamed(
                    lambda sql, args: con.execute(sql, tuple(args)).fetchall(),
                    lambda sql, p: (con.executemany if isinstance(p, list) else con.execute)(sql, p),
                    UPSERT_SQL,
                    None,
                    figures=has_figures(con.execute, "sqlite"),
                )
                con.execute(tracking.AT_HEAD_SQL, (tracking.SUMMARY,))
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
        return n
    from ledger.store.postgres import pg_rebuild

    return pg_rebuild(store)


def tagged_card_ids(store: LogStore, tags: Sequence[str], *, include_retracted: bool = False) -> list[str]:
    """The ids of the cards with any of ``tags`` (their own or given at capture), in the order they were opened:
    one query on the summary."""
    if not tags:
        return []
    sql, args = any_tag_query(tags, include_retracted)
    return [r[0] for r in query(store, sql, args)]


def play_owners(store: LogStore, guids: Sequence[str], chunk: int = 500) -> dict[str, str]:
    """guid -> the card holding a play of it, for those of ``guids`` a card holds (retracted cards too): the keys
    table's primary key probed per guid. Where several cards hold one guid, the card opened first (its
    ``opened_key``, then its id) is named, for every reader alike."""
    out: dict[str, str] = {}
    wanted = sorted(set(guids))
    for i in range(0, len(wanted), chunk):
        part = wanted[i : i + chunk]
        marks = ", ".join("?" * len(part))
        sql = (
            f"SELECT k.value, k.card_id FROM {KEYS} k JOIN {SUMMARY} s ON s.card_id = k.card_id "
            f"WHERE k.kind = 'p' AND k.value IN ({marks}) ORDER BY k.value, s.opened_key, k.card_id"
        )
        for guid, card_id in query(store, sql, part):
            out.setdefault(guid, card_id)
    return out


def tag_board(store: LogStore, *, include_retracted: bool = False) -> list[tuple[str, int, float, float, str]]:
    """(tag, cards, mean score, best score, best card) for every tag: one query on the summary."""
    return [
        (r[0], int(r[1]), float(r[2]), float(r[3]), r[4]) for r in query(store, leaderboard_query(include_retracted))
    ]


def retracted_count(store: LogStore) -> int:
    """How many cards are retracted (what a list that leaves them out says it left out): one query."""
    return int(query(store, "SELECT count(*) FROM card_summary WHERE retracted IS NOT NULL")[0][0])


def distinct_keys(store: LogStore, kind: str) -> list[str]:
    """Every tag (``"t"``) or game id (``"g"``) of the ledger's cards, sorted."""
    sql, args = distinct_keys_query(kind)
    return [r[0] for r in query(store, sql, args)]


def tag_points(store: LogStore, tag: str, limit: int, before: str | None = None) -> list[tuple[str, str, int, float]]:
    """(card id, opened, opened key, score) of the newest ``limit`` cards with ``tag`` that have an opened time and
        are not retracted, newest first, opened before card ``before`` if given: two queries on the summary (how many
    cards the tag has, which chooses the plan; then the page)."""
    many = int(query(store, *tag_count_query(tag))[0][0]) > MANY_CARDS
    sql, args = tag_points_query(tag, limit, before, many=many)
    return [(r[0], r[1], int(r[2]), float(r[3])) for r in query(store, sql, args)]


def tag_count(store: LogStore, tag: str) -> int:
    """How many cards have ``tag`` (retracted ones too): a range of the keys table's primary key."""
    return int(query(store, *tag_count_query(tag))[0][0])


def recent_tags(store: LogStore, cards: int) -> list[str]:
    """The tags of the ``cards`` newest cards that are not retracted, the most recently used first: one query."""
    sql, args = recent_tags_query(cards)
    seen: dict[str, None] = {}
    for (tags,) in query(store, sql, args):
        seen.update(dict.fromkeys(msgspec.json.decode(tags)))
    return list(seen)


def stream_bodies(store: LogStore, streams: Sequence[str], chunk: int = 500) -> dict[str, list[bytes]]:
    """The bodies of many streams in version order, a query per ``chunk`` streams (not one per stream)."""
    out: dict[str, list[bytes]] = {s: [] for s in streams}
    for i in range(0, len(streams), chunk):
        part = list(streams[i : i + chunk])
        sql = f"SELECT stream, body FROM events WHERE stream IN ({', '.join('?' * len(part))}) ORDER BY stream, version"
        for stream, body in query(store, sql, part):
            out[stream].append(bytes(body))
    return out


def calculator_keys(store: LogStore, card_ids: Sequence[str] | None = None, chunk: int = 500) -> dict[str, str]:
    """card id -> the arc-agi release it records (the keys table's ``c`` key) for ``card_ids``, or for every card;
    a card that records none is absent. A query per ``chunk`` cards, or one in all."""
    if card_ids is None:
        return {r[0]: r[1] for r in query(store, f"SELECT card_id, value FROM {KEYS} WHERE kind = 'c'")}
    out: dict[str, str] = {}
    for i in range(0, len(card_ids), chunk):
        part = list(card_ids[i : i + chunk])
        sql = f"SELECT card_id, value FROM {KEYS} WHERE kind = 'c' AND card_id IN ({', '.join('?' * len(part))})"
        out.update({r[0]: r[1] for r in query(store, sql, part)})
    return out


def ranked_cards(store: LogStore) -> list[tuple[str, list[str], float]]:
    """(card id, tags, score) of every card that is not retracted, in the order the leaderboard breaks ties (when
    opened, then id): what a leaderboard re-scored in Python ranks."""
    sql = f"SELECT card_id, tags, score FROM {SUMMARY} WHERE retracted IS NULL ORDER BY opened_key, card_id"
    return [(r[0], msgspec.json.decode(r[1]) if r[1] else [], float(r[2])) for r in query(store, sql)]


def tag_figure_rows(
    store: LogStore, tag: str, *, include_retracted: bool = False
) -> list[tuple[str, str, int, float, str, int]]:
    """(metric, game id, level, value, label, cards) of every figure value of ``tag`` (see
    :mod:`ledger.store.figures`), in that order: one range of the table's primary key."""
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
