"""The standalone evidence verifier (scripts/verify_evidence.py), loaded by path as a module: it is a script a
reviewer copies, not a part of the package; the tests run it in-process beside ``ledger check``."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from ledger.domain import signed_note as sn

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "verify_evidence.py"
#: How many evidence files the parity hook compared in this process (tests/test_verify_evidence.py reads it).
compared = [0]


def load() -> ModuleType:
    """The script as a module (loaded once per process)."""
    mod = sys.modules.get("verify_evidence_standalone")
    if mod is None:
        spec = importlib.util.spec_from_file_location("verify_evidence_standalone", SCRIPT)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


def verify(raw: bytes, key_line: str, witnesses: list[str] | None = None, quorum: int | None = None) -> dict[str, Any]:
    """The standalone verifier's result for an evidence (or consistency) file, a verifier key line and witnesses."""
    return load().verify(raw, key_line, witnesses, quorum)  # type: ignore[no-any-return]


def parity(original: Callable[..., Any]) -> Callable[..., Any]:
    """``check_evidence`` that also runs the standalone verifier on the same file and key and asserts the same
    verdict (re-simulation aside: the verifier does not replay games)."""

    def check_evidence(
        raw: bytes, verifier: Any, environments_dir: Any = None, witnesses: Any = (), quorum: Any = None
    ) -> Any:
        rep = original(raw, verifier, environments_dir, witnesses, quorum)
        lines = [sn.verifier_key(w.name, w.public, sn.COSIGNATURE_V1) for w in witnesses]
        theirs = verify(raw, sn.verifier_key(verifier.name, verifier.public), lines, quorum)
        ours = rep.ok or (rep.error or "").startswith("re-simulation:")
        assert theirs["ok"] == ours, f"ledger check: {rep.error}; standalone verifier: {theirs['error']}"
        if ours:
            assert (theirs["events"], theirs["checkpoint_size"]) == (rep.events, rep.checkpoint_size)
        compared[0] += 1
        return rep

    check_evidence.__wrapped_original__ = original  # type: ignore[attr-defined]
    return check_evidence
