"""The log's Merkle tree kept beside the events (tables of migration ``0004_merkle``), both backends.

The tree is brought up to date lazily: :meth:`TreeStore.catch_up` reads only the events appended since the stored
tree's last leaf, hashes them into the stored frontier and writes the subtrees they complete. An append does no
tree work at all, so capture is as fast as without the tree. Subtrees under :data:`STORE_FROM_LEVEL` (fewer than
16 leaves) are not stored: a proof that needs one recomputes it from the events' hashes, which keeps the tables
at about one row per eight events.

Through SQLAlchemy Core on both backends (each store's ``engine``, loaded on first use, opens its connections with
the store's own settings): these are checkpoint and proof commands, not the capture hot path or a list.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec
from sqlalchemy import bindparam, text
from sqlalchemy.exc import DBAPIError

from ledger.domain import merkle
from ledger.errors import StoreError
from ledger.store import tracking
from ledger.store.base import LogStore

#: Subtrees of 2**4 = 16 leaves and more are stored; smaller ones are recomputed from the events.
STORE_FROM_LEVEL = 4
#: Events read per query while catching up.
BATCH = 20_000
#: Any constant: only the writers of one PostgreSQL database must agree on it.
PG_TREE_LOCK = 0x4C454449

Head = tuple[str, int, str]

_heads_enc = msgspec.msgpack.Encoder()
_heads_dec = msgspec.msgpack.Decoder(list[tuple[str, int, str]])


class TreeHead(msgspec.Struct, frozen=True):
    """The stored tree at one size: its root, and the heads of every stream at that size."""

    size: int
    last_seq: int
    root: bytes
    heads: list[Head]


class StoredCheckpoint(msgspec.Struct, frozen=True):
    """A checkpoint the ledger signed, as kept in ``merkle_checkpoints``."""

    id: int
    size: int
    root: str
    heads_root: str
    note: str


#: The tree's tracking row (size, last seq, that event's hash) and the hash the log holds at that seq now.
_STATE_SQL = (
    f"SELECT t.n, t.seq, t.hash, coalesce((SELECT e.hash FROM events e WHERE e.seq = t.seq), '') "
    f"FROM {tracking.TABLE} t WHERE t.name = '{tracking.TREE}'"
)


class TreeStore:
    """The stored tree of one ledger (see the module's docstring)."""

    def __init__(self, store: LogStore) -> None:
        self.store = store
        self.engine: Any = store.engine  # type: ignore[attr-defined]

    # -- bringing the tree up to date --------------------------------------------------------------------------

    def catch_up(self) -> TreeHead:
        """Hash the events appended since the stored tree's last leaf into it; returns the tree's head now.

        On a read-only ledger nothing is written: the head is computed in memory from the stored tree and the new
        events. Two processes catching up at once both compute; one writes, the other finds it written.
        """
        for _ in range(5):
            with self._read() as conn:
                size, last_seq, last_hash, held = conn.execute(text(_STATE_SQL)).one()
                if last_hash != held:
                    raise StoreError(
                        f"the Merkle tree of {self.store.describe()} covers the log up to event seq {last_seq}, which "
                        "the log no longer holds as it was: the log was changed behind the ledger's back "
                        "(`ledger verify` says what differs)"
                    )
                frontier = merkle.Frontier(size, self._frontier(conn, size))
                heads = _heads(conn)
                nodes, runs, changed, new_last = self._absorb(conn, frontier, (last_seq, last_hash), heads)
            if frontier.size == size or self.store.readonly:
                return self._head(frontier, new_last[0], heads)
            if self._write(size, frontier.size, new_last, nodes, runs, {s: heads[s] for s in changed}):
                return self._head(frontier, new_last[0], heads)
        raise StoreError(f"cannot bring the Merkle tree of {self.store.describe()} up to date: too many writers")

    def stored_head(self) -> TreeHead:
        """The stored tree's head as its tables say, without catching up (what ``verify`` checks)."""
        with self._read() as conn:
            size, last_seq, _, _ = conn.execute(text(_STATE_SQL)).one()
            frontier = merkle.Frontier(size, self._frontier(conn, size))
            heads = _heads(conn)
        return self._head(frontier, last_seq, heads)

    def log_batches(self, until_seq: int) -> Iterable[list[tuple[int, str, int, str]]]:
        """Every event's (seq, stream, version, hash) up to ``until_seq``, in ``seq`` order, in batches, read from the
        events themselves (three short columns: checking the stored tree against the log reads nothing else)."""
        q = text("SELECT seq, stream, version, hash FROM events WHERE seq > :s AND seq <= :u ORDER BY seq LIMIT :n")
        last = 0
        while True:
            with self._read() as conn:
                rows = [tuple(r) for r in conn.execute(q, {"s": last, "u": until_seq, "n": BATCH})]
            if not rows:
                return
            yield rows
            last = rows[-1][0]

    def stored(self) -> tuple[dict[merkle.Part, bytes], list[tuple[int, int]], dict[str, tuple[int, str]]]:
        """Everything the stored tree holds beside its size: its subtrees, its runs, its stream heads."""
        with self._read() as conn:
            nodes = {(r[0], r[1]): bytes(r[2]) for r in conn.execute(text("SELECT level, idx, hash FROM merkle_nodes"))}
            runs = [(r[0], r[1]) for r in conn.execute(text("SELECT first_idx, first_seq FROM merkle_runs"))]
            heads = _heads(conn)
        return nodes, sorted(runs), heads

    def size(self) -> int:
        """How many events (leaves) the stored tree covers."""
        with self._read() as conn:
            return int(conn.execute(text(_STATE_SQL)).one()[0])

    @staticmethod
    def _head(frontier: merkle.Frontier, last_seq: int, heads: Mapping[str, tuple[int, str]]) -> TreeHead:
        return TreeHead(frontier.size, last_seq, frontier.root(), sorted((s, v, h) for s, (v, h) in heads.items()))

    def _absorb(
        self, conn: Any, frontier: merkle.Frontier, last: tuple[int, str], heads: dict[str, tuple[int, str]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, int]], set[str], tuple[int, str]]:
        """Push every event after ``last`` (seq, hash) into ``frontier``: the nodes to store, new runs, changed
        streams, and the last event's seq and hash."""
        nodes: list[dict[str, Any]] = []
        runs: list[dict[str, int]] = []
        changed: set[str] = set()
        q = text("SELECT seq, stream, version, hash FROM events WHERE seq > :s ORDER BY seq LIMIT :n")
        while True:
            rows = conn.execute(q, {"s": last[0], "n": BATCH}).all()
            if not rows:
                return nodes, runs, changed, last
            for k, (seq, stream, version, h) in enumerate(rows):
                if seq != last[0] + 1 or frontier.size + k == 0:
                    runs.append({"i": frontier.size + k, "s": seq})
                heads[stream] = (version, h)
                changed.add(stream)
                last = (seq, h)
            done = frontier.extend(map(merkle.event_leaf, (r[3] for r in rows)), STORE_FROM_LEVEL)
            nodes += ({"l": level, "i": idx, "h": node} for level, idx, node in done)

    def _write(
        self,
        old_size: int,
        new_size: int,
        last: tuple[int, str],
        nodes: list[dict[str, Any]],
        runs: list[dict[str, int]],
        heads: Mapping[str, tuple[int, str]],
    ) -> bool:
        """Store what :meth:`_absorb` computed, if no other writer moved the tree meanwhile (else False)."""
        try:
            with self._begin_write() as conn:
                # The tree's tracking row, in the transaction that stores what it reflects.
                moved = conn.execute(
                    text(f"UPDATE {tracking.TABLE} SET n = :n, seq = :s, hash = :h WHERE name = :t AND n = :o"),
                    {"n": new_size, "s": last[0], "h": last[1], "t": tracking.TREE, "o": old_size},
                )
                if moved.rowcount != 1:
                    raise _Moved
                if nodes:
                    conn.execute(text("INSERT INTO merkle_nodes (level, idx, hash) VALUES (:l, :i, :h)"), nodes)
                if runs:
                    conn.execute(text("INSERT INTO merkle_runs (first_idx, first_seq) VALUES (:i, :s)"), runs)
                if heads:
                    conn.execute(
                        text(
                            "INSERT INTO merkle_heads (stream, version, hash) VALUES (:s, :v, :h) "
                            "ON CONFLICT (stream) DO UPDATE SET version = excluded.version, hash = excluded.hash"
                        ),
                        [{"s": s, "v": v, "h": h} for s, (v, h) in heads.items()],
                    )
        except _Moved:
            return False
        except DBAPIError as e:
            raise StoreError(f"cannot store the Merkle tree of {self.store.describe()}: {e.orig}") from e
        return True

    @contextlib.contextmanager
    def _begin_write(self) -> Iterator[Any]:
        """A write transaction (on PostgreSQL holding the tree's advisory lock: catch-ups and checkpoints one at a
        time)."""
        if self.store.dialect == "sqlite":
            with self.engine.execution_options(ledger_immediate=True).begin() as conn:
                yield conn
            return
        with self.engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_TREE_LOCK})
            yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[Any]:
        """A read transaction whose database errors become one-line :class:`StoreError` s."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except DBAPIError as e:
            raise StoreError(f"cannot read the Merkle tree of {self.store.describe()}: {e.orig}") from e

    # -- reading subtrees ------------------------------------------------------------------------------------------

    def _frontier(self, conn: Any, size: int) -> list[tuple[int, bytes]]:
        parts = merkle.perfect_parts(0, size)
        got = self._parts(conn, set(parts))
        return [(level, got[(level, idx)]) for level, idx in parts]

    def parts(self, wanted: Iterable[merkle.Part]) -> dict[merkle.Part, bytes]:
        """The hashes of perfect subtrees inside the stored tree (stored ones read, small ones recomputed)."""
        with self._read() as conn:
            return self._parts(conn, set(wanted))

    def _parts(self, conn: Any, wanted: set[merkle.Part]) -> dict[merkle.Part, bytes]:
        out: dict[merkle.Part, bytes] = {}
        stored: dict[int, list[int]] = {}
        small: list[merkle.Part] = []
        for level, idx in wanted:
            if level >= STORE_FROM_LEVEL:
                stored.setdefault(level, []).append(idx)
            else:
                small.append((level, idx))
        q = text("SELECT idx, hash FROM merkle_nodes WHERE level = :l AND idx IN :ids").bindparams(
            bindparam("ids", expanding=True)
        )
        for level, ids in stored.items():
            for i in range(0, len(ids), 500):
                for idx, h in conn.execute(q, {"l": level, "ids": ids[i : i + 500]}):
                    out[(level, idx)] = bytes(h)
        missing = [p for p in wanted if p[0] >= STORE_FROM_LEVEL and p not in out]
        if missing:
            raise StoreError(f"the Merkle tree of {self.store.describe()} lacks subtree {missing[0]}: run init")
        out.update(self._small_parts(conn, small))
        return out

    def _small_parts(self, conn: Any, small: Sequence[merkle.Part]) -> dict[merkle.Part, bytes]:
        """Subtrees of fewer than 16 leaves, from the events' hashes (neighbouring ones read in one query)."""
        spans = sorted((idx << level, (idx + 1) << level, (level, idx)) for level, idx in small)
        out: dict[merkle.Part, bytes] = {}
        i = 0
        while i < len(spans):
            lo, hi = spans[i][0], spans[i][1]
            j = i + 1
            while j < len(spans) and spans[j][0] <= hi + 64:
                hi = max(hi, spans[j][1])
                j += 1
            leaves = self._leaves(conn, lo, hi)
            for a, b, part in spans[i:j]:
                out[part] = merkle.root_of(leaves[a - lo : b - lo])
            i = j
        return out

    def _leaves(self, conn: Any, lo: int, hi: int) -> list[bytes]:
        """The leaf hashes of leaves ``lo .. hi-1`` (all in the stored tree)."""
        first, last = self._seqs(conn, [lo, hi - 1])
        q = text("SELECT hash FROM events WHERE seq BETWEEN :a AND :b ORDER BY seq")
        leaves = [merkle.event_leaf(r[0]) for r in conn.execute(q, {"a": first, "b": last})]
        if len(leaves) != hi - lo:
            raise StoreError(
                f"the events of {self.store.describe()} no longer match its Merkle tree (leaves {lo}..{hi - 1}): "
                "events were removed; run `ledger verify`"
            )
        return leaves

    @staticmethod
    def _load_runs(conn: Any) -> tuple[list[int], list[int]]:
        # Read each time (a row per gap in seq: a handful): another process may have extended it.
        rows = conn.execute(text("SELECT first_idx, first_seq FROM merkle_runs ORDER BY first_idx")).all()
        return [r[0] for r in rows], [r[1] for r in rows]

    def _seqs(self, conn: Any, indices: Sequence[int]) -> list[int]:
        idxs, seqs = self._load_runs(conn)
        out = []
        for i in indices:
            k = bisect.bisect_right(idxs, i) - 1
            out.append(seqs[k] + i - idxs[k])
        return out

    def leaf_indices(self, seqs: Sequence[int]) -> list[int]:
        """The leaf position of each event (by its ``seq``) in the stored tree."""
        with self._read() as conn:
            idxs, firsts = self._load_runs(conn)
        out = []
        for s in seqs:
            k = bisect.bisect_right(firsts, s) - 1
            if k < 0:
                raise StoreError(f"event seq {s} is not in the Merkle tree")
            out.append(idxs[k] + s - firsts[k])
        return out

    def stream_until(self, stream: str, size: int) -> tuple[list[bytes], list[int]]:
        """The stored bytes of ``stream``'s events among the tree's first ``size`` leaves, in version order, and
        their leaf positions (two columns only: a proof of a long card reads nothing else)."""
        if size == 0:
            return [], []
        q = text("SELECT seq, body FROM events WHERE stream = :s AND seq <= :last ORDER BY version")
        with self._read() as conn:
            (last,) = self._seqs(conn, [size - 1])
            rows = conn.execute(q, {"s": stream, "last": last}).all()
        return [bytes(r[1]) for r in rows], self.leaf_indices([r[0] for r in rows])

    # -- checkpoints ------------------------------------------------------------------------------------------------

    def add_checkpoint(self, head: TreeHead, root: str, heads_root: str, note: str) -> None:
        """Keep a signed checkpoint (append-only) with the stream heads it commits to."""
        row = {"n": head.size, "r": root, "hr": heads_root, "note": note, "h": _heads_enc.encode(head.heads)}
        try:
            with self._begin_write() as conn:
                conn.execute(
                    text(
                        "INSERT INTO merkle_checkpoints (size, root, heads_root, note, heads) "
                        "VALUES (:n, :r, :hr, :note, :h)"
                    ),
                    row,
                )
        except DBAPIError as e:
            raise StoreError(f"cannot store the checkpoint in {self.store.describe()}: {e.orig}") from e

    def checkpoints(self) -> list[StoredCheckpoint]:
        """Every checkpoint the ledger signed, oldest first."""
        q = text("SELECT id, size, root, heads_root, note FROM merkle_checkpoints ORDER BY id")
        with self._read() as conn:
            return [StoredCheckpoint(*r) for r in conn.execute(q)]

    def checkpoint_heads(self, size: int, root: str, heads_root: str) -> list[Head] | None:
        """The stream heads a stored checkpoint of this size and roots committed to (None: no such checkpoint)."""
        q = text(
            "SELECT heads FROM merkle_checkpoints WHERE size = :n AND root = :r AND heads_root = :hr "
            "ORDER BY id LIMIT 1"
        )
        with self._read() as conn:
            row = conn.execute(q, {"n": size, "r": root, "hr": heads_root}).first()
        return list(_heads_dec.decode(bytes(row[0]))) if row else None

    def heads_at(self, size: int) -> list[Head]:
        """Every stream's head among the first ``size`` leaves, read from the events (a scan: a fallback)."""
        if size == 0:
            return []
        with self._read() as conn:
            (last,) = self._seqs(conn, [size - 1])
            q = text(
                "SELECT e.stream, e.version, e.hash FROM events AS e JOIN (SELECT stream, max(version) AS v "
                "FROM events WHERE seq <= :s GROUP BY stream) AS a ON e.stream = a.stream AND e.version = a.v"
            )
            return sorted((r[0], r[1], r[2]) for r in conn.execute(q, {"s": last}))


