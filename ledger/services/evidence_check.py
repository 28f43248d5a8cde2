"""``ledger check``: an evidence file verified from its bytes and a public key alone (no ledger, no database
driver loaded); with a folder of game files, its plays re-simulated as ``ledger audit`` does."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from ledger.core.evidence_file import EvidenceFailure, check, parse
from ledger.services.signing import Verifier


@dataclass(kw_only=True)
class Outcome:
    """A check's result: the first failure (None: everything held) and what it found, as fields."""

    error: str | None = None

    @property
    def ok(self) -> bool:
        """True if every check held."""
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        """The outcome as a JSON object: ``ok``, then every field."""
        return {"ok": self.ok, **asdict(self)}


@dataclass(kw_only=True)
class CheckReport(Outcome):
    """What ``ledger check`` found."""

    card: str = ""
    checkpoint_size: int = 0
    events: int = 0
    score: float | None = None
    resimulated: bool = False


def check_evidence(
    raw: bytes, verifier: Verifier, environments_dir: str | os.PathLike[str] | None = None
) -> CheckReport:
    """Check an evidence file with nothing but its bytes, the public key and (optionally) the game files."""
    rep = CheckReport()
    try:
        ev = parse(raw)
        rep.card = ev.card
        done = check(ev, verifier.signed)
    except EvidenceFailure as e:
        rep.error = str(e)
        return rep
    rep.checkpoint_size = done.checkpoint.size
    rep.events = len(done.events)
    rep.score = json.loads(ev.scorecard).get("score")
    if environments_dir is not None:
        from ledger.services.audit import check_resimulation

        resim = check_resimulation(done.events, environments_dir)
        rep.resimulated = True
        if resim.status == "FAIL":
            rep.error = f"re-simulation: {resim.message}"
    return rep
