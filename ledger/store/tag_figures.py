"""The tag figures table (``tag_figures``): per tag, game, level and figure, how many cards have each value.

``ledger compare --tag`` and the viewer's compare page need, per tag, the count, best, quartiles and mean of the
cards' scores, and per game and level the same of the game scores, of the actions and scores of the completed
levels, how many cards reached and completed each level, and the baseline most cards have. Computed from every
card of the tag, that costs the tag's cards; computed from this table, it costs the distinct values of each figure
(a quantile of ``n`` values is a walk of the value counts in order, exact, the same number the sorted list gives).

A card adds one count per tag (``all_tags``, as the keys table matches them) to:

* ``S`` (game ``''``, level 0): its score;
* per game it played: ``G`` (level 0) its game score, ``R`` (level 0) the level its best play got to (levels
  completed + 1, at most the level count), ``C`` (level 0, value 0) when it completed every level, ``B`` (level
  0, value 0, ``label`` the baseline of each level as JSON) its baseline, and per completed level ``A`` (actions)
  and ``L`` (the level's score).

``retracted`` is 1 for a retracted card, so a figure with or without them is one range of the primary key.

The table is a projection of the summary rows (score, tags, game_stats, retracted): every write of the summary
(the catch-up, the in-memory overlay, a rebuild, the migration that adds it) applies the difference between a
card's old row and its new one in the same transaction, and ``verify`` / ``rebuild-summary --check`` compare the
table with the counts of a rebuild from the log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from ledger.store.base import in_chunks

FIGURES = "tag_figures"
#: Primary key order: one tag's figures are one range; within it one figure's values are in order.
KEY_COLUMNS = ("tag", "metric", "game_id", "level", "retracted", "value", "label")
#: (tag, metric, game_id, level, retracted, value, label)
Key = tuple[str, str, str, int, int, float, str]

ADD_SQL = (
    f"INSERT INTO {FIGURES} ({', '.join(KEY_COLUMNS)}, n) VALUES ({', '.join('?' * (len(KEY_COLUMNS) + 1))}) "
    f"ON CONFLICT ({', '.join(KEY_COLUMNS)}) DO UPDATE SET n = {FIGURES}.n + excluded.n"
)
DROP_ZERO_SQL = f"DELETE FROM {FIGURES} WHERE {' AND '.join(f'{c} = ?' for c in KEY_COLUMNS)} AND n = 0"
SELECT_ALL_SQL = f"SELECT {', '.join(KEY_COLUMNS)}, n FROM {FIGURES}"
OLD_ROWS_SQL = "SELECT card_id, tags, score, game_stats, retracted FROM card_summary WHERE card_id IN ({})"

_stats = msgspec.json.Decoder(list[tuple[str, float, int, int, list[int], list[float], list[int]]])
_tags = msgspec.json.Decoder(list[str])
_enc = msgspec.json.Encoder()


def counts_of(tags: str | None, score: float, game_stats: str, retracted: object) -> Counter[Key]:
    """What one summary row adds to the table (its ``tags``, ``score``, ``game_stats`` and ``retracted`` columns)."""
    out: Counter[Key] = Counter()
    if not tags:
        return out
    r = 0 if retracted is None else 1
    per_card: list[tuple[str, str, int, float, str]] = [("S", "", 0, float(score), "")]
    for game_id, g_score, done, count, acts, scores, base in _stats.decode(game_stats):
        per_card.append(("G", game_id, 0, float(g_score), ""))
        per_card.append(("R", game_id, 0, float(min(done + 1, count)), ""))
        if count and done >= count:
            per_card.append(("C", game_id, 0, 0.0, ""))
        per_card.append(("B", game_id, 0, 0.0, _enc.encode(base).decode()))
        for i, a in enumerate(acts):
            per_card.append(("A", game_id, i + 1, float(a), ""))
            per_card.append(("L", game_id, i + 1, float(scores[i]), ""))
    for tag in dict.fromkeys(_tags.decode(tags)):
        for metric, game_id, level, value, label in per_card:
            out[(tag, metric, game_id, level, r, value, label)] += 1
    return out


def old_rows(fetch: Callable[[str, Any], list[Any]], card_ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """card id -> (tags, score, game_stats, retracted) as the summary holds it now, for ``card_ids``."""
    return {
        cid: (tags, score, stats, retracted)
        for cid, tags, score, stats, retracted in in_chunks(fetch, OLD_ROWS_SQL, card_ids)
    }


def replace_all(execute: Callable[[str, Any], Any], counts: Counter[Key]) -> int:
    """Replace the table's content with ``counts`` (inside the caller's transaction); returns the rows written."""
    execute(f"DELETE FROM {FIGURES}", ())
    rows = rows_of(counts)
    for i in range(0, len(rows), 5000):
        execute(ADD_SQL, rows[i : i + 5000])
    return len(rows)


def write_delta(executemany: Callable[[str, Any], Any], change: Counter[Key]) -> None:
    """Apply ``change`` to the table (a count that reaches 0 is removed), inside the caller's transaction."""
    moved = rows_of(change)
    if not moved:
        return
    executemany(ADD_SQL, moved)
    gone = [r[:-1] for r in moved if r[-1] < 0]
    if gone:
        executemany(DROP_ZERO_SQL, gone)


def rows_of(counts: Counter[Key]) -> list[tuple[Any, ...]]:
    """The table's rows for ``counts`` (zeros left out), in key order."""
    return [(*k, n) for k, n in sorted(counts.items()) if n]


def differences(stored: Iterable[Sequence[Any]], want: Counter[Key], *, limit: int = 10) -> list[str]:
    """How the stored table (its rows) differs from the counts a rebuild gives, one line per figure."""
    have: Counter[Key] = Counter()
    for row in stored:
        have[(row[0], row[1], row[2], int(row[3]), int(row[4]), float(row[5]), row[6])] += int(row[7])
    out = []
    for key in sorted(have.keys() | want.keys()):
        if have.get(key, 0) != want.get(key, 0):
            tag, metric, game, level, r, value, label = key
            where = f"tag {tag} figure {metric}{f' game {game}' if game else ''}{f' level {level}' if level else ''}"
            what = f"value {value:g}{f' {label}' if label else ''}{' (retracted)' if r else ''}"
            out.append(f"{where} {what}: {have.get(key, 0)} card(s) counted (log: {want.get(key, 0)})")
    if len(out) > limit:
        out = [*out[:limit], f"+{len(out) - limit} more figures"]
    return out
