"""``ledger check``: an evidence file verified from its bytes and a public key alone (no ledger, no driver)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ledger.app.signing import Verifier, cosigned, load_verifier
from ledger.domain.signed_note import COSIGNATURE_V1, Checkpoint, NoteError, parse_checkpoint
from ledger.errors import InputError
from ledger.rules import consistency_file as cf
from ledger.rules.consistency_file import file_format
from ledger.rules.evidence_file import EvidenceFailure, check, parse


@dataclass(kw_only=True)
class Outcome:
    """A check's result: the first failure (None: everything held) and what it found, as fields."""

    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}


@dataclass(kw_only=True)
class CheckReport(Outcome):
    """What ``ledger check`` found: the file's own figures even when a check fails; the score only when all held."""

    kind: str = "evidence"
    card: str = ""
    checkpoint_size: int | None = None
    old_size: int | None = None
    events: int | None = None
    closed: bool | None = None
    score: float | None = None
    resimulated: bool = False
    resimulation: str | None = None
    resimulation_message: str | None = None
    cosigned_by: list[str] | None = None
    quorum: int | None = None


def check_evidence(
    raw: bytes,
    verifier: Verifier,
    environments_dir: str | os.PathLike[str] | None = None,
    witnesses: Sequence[Verifier] = (),
    quorum: int | None = None,
) -> CheckReport:
    """Check an evidence or consistency file from its bytes and keys; ``quorum`` witnesses (default all) must cosign."""
    rep = CheckReport()
    if file_format(raw) == cf.FORMAT:
        rep.kind = "consistency"
        try:
            old, new = cf.check(cf.parse(raw), verifier)
        except EvidenceFailure as e:
            rep.error = str(e)
            return rep
        rep.old_size, rep.checkpoint_size = old.size, new.size
        _quorum(rep, new, witnesses, quorum)
        return rep
    try:
        ev = parse(raw)
        rep.card = ev.card
        rep.events = len(ev.streams[0].events) if ev.streams else 0
        with contextlib.suppress(NoteError):
            rep.checkpoint_size = parse_checkpoint(ev.checkpoint).size
        done = check(ev, verifier)
    except EvidenceFailure as e:
        rep.error = str(e)
        return rep
    rep.checkpoint_size = done.checkpoint.size
    rep.events = len(done.events)
    rep.closed = done.card.closed
    if _quorum(rep, done.checkpoint, witnesses, quorum):
        return rep
    rep.score = json.loads(ev.scorecard).get("score")
    if environments_dir is not None:
        from ledger.app.audit import check_resimulation

        resim = check_resimulation(done.events, environments_dir)
        rep.resimulation, rep.resimulation_message = resim.status, resim.message
        rep.resimulated = resim.status in ("PASS", "WARN")
        if resim.status == "FAIL":
            rep.error = f"re-simulation: {resim.message}"
    return rep


def _quorum(rep: CheckReport, cp: Checkpoint, witnesses: Sequence[Verifier], quorum: int | None) -> bool:
    if not witnesses:
        return False
    witnesses = distinct_witnesses(witnesses)
    need = len(witnesses) if quorum is None else quorum
    rep.quorum = need
    rep.cosigned_by = [w.name for w in witnesses if cosigned(w, cp) is not None]
    if len(rep.cosigned_by) >= need:
        return False
    missing = ", ".join(w.name for w in witnesses if w.name not in rep.cosigned_by)
    rep.error = (
        f"the checkpoint is cosigned by {len(rep.cosigned_by)} of the {len(witnesses)} witnesses given, fewer than "
        f"the quorum of {need}: no valid cosignature by {missing}"
    )
    return True


def distinct_witnesses(witnesses: Sequence[Verifier]) -> list[Verifier]:
    """The witnesses with each key once: the cosigned message holds no name, so two names of one key are one."""
    seen: dict[bytes, Verifier] = {}
    for w in witnesses:
        seen.setdefault(key_hash(w), w)
    return list(seen.values())


def key_hash(witness: Verifier) -> bytes:
    return hashlib.sha256(bytes([COSIGNATURE_V1]) + witness.public).digest()


def load_witnesses(paths: Sequence[Path], quorum: int | None) -> list[Verifier]:
    cosigners = [load_verifier(p, COSIGNATURE_V1) for p in paths]
    first: dict[bytes, int] = {}
    for i, w in enumerate(cosigners):
        if (j := first.setdefault(key_hash(w), i)) != i:
            raise InputError(
                f"--witness {paths[i]} is the same key as --witness {paths[j]} (witnesses are distinct keys, "
                "told apart by their key hash): give each witness once"
            )
    if quorum is not None and quorum > len(cosigners):
        raise InputError(f"--quorum {quorum} needs at least {quorum} --witness keys (got {len(cosigners)})")
    return cosigners


@dataclass
class CheckOutcome:
    """`ledger check` whole: the report, the key that signed the file, and the --environments folder given."""

    report: CheckReport
    signer: str
    environments: str | os.PathLike[str] | None

    def to_json(self) -> dict[str, Any]:
        return self.report.to_json()

    def lines(self) -> list[str]:
        rep = self.report
        cosigned = ""
        if rep.cosigned_by is not None:
            cosigned = f", cosigned by {len(rep.cosigned_by)} of the witnesses given ({', '.join(rep.cosigned_by)})"
        if not rep.ok:
            return [f"FAIL {rep.error}"]
        if rep.kind == "consistency":
            return [
                f"OK consistency: the tree of {rep.checkpoint_size} events extends the tree of {rep.old_size} events, "
                f"both checkpoints signed by {self.signer} (RFC 9162 consistency proof verified){cosigned}"
            ]
        sim = ", plays re-simulated" if rep.resimulated else ""
        if rep.resimulation is not None and not rep.resimulated and not self._skipped:
            sim = f"; re-simulation {rep.resimulation}: {rep.resimulation_message}"
        state = "closed" if rep.closed else "open"
        return [
            f"OK card {rep.card}: {rep.events} events, all of them, in the tree of {rep.checkpoint_size} events "
            f"signed by {self.signer}{cosigned}; {state} at the checkpoint; scorecard rebuilt and equal "
            f"(score {rep.score}){sim}"
        ]

    @property
    def _skipped(self) -> bool:
        return self.report.ok and self.report.resimulation == "SKIP"

    @property
    def usage_error(self) -> str | None:
        """As `ledger audit`: a folder without the card's games checked nothing."""
        if self._skipped:
            return f"{self.environments} holds none of the games of card {self.report.card}: plays not re-simulated"
        return None

    @property
    def exit_code(self) -> int:
        return 1 if not self.report.ok else 2 if self._skipped else 0
