"""The cards summary rebuilt from the log one card at a time, in bounded memory, and compared or written as it goes.

``verify``, ``rebuild-summary --check`` and ``rebuild-summary`` must not hold every card at once: a ledger of
100,000 cards would need hundreds of MB. So the log is read in the order of its ``(stream, version)`` index, a
batch of :data:`BATCH` events per query (keyset paging), and each card is folded from its own events, turned into
its summary row and keys, and dropped before the next. What is held at any moment: one batch of events, one card's
projection, :data:`CHUNK` rows waiting to be compared or written, and the baseline sets the cards use (read once
each, from their own stream, as the writer reads them). That bound does not depend on the number of cards.

The rows equal those of the whole log folded in ``seq`` order: a card's row depends only on its own events in
version order and on its baseline set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ledger.domain.events import CARD_STREAM, BaselineEntry, baselines_stream
from ledger.errors import StoreError
from ledger.store.cards import replay
from ledger.store.figures import SELECT_ALL_SQL, Key, counts_of, old_rows, replace_all
from ledger.store.figures import differences as figure_differences
from ledger.store.summary import KEYS, SUMMARY, SummaryRow, baselines_map, card_score, keys_of, row_of
from ledger.store.summary_sql import COLUMNS

#: Events read per query.
BATCH = 5_000
#: Cards compared (or written) per round trip.
CHUNK = 500

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


class _Sets:
    """Baseline sets by id, each read once from its stream."""

    def __init__(self, read: Read) -> None:
        self.read = read
        self.sets: dict[str, dict[str, BaselineEntry]] = {}

    def get(self, set_id: str | None) -> dict[str, BaselineEntry]:
        if set_id is None:
            return {}
        got = self.sets.get(set_id)
        if got is None:
            bodies = [_as_bytes(r[0]) for r in self.read(SET_SQL, (baselines_stream(set_id),))]
            try:
                got = baselines_map(set_id, bodies)
            except (TypeError, ValueError):
                got = {}
            self.sets[set_id] = got
        return got


def rebuilt(read: Read) -> Iterator[tuple[str, Built | None]]:
    """Every card's summary row and keys as the log has them, one card at a time (None: an event of the card does
    not decode, so it has no row)."""
    sets = _Sets(read)
    for card_id, events in _card_events(read):
        try:
            state = replay(card_id, (b for _, b in events))
        except (StoreError, ValueError):
            yield card_id, None
            continue
        version = events[-1][0]
        yield card_id, (row_of(state, version, card_score(state, sets.get(state.baselines_id))), keys_of(state))


def _stored(read: Read, ids: Sequence[str]) -> dict[str, Stored]:
    marks = ", ".join("?" * len(ids))
    sql = f"SELECT {', '.join(COLUMNS)} FROM {SUMMARY} WHERE card_id IN ({marks})"
    rows = {r[0]: SummaryRow(*r) for r in read(sql, ids)}
    keys: dict[str, set[tuple[str, str]]] = {}
    for cid, kind, value in read(f"SELECT card_id, kind, value FROM {KEYS} WHERE card_id IN ({marks})", ids):
        keys.setdefault(cid, set()).add((kind, value))
    return {c: (rows.get(c), frozenset(keys.get(c, ()))) for c in ids if c in rows or c in keys}


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
        ids = [r[0] for r in read(SUMMARY_IDS_SQL, (after, after, CHUNK))]
        if not ids:
            return
        streams = [CARD_STREAM + c for c in ids]
        marks = ", ".join("?" * len(streams))
        held = {r[0] for r in read(f"SELECT DISTINCT stream FROM events WHERE stream IN ({marks})", streams)}
        yield from (c for c in ids if CARD_STREAM + c not in held)
        after = ids[-1]


def check_streamed(
    read: Read, *, limit: int = 10, skip: frozenset[str] = frozenset(), figures: bool = False
) -> tuple[int, list[str]]:
    """(cards the log holds, how the stored summary differs from a rebuild: one line per card, the first
    ``limit`` then a count), comparing :data:`CHUNK` cards per query; cards in ``skip`` are left out (their rows
    as stored count in the tag figures). ``figures``: the schema has the tag figures table, compared with the
    counts of the rebuilt rows (held as counts per figure value, not per card)."""
    out: list[str] = []
    extra = 0
    cards = 0
    want_figures: Counter[Key] = Counter()

    def flush(pending: list[tuple[str, Built | None]]) -> None:
        nonlocal extra
        have = _stored(read, [c for c, _ in pending])
        for cid, want in pending:
            d = _difference(cid, want, have.get(cid))
            if d is None:
                continue
            if len(out) < limit:
                out.append(d)
            else:
                extra += 1

    pending: list[tuple[str, Built | None]] = []
    for cid, want in rebuilt(read):
        if want is not None:
            cards += 1
        if cid in skip:
            continue
        if figures and want is not None:
            r = want[0]
            want_figures.update(counts_of(r.tags, r.score, r.game_stats, r.retracted))
        pending.append((cid, want))
        if len(pending) >= CHUNK:
            flush(pending)
            pending = []
    if pending:
        flush(pending)
    for cid in _orphans(read):
        if cid in skip:
            continue
        if len(out) < limit:
            out.append(f"card {cid}: a summary row for a card the log does not hold")
        else:
            extra += 1
    if extra:
        out.append(f"+{extra} more cards")
    if figures:
        for tags, score, stats, retracted in old_rows(read, sorted(skip)).values():
            want_figures.update(counts_of(tags, score, stats, retracted))
        out += figure_differences(read(SELECT_ALL_SQL, ()), want_figures, limit=limit)
    return cards, out


def write_streamed(
    read: Read,
    execute: Callable[[str, Any], Any],
    upsert: str,
    pick: Sequence[int] | None,
    *,
    figures: bool = False,
) -> int:
    """Replace the summary tables' content with a rebuild from the log, :data:`CHUNK` cards per statement (inside
    the caller's transaction); returns the number of cards. ``figures``: the schema has the tag figures table,
    rewritten from the counts of the rows (held per figure value, not per card)."""
    from ledger.store.summary_sql import INSERT_KEY_SQL, row_params

    execute(f"DELETE FROM {KEYS}", ())
    execute(f"DELETE FROM {SUMMARY}", ())
    n = 0
    chunk: list[Built] = []
    counts: Counter[Key] = Counter()

    def flush() -> None:
        params = [row_params(row) for row, _ in chunk]
        execute(upsert, params if pick is None else [tuple(p[j] for j in pick) for p in params])
        keys = [(k, v, row.card_id) for row, ks in chunk for k, v in sorted(ks)]
        if keys:
            execute(INSERT_KEY_SQL, keys)

    for _, built in rebuilt(read):
        if built is None:
            continue
        n += 1
        chunk.append(built)
        if figures:
            r = built[0]
            counts.update(counts_of(r.tags, r.score, r.game_stats, r.retracted))
        if len(chunk) >= CHUNK:
            flush()
            chunk = []
    if chunk:
        flush()
    if figures:
        replace_all(execute, counts)
    return n
