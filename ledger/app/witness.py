"""``ledger witness``: cosign other logs' checkpoints as a C2SP witness (see docs/evidence.md, 'Witnesses')."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from ledger.app.signing import Signer, Verifier, parse_checkpoint
from ledger.domain import merkle
from ledger.domain import signed_note as sn
from ledger.errors import InputError, LedgerError
from ledger.rules import consistency_file as cf
from ledger.rules.evidence_file import EvidenceFailure, unb64


class WitnessRefusal(LedgerError):
    """The witness does not cosign (the message says why); its state is unchanged."""


def _state_file(state: Path, origin: str) -> Path:
    return state / f"{hashlib.sha256(origin.encode()).hexdigest()[:32]}.json"


def witness(raw: bytes, log: Verifier, me: Signer, state: Path, now: int | None = None) -> str:
    """The checkpoint of ``raw`` with this witness's cosignature, recorded in the state; else WitnessRefusal."""
    old_note, proof_text, note = _read_input(raw)
    new = parse_checkpoint(note)
    if not log.signed(new):
        raise WitnessRefusal(f"not cosigned: the checkpoint is not signed by the log's key {log.name}")
    log_line = sn.verifier_key(log.name, log.public)
    try:
        state.mkdir(parents=True, exist_ok=True)
        lock = os.open(state / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise InputError(f"cannot use the witness state folder {state}: {e.strerror}") from e
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # check-and-update is one step per state folder
        path = _state_file(state, new.origin)
        known = _known(path)
        if known is not None:
            if known["log_key"] != log_line:
                raise WitnessRefusal(
                    f"not cosigned: this witness knows {new.origin!r} as the log signed by {known['log_key']}, not "
                    f"by {log_line} (another signer for the origin)"
                )
            _extends(known["cp"], new, old_note, proof_text, log)
        elif old_note is not None:  # a first checkpoint that comes with its proof: the proof must hold too
            try:
                cf.check(cf.Consistency(cf.FORMAT, old_note, note, proof_text), log)
            except EvidenceFailure as e:
                raise WitnessRefusal(f"not cosigned: {e}") from e
        cosigned = _cosign(note, new, me, int(time.time()) if now is None else now)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"origin": new.origin, "log_key": log_line, "checkpoint": cosigned}), "utf-8")
        os.replace(tmp, path)
        return cosigned
    finally:
        os.close(lock)


def _known(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {"log_key": str(data["log_key"]), "cp": sn.parse_checkpoint(data["checkpoint"])}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, sn.NoteError) as e:
        raise InputError(f"the witness state file {path} is damaged ({e}): restore it from a backup") from e


def _read_input(raw: bytes) -> tuple[str | None, list[str], str]:
    if cf.file_format(raw) == cf.FORMAT:
        try:
            c = cf.parse(raw)
        except EvidenceFailure as e:
            raise InputError(f"the consistency file: {e}") from e
        return c.old, c.proof, c.new
    try:
        return None, [], raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError("neither a checkpoint nor a consistency file (not UTF-8 text)") from e


def _extends(last: sn.Checkpoint, new: sn.Checkpoint, old_note: str | None, proof: list[str], log: Verifier) -> None:
    if new.size < last.size:
        raise WitnessRefusal(
            f"not cosigned: the checkpoint's tree of {new.size} events is smaller than the tree of {last.size} this "
            f"witness last cosigned for {new.origin!r}: a log only grows"
        )
    if new.size == last.size:
        if new.root != last.root:
            raise WitnessRefusal(
                f"FORK, not cosigned: {new.origin!r} at {new.size} events has another root than the one this witness "
                "cosigned: the log shows two histories"
            )
        return
    if old_note is None:
        raise WitnessRefusal(
            f"not cosigned: this witness last cosigned {new.origin!r} at {last.size} events; give a consistency file "
            f"from that checkpoint to this one (`ledger consistency`)"
        )
    old = parse_checkpoint(old_note, "the consistency file's old checkpoint")
    if (old.size, old.root) != (last.size, last.root):
        raise WitnessRefusal(
            f"not cosigned: the consistency proof starts from a tree of {old.size} events, not from the tree of "
            f"{last.size} this witness last cosigned for {new.origin!r} (or from another root at that size)"
        )
    try:
        hashes = [unb64(h, "a proof hash") for h in proof]
    except EvidenceFailure as e:
        raise WitnessRefusal(f"not cosigned: {e}") from e
    if not merkle.verify_consistency(last.size, new.size, last.root, new.root, hashes):
        raise WitnessRefusal(
            f"FORK, not cosigned: the consistency proof from the tree of {last.size} events this witness cosigned "
            f"to the new one of {new.size} fails: the log was forked or rewritten"
        )


def _cosign(note: str, cp: sn.Checkpoint, me: Signer, now: int) -> str:
    kid = sn.key_id(me.name, me.public, sn.COSIGNATURE_V1)
    lines = note.partition("\n\n")[2].rstrip("\n").split("\n")
    kept = [ln for ln, s in zip(lines, cp.signatures, strict=True) if not (s.name == me.name and s.key_id == kid)]
    return cp.text + "\n" + "".join(f"{ln}\n" for ln in kept) + me.cosign_line(cp.text, now)
