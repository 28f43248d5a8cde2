"""The summary tables' statements, written once with ``?`` placeholders (PostgreSQL's driver gets ``%s``).

Both backends run the same statements inside their append transaction (:func:`write_statements`), and the same
page query (:func:`page_query`) for every list, so the CLI, the viewer and the bundle show the same pages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from ledger.domain.events import CARD_STREAM
from ledger.store.base import has_table
from ledger.store.figures import Key, delta, old_rows, write_delta
from ledger.store.summary import (
    COLUMNS,
    KEYS,
    NEVER,
    SUMMARY,
    BodyReader,
    Change,
    SummaryKeeper,
    SummaryRow,
)


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


def pg(sql: str) -> str:
    """The statement for psycopg (``%s`` placeholders; no literal ``%`` is used in these statements)."""
    return sql.replace("?", "%s")


# The row's fields are the table's columns, in the same order: a row's values are its fields as a tuple.
assert SummaryRow.__struct_fields__ == COLUMNS


def row_params(row: SummaryRow) -> tuple[Any, ...]:
    """The row's values in :data:`COLUMNS` order."""
    return msgspec.structs.astuple(row)


def write_statements(change: Change) -> list[tuple[str, Sequence[Any] | list[Sequence[Any]], bool]]:
    """(sql, params, many) to run in the append transaction for ``change``."""
    if change.counters is not None:
        return [(COUNTERS_SQL, change.counters, False)]
    if change.row is None:
        gone = (change.stream[len(CARD_STREAM) :],)
        return [(DELETE_KEYS_SQL, gone, False), (DELETE_ROW_SQL, gone, False)]
    out: list[tuple[str, Any, bool]] = [(UPSERT_SQL, row_params(change.row), False)]
    if change.keys is not None:
        cid = change.row.card_id
        out.append((DELETE_KEYS_SQL, (cid,), False))
        if change.keys:
            out.append((INSERT_KEY_SQL, [(k, v, cid) for k, v in sorted(change.keys)], True))
    return out


def run_statements(
    execute: Callable[[str, Any], Any], executemany: Callable[[str, Any], Any], changes: Iterable[Change | None]
) -> None:
    """Run the statements of ``changes`` through the driver's ``execute``/``executemany`` (``?`` placeholders)."""
    for change in changes:
        if change is None:
            continue
        for sql, params, many in write_statements(change):
            (executemany if many else execute)(sql, params)


def figures_change(fetch: Callable[[str, Any], list[Any]], changes: Iterable[Change | None]) -> Counter[Key]:
    """How the tag figures move when ``changes`` are written (read before writing them: the old rows are read
    through ``fetch``). A change of counters only moves none."""
    done = [c for c in changes if c is not None and c.counters is None]
    old = old_rows(fetch, [c.stream[len(CARD_STREAM) :] for c in done])
    new = [(r.tags, r.score, r.game_stats, r.retracted) for r in (c.row for c in done) if r is not None]
    return delta(old.values(), new)


def write_changes(
    executemany: Callable[[str, Any], Any], changes: Iterable[Change | None], figures: Counter[Key] | None = None
) -> None:
    """Write many cards' changes with one statement of each kind (``executemany``: one parse, rows pipelined on
    PostgreSQL): a catch-up writes hundreds of cards at once. ``figures``: the tag figures' change
    (:func:`figures_change`, read before), written with them."""
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
        executemany(UPSERT_SQL, [row_params(r) for r in rows])
    keys = [(k, v, cid) for cid, ks in rekeyed for k, v in sorted(ks)]
    if keys:
        executemany(INSERT_KEY_SQL, keys)


@dataclass(frozen=True, slots=True)
class PageQuery:
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


def _least(dialect: str, a: str, b: str) -> str:
    return f"min({a}, {b})" if dialect == "sqlite" else f"LEAST({a}, {b})"


def shown_closed_expr(dialect: str) -> str:
    """SQL for when a card is shown closed (its close, or the toolkit's auto-close if due by ``now``), or NULL.

    Parameters (microseconds): never, stale, max_open, now, never, stale, max_open.
    """
    due = _least(dialect, "coalesce(last_key, ?) + ?", "opened_key + ?")
    return f"(CASE WHEN close_reason IS NOT NULL THEN closed_key WHEN {due} <= ? THEN {due} ELSE NULL END)"


