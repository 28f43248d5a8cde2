"""Signed checkpoints of the log and what is proved against them: evidence and consistency files."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from ledger.app.evidence_check import Outcome
from ledger.app.signing import Signer, Verifier, load_verifier, parse_checkpoint, read_text
from ledger.domain import baselines as bl
from ledger.domain import merkle
from ledger.domain import signed_note as sn
from ledger.domain.events import BaselinesRecorded, baselines_stream, card_stream, decode
from ledger.errors import InputError, LedgerError, StoreError
from ledger.ledger import Ledger
from ledger.rules import consistency_file as cf
from ledger.rules.evidence_file import FORMAT, Evidence, EvidenceStream, b64, card_document, to_text
from ledger.store.base import LogStore
from ledger.store.cards import replay
from ledger.store.merkle_store import TreeHead, TreeStore, tree_problem


class NotProvable(LedgerError):
    """The checkpoint does not cover the card, or is not a checkpoint of this ledger."""


def prove(led: Ledger, card_ref: str, note: str) -> str:
    """The evidence file for a card against the checkpoint ``note``, which this ledger's tree must have signed."""
    cp = parse_checkpoint(note)
    card_id = led.resolve_card(card_ref)
    if cp.size == 0:
        raise NotProvable(
            f"the checkpoint signs an empty log (a tree of 0 events): it covers no event of card {card_id}; sign a "
            "checkpoint after the card began (`ledger checkpoint`)"
        )
    tree = _tree_at(led, cp)
    heads = tree.checkpoint_heads(cp.size, cp.root.hex(), cp.heads_root.hex()) or tree.heads_at(cp.size)
    heads_leaves = merkle.heads_tree(heads)
    if merkle.root_of(heads_leaves) != cp.heads_root or len(heads) != cp.heads_count:
        raise NotProvable("the checkpoint's stream-heads root is not the one this ledger's events make")
    positions = {s: i for i, (s, _, _) in enumerate(sorted(heads))}

    card_bodies, card_leaves = tree.stream_until(card_stream(card_id), cp.size)
    if not card_bodies:
        raise NotProvable(f"the checkpoint (tree of {cp.size} events) was signed before card {card_id} began")
    card = replay(card_id, card_bodies)
    streams = [(card_stream(card_id), card_bodies, card_leaves)]
    baselines = {}
    if card.baselines_id:
        stream = baselines_stream(card.baselines_id)
        streams.append((stream, *tree.stream_until(stream, cp.size)))
        rec = decode(streams[1][1][0])
        assert isinstance(rec, BaselinesRecorded)
        baselines = bl.as_map(rec.entries)

    out_streams = []
    indices: list[int] = []
    for stream, bodies, leaves in streams:
        indices += leaves
        i = positions[stream]
        proof = merkle.proof_from_leaves(heads_leaves, merkle.inclusion_ranges(i, len(heads_leaves)))
        texts = [b.decode("utf-8") for b in bodies]
        out_streams.append(EvidenceStream(stream, leaves, texts, i, [b64(h) for h in proof]))
    indices.sort()
    proof = merkle.tree_hashes(merkle.multiproof_ranges(indices, cp.size), tree.parts)
    ev = Evidence(FORMAT, card_id, note, out_streams, [b64(h) for h in proof], card_document(card, baselines))
    return to_text(ev)


def consistency(led: Ledger, old_note: str, new_note: str) -> str:
    """The consistency file: both checkpoints (this ledger's) and the RFC 9162 proof between them."""
    old, new = parse_checkpoint(old_note, "the old checkpoint"), parse_checkpoint(new_note, "the new checkpoint")
    if new.size < old.size:
        raise InputError(f"the new checkpoint ({new.size} events) is smaller than the old one ({old.size}): swap them")
    tree = _tree_at(led, new)
    _tree_at(led, old)
    proof = merkle.tree_hashes(merkle.consistency_ranges(old.size, new.size), tree.parts)
    return cf.to_text(cf.Consistency(cf.FORMAT, old_note, new_note, [b64(h) for h in proof]))


