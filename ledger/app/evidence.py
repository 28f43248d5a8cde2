"""Evidence files: ``ledger prove`` (a card's events, proofs and scorecard against a signed checkpoint); their
check is :mod:`ledger.app.evidence_check`, which needs no ledger."""

from __future__ import annotations

from ledger.domain import baselines as bl
from ledger.domain import merkle
from ledger.domain import signed_note as sn
from ledger.domain.events import BaselinesRecorded, baselines_stream, card_stream, decode
from ledger.errors import InputError, LedgerError, StoreError
from ledger.ledger import Ledger
from ledger.rules import consistency_file as cf
from ledger.rules.evidence_file import FORMAT, Evidence, EvidenceStream, b64, card_document, to_text
from ledger.store.cards import replay
from ledger.store.merkle_store import TreeStore


class NotProvable(LedgerError):
    """The checkpoint does not cover the card, or is not a checkpoint of this ledger."""


def prove(led: Ledger, card_ref: str, note: str) -> str:
    """The evidence file's text for a card, against the checkpoint ``note`` (which this ledger's tree must have
    signed): the card's events up to the checkpoint, its baseline set, their multi-proof, the streams' head proofs
    and the exported scorecard."""
    try:
        cp = sn.parse_checkpoint(note)
    except sn.NoteError as e:
        raise InputError(f"the checkpoint: {e}") from e
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
    """The consistency file's text: both checkpoints (which this ledger's tree must have signed) and the RFC 9162
    proof that the newer tree extends the older one."""
    cps = []
    for what, note in (("the old checkpoint", old_note), ("the new checkpoint", new_note)):
        try:
            cps.append(sn.parse_checkpoint(note))
        except sn.NoteError as e:
            raise InputError(f"{what}: {e}") from e
    old, new = cps
    if new.size < old.size:
        raise InputError(f"the new checkpoint ({new.size} events) is smaller than the old one ({old.size}): swap them")
    tree = _tree_at(led, new)
    _tree_at(led, old)
    proof = merkle.tree_hashes(merkle.consistency_ranges(old.size, new.size), tree.parts)
    return cf.to_text(cf.Consistency(cf.FORMAT, old_note, new_note, [b64(h) for h in proof]))


def _tree_at(led: Ledger, cp: sn.Checkpoint) -> TreeStore:
    """The ledger's stored tree, checked to hold the checkpoint's tree (brought up to date only if it must)."""
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
    """The newest checkpoint this ledger signed that covers the card's first event (None: no such checkpoint, or
    a ledger whose schema predates checkpoints)."""
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
