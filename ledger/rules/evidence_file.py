"""The evidence file and its pure checks, from its bytes and a checkpoint verifier (docs/evidence-format.md, 5-6). The
file must be the canonical encoding of what it holds (no escape, number spelling or duplicate key can differ unnoticed),
and each stream's head the one the signed stream-heads root commits to (no event left out)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
from collections.abc import Sequence
from typing import Protocol

import msgspec

from ledger.domain import baselines as bl
from ledger.domain import chain, document, merkle
from ledger.domain import signed_note as sn
from ledger.domain.events import (
    BaselineEntry,
    BaselinesRecorded,
    CardClosed,
    Numbered,
    baselines_stream,
    card_stream,
    decode,
    type_of,
)
from ledger.domain.projection import CardState, fold, new_card
from ledger.domain.scoring import score_card

FORMAT = "arc-scorecard-ledger/evidence/v1"


class EvidenceStream(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One stream's events as stored (versions 1..n), their leaf positions, and its head's proof."""

    stream: str
    leaves: list[int]
    events: list[str]
    head_index: int
    head_proof: list[str]


class Evidence(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    format: str
    card: str
    checkpoint: str
    streams: list[EvidenceStream]
    proof: list[str]
    scorecard: str


class EvidenceFailure(Exception):
    """The first thing about an evidence file that does not hold."""


_encoder = msgspec.json.Encoder()


def to_text(doc: msgspec.Struct) -> str:
    """The file's text: the canonical encoding itself (any JSON whitespace may be added: ``check`` ignores it)."""
    return _encoder.encode(doc).decode("utf-8")


def b64(h: bytes) -> str:
    return base64.b64encode(h).decode()


def unb64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise EvidenceFailure(f"{what} is not base64") from e
    if len(raw) != 32 or b64(raw) != text:
        raise EvidenceFailure(f"{what} is not a canonical base64 SHA-256 hash")
    return raw


def card_document(card: CardState, baselines: dict[str, BaselineEntry]) -> str:
    """The card's exported JSON as ``ledger export`` writes it (an open competition card as the server closes it)."""
    every = card.environments if card.competition_mode and not card.closed else None
    return document.to_json(score_card(card, baselines, all_environments=every))


def parse(raw: bytes) -> Evidence:
    return decode_canonical(
        raw,
        Evidence,
        FORMAT,
        "an evidence file",
        "the file is not in canonical form: an escape, a number's spelling or a duplicate key differs from "
        "what `ledger prove` writes",
    )


class _Formatted(Protocol):
    @property
    def format(self) -> str: ...


def decode_canonical[F: _Formatted](raw: bytes, type_: type[F], fmt: str, what: str, not_canonical: str) -> F:
    """``raw`` decoded as ``type_``, which it must spell canonically (any JSON whitespace aside), of format ``fmt``."""
    try:
        obj = msgspec.json.decode(raw, type=type_)
        compact = msgspec.json.format(raw, indent=-1)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise EvidenceFailure(f"not {what}: {e}") from e
    if _encoder.encode(obj) != compact:
        raise EvidenceFailure(not_canonical)
    if obj.format != fmt:
        raise EvidenceFailure(f"unknown format {obj.format!r} (expected {fmt!r})")
    return obj


class Checked(msgspec.Struct, frozen=True):
    """What a check established (the card's events for re-simulation)."""

    checkpoint: sn.Checkpoint
    card: CardState
    events: list[Numbered]


class KeyCheck(Protocol):
    """The public key a check is made with (``ledger.app.signing.Verifier`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def public(self) -> bytes: ...
    def verifies(self, text: str, sigs: Sequence[bytes]) -> bool: ...


def check(ev: Evidence, key: KeyCheck) -> Checked:
    """Every check but re-simulation, in the order docs/evidence-format.md gives."""
    try:
        cp = sn.parse_checkpoint(ev.checkpoint)
    except sn.NoteError as e:
        raise EvidenceFailure(f"the checkpoint: {e}") from e
    sigs = key_signatures(cp, key)
    if not key.verifies(cp.text, sigs):
        raise EvidenceFailure(_changed_checkpoint(ev, cp, key, sigs))
    want = card_stream(ev.card)
    if not ev.streams or ev.streams[0].stream != want:
        raise EvidenceFailure(f"the first stream must be the card's, {want!r}")
    indices: list[tuple[int, bytes]] = []
    decoded: dict[str, list[Numbered]] = {}
    heads: list[tuple[EvidenceStream, bytes]] = []
    for s in ev.streams:
        if s.stream in decoded:
            raise EvidenceFailure(f"stream {s.stream!r} is in the file twice")
        decoded[s.stream], head = _check_stream(s, cp, indices)
        heads.append((s, head))
    root = _events_root(ev, cp, indices)
    if root != cp.root:
        raise EvidenceFailure(
            "the events and the inclusion proof do not make the checkpoint's root hash: an event's content, a leaf "
            "position or a proof hash was changed (or the proof belongs to another checkpoint)"
        )
    for s, entry in heads:
        proof = [unb64(h, f"stream {s.stream!r}: a head proof hash") for h in s.head_proof]
        if not merkle.verify_inclusion(s.head_index, cp.heads_count, merkle.leaf_hash(entry), proof, cp.heads_root):
            raise EvidenceFailure(
                f"stream {s.stream!r}: its last event here (version {len(s.events)}) is not the head the checkpoint "
                "signed: the file does not hold all of its events (its tail is missing), or its head proof was changed"
            )
    events = decoded[want]
    card = fold(ev.card, [n.event for n in events])
    expected = [want] + ([baselines_stream(card.baselines_id)] if card.baselines_id else [])
    if [s.stream for s in ev.streams] != expected:
        raise EvidenceFailure(
            f"the file must hold exactly the streams {expected}, not {[s.stream for s in ev.streams]}"
        )
    baselines: dict[str, BaselineEntry] = {}
    if card.baselines_id:
        rec = decoded[expected[1]][0].event
        if not isinstance(rec, BaselinesRecorded) or bl.set_id(rec.entries) != card.baselines_id:
            raise EvidenceFailure(f"the baseline set is not the set {card.baselines_id} the card is scored with")
        baselines = bl.as_map(rec.entries)
    if card_document(card, baselines) != ev.scorecard:
        raise EvidenceFailure("the scorecard in the file is not the one the calculator makes from its events")
    _check_closes(ev, events, baselines)
    return Checked(cp, card, events)


def _check_closes(ev: Evidence, events: Sequence[Numbered], baselines: dict[str, BaselineEntry]) -> None:
    running = new_card(ev.card)
    done = 0
    for i, n in enumerate(events):
        if not isinstance(n.event, CardClosed) or n.event.document_sha256 is None:
            continue
        if i + 1 == len(events):
            doc = ev.scorecard  # the card as a whole is closed here: the scorecard just checked is this document
        else:
            fold(ev.card, (m.event for m in events[done : i + 1]), running)
            done = i + 1
            # A close before the card named a baseline set scored it with none, as it stood then.
            doc = card_document(running, baselines if running.baselines_id is not None else {})
        rebuilt = hashlib.sha256(doc.encode("utf-8")).hexdigest()
        if rebuilt != n.event.document_sha256:
            raise EvidenceFailure(
                f"the card_closed event at version {n.version} records the document sha256 "
                f"{n.event.document_sha256}, the events up to it make {rebuilt}"
            )


def key_signatures(cp: sn.Checkpoint, key: KeyCheck, what: str = "the checkpoint") -> list[bytes]:
    """The checkpoint's signatures by ``key`` (name and key id); none is a failure naming who signed it."""
    sigs = sn.signatures_by(cp, key.name, key.public)
    if not sigs:
        mine = f"{key.name}+{sn.key_id(key.name, key.public).hex()}"
        by = ", ".join(sorted({f"{s.name}+{s.key_id.hex()}" for s in cp.signatures}))
        raise EvidenceFailure(
            f"{what} is not signed by the key given ({mine}): its only signatures are by {by} (another key's or "
            "another log's checkpoint)"
        )
    return sigs


def _events_root(ev: Evidence, cp: sn.Checkpoint, indices: list[tuple[int, bytes]]) -> bytes:
    indices = sorted(indices)
    positions = [i for i, _ in indices]
    for a, b in itertools.pairwise(positions):
        if a == b:
            raise EvidenceFailure(f"leaf position {a} is given to two events")
    proof = [unb64(h, "a proof hash") for h in ev.proof]
    need = len(merkle.multiproof_ranges(positions, cp.size))
    if need != len(proof):
        raise EvidenceFailure(
            f"the inclusion proof has {len(proof)} hashes where these leaf positions in the checkpoint's tree of "
            f"{cp.size} events need {need}: it was made for another checkpoint (or hashes were added or removed)"
        )
    try:
        return merkle.multiproof_root(positions, [leaf for _, leaf in indices], proof, cp.size)
    except merkle.ProofError as e:
        raise EvidenceFailure(f"the inclusion proof does not fit the events: {e}") from e


def _changed_checkpoint(ev: Evidence, cp: sn.Checkpoint, key: KeyCheck, sigs: Sequence[bytes]) -> str:
    """Why a checkpoint with a signature line by the key does not verify (the origin or root it names changed)."""
    general = (
        f"the checkpoint's text was changed after it was signed (its origin, tree size, root or stream-heads line): "
        f"its signature by {key.name} does not verify"
    )
    lines = cp.text.split("\n")
    if lines[0] != key.name and key.verifies("\n".join([key.name, *lines[1:]]), sigs):
        return f"the checkpoint's origin was changed after it was signed (it was signed as {key.name!r}): {general}"
    try:
        indices: list[tuple[int, bytes]] = []
        for s in ev.streams:
            _check_stream(s, cp, indices)
        root = _events_root(ev, cp, indices)
    except (EvidenceFailure, merkle.ProofError):
        return general
    if root != cp.root:
        text = "\n".join([lines[0], lines[1], b64(root), *lines[3:]])
        if key.verifies(text, sigs):
            return (
                "the checkpoint's root hash was changed after it was signed: its signature holds for the root the "
                "file's events make, not for the one written"
            )
    return general


def _check_stream(s: EvidenceStream, cp: sn.Checkpoint, out: list[tuple[int, bytes]]) -> tuple[list[Numbered], bytes]:
    """The stream's events and its head's stream-heads entry; appends its (leaf index, leaf hash) pairs to ``out``."""
    if not s.events or len(s.leaves) != len(s.events):
        raise EvidenceFailure(f"stream {s.stream!r}: {len(s.events)} events for {len(s.leaves)} leaf positions")
    for i in s.leaves:
        if not 0 <= i < cp.size:
            raise EvidenceFailure(
                f"stream {s.stream!r}: leaf position {i} is outside the checkpoint's tree of {cp.size} events"
            )
    if not 0 <= s.head_index < cp.heads_count:
        raise EvidenceFailure(
            f"stream {s.stream!r}: head_index {s.head_index} is outside the checkpoint's stream-heads tree of "
            f"{cp.heads_count} streams"
        )
    bodies = [e.encode("utf-8") for e in s.events]
    events = []
    for v, b in enumerate(bodies, 1):
        try:
            events.append(decode(b))
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise EvidenceFailure(f"stream {s.stream!r}: event {v} is not a ledger event: {e}") from e
    hashes = chain.chain_hashes(
        chain.GENESIS, s.stream, 0, [(type_of(e), b) for e, b in zip(events, bodies, strict=True)]
    )
    out.extend((i, merkle.event_leaf(h)) for i, h in zip(s.leaves, hashes, strict=True))
    entry = merkle.head_entry(s.stream, len(events), hashes[-1])
    return [Numbered(v, i + 1, e) for v, (i, e) in enumerate(zip(s.leaves, events, strict=True), 1)], entry
