"""Signed checkpoints of the log (``ledger checkpoint``) and the check that the log today extends one
(``ledger verify --checkpoint``)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from ledger.core import merkle
from ledger.core import signed_note as sn
from ledger.errors import InputError, LedgerError, StoreError
from ledger.services.evidence_check import Outcome
from ledger.services.signing import Signer, Verifier
from ledger.storage.base import LogStore
from ledger.storage.merkle_store import STORE_FROM_LEVEL, TreeHead, TreeStore


class TreeMismatch(LedgerError):
    """The stored tree is not the one the log's events make (or the log no longer makes an earlier checkpoint):
    nothing is signed."""


def make_checkpoint(store: LogStore, signer: Signer, origin: str | None = None) -> str:
    """Bring the stored tree up to date, check it against the events themselves, sign its head as a C2SP checkpoint,
    keep it in the ledger; returns the note. Refuses (:class:`TreeMismatch`) a tree the log does not make."""
    tree = TreeStore(store)
    try:
        head = tree.catch_up()
    except StoreError as e:  # a tree whose leaves the log no longer holds, among others
        raise TreeMismatch(f"refusing to sign: {e}") from e
    problem = tree_problem(tree, head)
    if problem is not None:
        raise TreeMismatch(f"refusing to sign: {problem}")
    note, heads_root = sign_head(head, signer, origin or signer.name)
    tree.add_checkpoint(head, head.root.hex(), heads_root.hex(), note)
    return note


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


def sign_head(head: TreeHead, signer: Signer, origin: str) -> tuple[str, bytes]:
    """The signed note of a tree head, and the root of its stream-heads tree."""
    heads_root = merkle.root_of(merkle.heads_tree(head.heads))
    try:
        text = sn.checkpoint_text(origin, head.size, head.root, len(head.heads), heads_root)
    except sn.NoteError as e:
        raise InputError(f"--origin: {e}") from e
    return text + "\n" + signer.sign_line(text), heads_root


def read_checkpoint(note: str, verifier: Verifier) -> tuple[sn.Checkpoint, str | None]:
    """Parse a checkpoint (:class:`InputError` if it is not one) and check its signature (the failure, or None)."""
    try:
        cp = sn.parse_checkpoint(note)
    except sn.NoteError as e:
        raise InputError(f"the checkpoint: {e}") from e
    if not verifier.signed(cp):
        return cp, f"the checkpoint is not signed by the key {verifier.name} (wrong key, or a forged signature)"
    return cp, None


@dataclass(kw_only=True)
class CheckpointReport(Outcome):
    """What ``verify --checkpoint`` found: the checkpoint's size and root, the log's size and root now."""

    checkpoint_size: int
    checkpoint_root: str
    events: int = 0
    root: str = ""

    def line(self) -> str:
        """One line for people."""
        if self.ok:
            return (
                f"OK checkpoint: the log ({self.events} events, root {self.root}) extends the signed tree of "
                f"{self.checkpoint_size} events (consistency proof verified)"
            )
        return f"FAIL checkpoint: {self.error}"


class _Leaves:
    """Every leaf hash of the log in one bytearray (32 bytes each), rebuilt from the events."""

    def __init__(self) -> None:
        self.data = bytearray()

    def __len__(self) -> int:
        return len(self.data) // 32

    def iter(self, lo: int, hi: int) -> Iterator[bytes]:
        data = self.data
        return (bytes(data[i * 32 : i * 32 + 32]) for i in range(lo, hi))

    def root(self, lo: int, hi: int) -> bytes:
        frontier = merkle.Frontier()
        frontier.extend(self.iter(lo, hi), keep_from=64)  # streamed: no subtree kept, only the frontier
        return frontier.root()


def verify_checkpoint(store: LogStore, note: str, verifier: Verifier) -> CheckpointReport:
    """Check the checkpoint's signature, then rebuild the tree from the events themselves (not the stored tree,
    which the events' owner could rewrite along with them) and check an RFC 9162 consistency proof from the
    checkpoint's tree to today's, and the stream heads the checkpoint committed to."""
    cp, bad_signature = read_checkpoint(note, verifier)
    rep = CheckpointReport(checkpoint_size=cp.size, checkpoint_root=base64.b64encode(cp.root).decode())
    if bad_signature:
        rep.error = bad_signature
        return rep
    leaves = _Leaves()
    heads: dict[str, tuple[int, str]] = {}
    for e in store.scan():
        if len(leaves) < cp.size:
            heads[e.stream] = (e.version, e.hash)
        leaves.data += merkle.event_leaf(e.hash)
    n = rep.events = len(leaves)
    root_now = leaves.root(0, n)
    rep.root = base64.b64encode(root_now).decode()
    if n < cp.size:
        rep.error = (
            f"the log holds {n} events, fewer than the {cp.size} the checkpoint signed: events were removed "
            "(deleted or truncated)"
        )
        return rep
    proof = [leaves.root(lo, hi) for lo, hi in merkle.consistency_ranges(cp.size, n)]
    if not merkle.verify_consistency(cp.size, n, cp.root, root_now, proof):
        rep.error = (
            f"the log's first {cp.size} events are not those the checkpoint signed (the consistency proof fails): "
            "events were changed, removed, reordered or inserted"
        )
        return rep
    if (
        merkle.root_of(merkle.heads_tree([(s, v, h) for s, (v, h) in heads.items()])) != cp.heads_root
        or len(heads) != cp.heads_count
    ):
        rep.error = "the streams' heads at the checkpoint's size are not those it signed"
    return rep
