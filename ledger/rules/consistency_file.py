"""The consistency file: two signed checkpoints and the RFC 9162 proof between them (docs/evidence-format.md, 9)."""

from __future__ import annotations

import msgspec

from ledger.domain import merkle
from ledger.domain import signed_note as sn
from ledger.rules.evidence_file import EvidenceFailure, KeyCheck, decode_canonical, key_signatures, unb64
from ledger.rules.evidence_file import to_text as to_text  # the same canonical encoding writes both files

FORMAT = "arc-scorecard-ledger/consistency/v1"


class Consistency(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    format: str
    old: str
    new: str
    proof: list[str]


class _Format(msgspec.Struct):
    format: str


def file_format(raw: bytes) -> str | None:
    try:
        return msgspec.json.decode(raw, type=_Format).format
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def parse(raw: bytes) -> Consistency:
    return decode_canonical(
        raw,
        Consistency,
        FORMAT,
        "a consistency file",
        "the file is not in canonical form (what `ledger consistency` writes)",
    )


def check(c: Consistency, key: KeyCheck) -> tuple[sn.Checkpoint, sn.Checkpoint]:
    """(old, new) once both are signed by ``key``, of one origin, the newer no smaller, and the proof verified."""
    cps = []
    for what, note in (("the old checkpoint", c.old), ("the new checkpoint", c.new)):
        try:
            cp = sn.parse_checkpoint(note)
        except sn.NoteError as e:
            raise EvidenceFailure(f"{what}: {e}") from e
        if not key.verifies(cp.text, key_signatures(cp, key, what)):
            raise EvidenceFailure(
                f"{what}'s text was changed after it was signed: its signature by {key.name} does not verify"
            )
        cps.append(cp)
    old, new = cps
    if old.origin != new.origin:
        raise EvidenceFailure(f"the checkpoints are of two logs: origins {old.origin!r} and {new.origin!r}")
    if new.size < old.size:
        raise EvidenceFailure(
            f"the new checkpoint's tree ({new.size} events) is smaller than the old one's ({old.size}): a log "
            "only grows"
        )
    proof = [unb64(h, "a proof hash") for h in c.proof]
    if not merkle.verify_consistency(old.size, new.size, old.root, new.root, proof):
        raise EvidenceFailure(
            f"the consistency proof from {old.size} to {new.size} events fails: the new checkpoint's tree does not "
            "extend the old one's (a fork: the log was rewritten, or the two were signed over different logs)"
        )
    return old, new
