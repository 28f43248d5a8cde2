"""Signed checkpoints of the log (``ledger checkpoint``) and the check that the log today extends one
(``ledger verify --checkpoint``)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass

from ledger.app.evidence_check import Outcome
from ledger.app.signing import Signer, Verifier
from ledger.domain import merkle
from ledger.domain import signed_note as sn
from ledger.errors import InputError, LedgerError, StoreError
from ledger.store.base import LogStore
from ledger.store.merkle_store import TreeHead, TreeStore, tree_problem


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