def count_query(dialect: str, q: PageQuery) -> tuple[str, list[Any]]:
    """How many cards match ``q``'s filters (its sort, ``after`` and ``limit`` ignored): what a page is out of."""
    import dataclasses

    sql, args = page_query(dialect, dataclasses.replace(q, after=None, limit=None, sort="id"))
    where = sql.split(" ORDER BY ")[0].split(f" FROM {SUMMARY}", 1)[1]
    return f"SELECT count(*) FROM {SUMMARY}{where}", args


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
    sql = f"SELECT {', '.join(COLUMNS)} FROM {SUMMARY}"
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
    """Look whether the schema has the summary tables (inside the append transaction): once when it has them; on
    every append while it has not (a ledger at an earlier revision, until it is migrated)."""
    if not keeper.enabled:
        keeper.enabled = has_table(execute, dialect, SUMMARY)
    if not keeper.figures:
        from ledger.store.figures import has_figures

        keeper.figures = has_figures(execute, dialect)


def body_reader(execute: Callable[[str, Any], Any]) -> BodyReader:
    """Reads a stream's first bodies through ``execute`` (the append transaction's connection)."""
    return lambda stream, version: [bytes(r[0]) for r in execute(READ_BODIES_SQL, (stream, version))]


def any_tag_query(tags: Sequence[str], include_retracted: bool = False) -> tuple[str, list[Any]]:
    """The ids of the cards with any of ``tags`` (``all_tags``), in the order they were opened."""
    marks = ", ".join("?" * len(tags))
    sql = (
        f"SELECT card_id FROM {SUMMARY} WHERE card_id IN (SELECT card_id FROM {KEYS} WHERE kind = 't' "
        f"AND value IN ({marks})){'' if include_retracted else ' AND retracted IS NULL'} ORDER BY opened_key, card_id"
    )
    return sql, list(tags)


def leaderboard_query(include_retracted: bool = False) -> str:
    """Per tag (``all_tags``): its cards, their mean score, the best score and the first card with it."""
    live = "" if include_retracted else " AND s.retracted IS NULL"
    return (
        "SELECT tag, count(*), avg(score), max(score), "
        "max(CASE WHEN rank = 1 THEN card_id END) FROM ("
        "SELECT k.value AS tag, s.card_id AS card_id, s.score AS score, ROW_NUMBER() OVER "
        "(PARTITION BY k.value ORDER BY s.score DESC, s.opened_key, s.card_id) AS rank "
        f"FROM {KEYS} k JOIN {SUMMARY} s ON s.card_id = k.card_id WHERE k.kind = 't'{live}) ranked GROUP BY tag"
    )


#: A tag with more cards than this is read along the opened-time index (see :func:`tag_points_query`).
MANY_CARDS = 5000


def tag_points_query(tag: str, limit: int, before: str | None = None, *, many: bool = False) -> tuple[str, list[Any]]:
    """The newest ``limit`` cards with ``tag`` (``all_tags``) that have an opened time and are not retracted, newest
    first: (card_id, opened, opened_key, score); ``before``: only cards opened before that card (keyset paging).

    Two plans for one answer: a tag of few cards reads them through the keys table and sorts them (its cost is its
    cards); a tag of ``many`` cards walks the opened-time index from the newest and keeps the cards with the tag
    (its cost is about the cards opened since its ``limit``-th newest), so neither reads every card of a large tag.
    """
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


def tag_count_query(tag: str) -> tuple[str, list[Any]]:
    """How many cards have ``tag`` (retracted ones too): a range of the keys table's primary key, nothing else."""
    return f"SELECT count(*) FROM {KEYS} WHERE kind = 't' AND value = ?", [tag]


def recent_tags_query(cards: int) -> tuple[str, list[Any]]:
    """The tags of the ``cards`` newest cards that are not retracted, newest first (the opened-time index)."""
    return (
        f"SELECT tags FROM {SUMMARY} WHERE retracted IS NULL AND tags IS NOT NULL "
        "ORDER BY opened_key DESC, card_id DESC LIMIT ?",
        [cards],
    )


def distinct_keys_query(kind: str) -> tuple[str, list[Any]]:
    """Every tag (``t``) or game (``g``) any card has, sorted: a loose scan of the keys table's primary key, one
    index seek per distinct value (not one step per card, as ``SELECT DISTINCT`` would take)."""
    sql = (
        f"WITH RECURSIVE v(x) AS (SELECT (SELECT min(value) FROM {KEYS} WHERE kind = ?) UNION ALL "
        f"SELECT (SELECT min(value) FROM {KEYS} WHERE kind = ? AND value > v.x) FROM v WHERE v.x IS NOT NULL) "
        "SELECT x FROM v WHERE x IS NOT NULL ORDER BY x"
    )
    return sql, [kind, kind]
