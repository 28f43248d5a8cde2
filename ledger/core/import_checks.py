"""The audit's import check: what ``ledger import`` could not read or could not know, for imported cards. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ledger.core.events import ActionsInferred, AnyEvent, LinesSkipped, RecordingImported


def check_import(events: Iterable[AnyEvent]) -> tuple[str, str, dict[str, Any]] | None:
    """(status, message, details) for an imported card with skipped lines or inferred actions, else None.

    WARN when lines of its recordings were skipped (the card may be short of what the run did) or when lines of a
    harness recording could have been a level RESET as well as the action they were imported as (reset counts
    uncertain; every score-bearing number is exact); PASS otherwise.
    """
    files: set[str] = set()
    skipped: list[dict[str, Any]] = []
    undecided = 0
    unknown_resets: list[str] = []
    inferred = 0
    for e in events:
        t = type(e)
        if t is RecordingImported:
            files.add(e.file)  # type: ignore[union-attr]
        elif t is LinesSkipped:
            skipped.extend(
                {"file": e.file, "line": s.line, "reason": s.reason, "sha256": s.sha256, "bytes": s.size}  # type: ignore[union-attr]
                for s in e.lines  # type: ignore[union-attr]
            )
        elif t is ActionsInferred:
            inferred += e.inferred  # type: ignore[union-attr]
            undecided += len(e.undecided)  # type: ignore[union-attr]
            if not e.resets_known:  # type: ignore[union-attr]
                unknown_resets.append(e.file)  # type: ignore[union-attr]
    if not files or (not skipped and not inferred and not unknown_resets):
        # A toolkit import that read every line has nothing to add to the four checks.
        return None
    details = {
        "files": len(files),
        "skipped_lines": skipped,
        "inferred_actions": inferred,
        "undecided_lines": undecided,
    }
    parts = []
    if skipped:
        shown = "; ".join(f"{s['file']}:{s['line']} ({s['reason']})" for s in skipped[:3])
        more = f" (+{len(skipped) - 3} more)" if len(skipped) > 3 else ""
        parts.append(f"{len(skipped)} line(s) of its recordings were skipped at import: {shown}{more}")
    if unknown_resets:
        parts.append(
            f"imported without the game's code ({', '.join(sorted(set(unknown_resets)))}): resets are unknown, "
            f"{undecided} line(s) could have been a level RESET"
        )
    elif undecided:
        parts.append(f"{undecided} line(s) could have been a level RESET as well as the action imported")
    if parts:
        return "WARN", "; ".join(parts) + "; scores do not depend on resets", details
    what = f", {inferred} action(s) inferred by re-simulation" if inferred else ""
    return "PASS", f"every line of its {len(files)} recording(s) was imported{what}", details