def _heads(conn: Any) -> dict[str, tuple[int, str]]:
    return {r[0]: (r[1], r[2]) for r in conn.execute(text("SELECT stream, version, hash FROM merkle_heads"))}


class _Moved(Exception):
    """Another writer moved the stored tree first (rolls the transaction back)."""


def tree_problem(tree: TreeStore, head: TreeHead) -> str | None:
    """What differs between the stored tree at ``head`` and the tree the events up to ``head.last_seq`` make
    (None: nothing): the leaf count, every stored subtree, the runs that map leaves to ``seq``, the stream heads,
    and the root of every checkpoint the ledger signed before.

    The whole tree is rebuilt from the events' hash column (a checkpoint signs what the stored tree says, and a
    stored tree rewritten along with the events, or on its own, would otherwise be signed as it is).
    """
    nodes, runs, stored_heads = tree.stored()
    earlier = sorted(tree.checkpoints(), key=lambda c: c.size)
    stops = sorted({c.size for c in earlier if 0 < c.size <= head.size} | {head.size} - {0})
    heads: dict[str, tuple[int, str]] = {}
    log_runs: list[tuple[int, int]] = []
    frontier = merkle.Frontier()
    made: list[tuple[int, int, bytes]] = []
    roots = {0: merkle.EMPTY_ROOT}
    bad: list[str] = []
    count, prev_seq, stop = 0, -1, 0
    sha256, fromhex = hashlib.sha256, bytes.fromhex
    for rows in tree.log_batches(head.last_seq):
        seqs = [r[0] for r in rows]
        if seqs[0] != prev_seq + 1 or seqs[-1] - seqs[0] != len(seqs) - 1:  # a gap in seq: a new run
            for k, seq in enumerate(seqs):
                if seq != prev_seq + 1:
                    log_runs.append((count + k, seq))
                prev_seq = seq
        prev_seq = seqs[-1]
        heads.update((r[1], (r[2], r[3])) for r in rows)
        try:
            leaves = [sha256(b"\x00" + fromhex(r[3])).digest() for r in rows]
        except (TypeError, ValueError):
            bad.append("an event's hash column is not a sha256 (64 hex digits): the log was changed")
            break
        i = 0
        while i < len(leaves):  # extended up to each signed size in turn, to take the root there
            target = stops[stop] if stop < len(stops) else None
            take = len(leaves) - i if target is None else min(len(leaves) - i, target - frontier.size)
            made += frontier.extend(leaves[i : i + take], STORE_FROM_LEVEL)
            i += take
            if frontier.size == target:
                roots[target] = frontier.root()
                stop += 1
        count += len(rows)
    if bad:
        return bad[0]
    if count != head.size:
        return (
            f"the log holds {count} events up to seq {head.last_seq}, the stored Merkle tree {head.size}: events "
            "were removed or inserted behind the ledger's back (`ledger verify` and `verify --checkpoint` say which)"
        )
    for level, idx, h in made:
        if nodes.get((level, idx)) != h:
            lo = idx << level
            return (
                f"the stored Merkle tree's subtree over leaves {lo}..{lo + (1 << level) - 1} is not the hash of those "
                "events: the tree's tables (merkle_nodes) or the events were changed behind the ledger's back"
            )
    if len(nodes) != len(made):
        return f"the stored Merkle tree holds {len(nodes) - len(made)} subtree(s) the log does not make (merkle_nodes)"
    if roots.get(head.size) != head.root:
        return "the stored Merkle tree's root is not the one the log's events make: the tree was changed"
    if log_runs != runs:
        return "the stored map from leaves to seq (merkle_runs) is not the log's: the tree's tables were changed"
    if heads != stored_heads:
        return "the stored stream heads (merkle_heads) are not the log's: the tree's tables were changed"
    for c in earlier:
        if c.size > head.size:
            return f"the stored tree covers {head.size} events, fewer than the {c.size} of checkpoint {c.id} it signed"
        if roots[c.size].hex() != c.root:
            return (
                f"the log's first {c.size} events no longer make the root of checkpoint {c.id} this ledger signed: "
                "the log was rewritten since (events changed, removed, reordered or inserted)"
            )
    return None