def _tree_at(led: Ledger, cp: sn.Checkpoint) -> TreeStore:
    tree = TreeStore(led.store)
    # A checkpoint this ledger signed is inside its stored tree: nothing to write (a read-only ledger will do).
    stored = tree.size() if cp.size else 0
    if stored < cp.size and led.store.readonly:
        raise NotProvable(
            f"this ledger's stored tree covers {stored} events, fewer than the checkpoint's {cp.size}: run `ledger "
            "prove` with write access to bring it up to date"
        )
    if stored < cp.size:
        stored = tree.catch_up().size
    if stored < cp.size or merkle.tree_hashes([(0, cp.size)], tree.parts)[0] != cp.root:
        raise NotProvable(
            f"the checkpoint (tree of {cp.size} events) is not one of this ledger's trees: signed by another ledger, "
            "or this one was rewritten since (`ledger verify --checkpoint` says which)"
        )
    return tree


def covering_checkpoint(led: Ledger, card_id: str) -> str | None:
    """The newest checkpoint this ledger signed that covers the card's first event, or None."""
    first_event = led.store.event_at(card_stream(card_id), 1)
    if first_event is None:
        return None
    tree = TreeStore(led.store)
    try:
        cps = tree.checkpoints()
        if not cps or not tree.size():
            return None
        first = tree.leaf_indices([first_event.seq])[0]
    except StoreError:  # a ledger whose schema predates checkpoints (read-only: not upgraded)
        return None
    return next((c.note for c in reversed(cps) if first < c.size), None)


class TreeMismatch(LedgerError):
    """The stored tree is not the one the log's events make: nothing is signed."""


def make_checkpoint(store: LogStore, signer: Signer, origin: str | None = None) -> str:
    """Bring the stored tree up to date, check it against the events, sign and keep its head; returns the note."""
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
    heads_root = merkle.root_of(merkle.heads_tree(head.heads))
    try:
        text = sn.checkpoint_text(origin, head.size, head.root, len(head.heads), heads_root)
    except sn.NoteError as e:
        raise InputError(f"--origin: {e}") from e
    return text + "\n" + signer.sign_line(text), heads_root


@dataclass(kw_only=True)
class CheckpointReport(Outcome):
    checkpoint_size: int
    checkpoint_root: str
    events: int = 0
    root: str = ""

    def line(self) -> str:
        if self.ok:
            return (
                f"OK checkpoint: the log ({self.events} events, root {self.root}) extends the signed tree of "
                f"{self.checkpoint_size} events (consistency proof verified)"
            )
        return f"FAIL checkpoint: {self.error}"


def _root(leaves: bytearray, lo: int, hi: int) -> bytes:
    frontier = merkle.Frontier()
    frontier.extend((bytes(leaves[i * 32 : i * 32 + 32]) for i in range(lo, hi)), keep_from=64)
    return frontier.root()


def verify_checkpoint(store: LogStore, note: str, verifier: Verifier) -> CheckpointReport:
    """Check the signature, then the tree rebuilt from the events (not the stored tree, which an owner could rewrite
    along with them): a consistency proof to today's and the committed stream heads."""
    cp = parse_checkpoint(note)
    rep = CheckpointReport(checkpoint_size=cp.size, checkpoint_root=base64.b64encode(cp.root).decode())
    if not verifier.signed(cp):
        rep.error = f"the checkpoint is not signed by the key {verifier.name} (wrong key, or a forged signature)"
        return rep
    leaves = bytearray()  # every leaf hash of the log, 32 bytes each
    heads: dict[str, tuple[int, str]] = {}
    for e in store.scan():
        if len(leaves) < cp.size * 32:
            heads[e.stream] = (e.version, e.hash)
        leaves += merkle.event_leaf(e.hash)
    n = rep.events = len(leaves) // 32
    root_now = _root(leaves, 0, n)
    rep.root = base64.b64encode(root_now).decode()
    if n < cp.size:
        rep.error = (
            f"the log holds {n} events, fewer than the {cp.size} the checkpoint signed: events were removed "
            "(deleted or truncated)"
        )
        return rep
    proof = [_root(leaves, lo, hi) for lo, hi in merkle.consistency_ranges(cp.size, n)]
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


def verify_checkpoint_files(store: LogStore, checkpoint: str, key: str) -> CheckpointReport:
    verifier = load_verifier(Path(key))
    return verify_checkpoint(store, read_text(Path(checkpoint), "checkpoint"), verifier)
