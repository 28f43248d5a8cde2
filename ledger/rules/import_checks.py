"""The audit's import check: what ``ledger import`` could not read or could not know, for imported cards. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ledger.domain.events import ActionsInferred, AnyEvent, LinesSkipped, RecordingImported
from ledger.domain.projection import CardState


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


#: A file is refused when this share of its lines (or more) is not in the recording's shape: one bad line in a
#: long recording is a damaged line, a quarter of them is a file of something else.
BAD_SHARE = 4


def not_a_recording(first_bad: bool, bad: int, good: int) -> str | None:
    """Why a file is no recording (its first line is not a recording line, or too many are not), else None.

    Lines that are not JSON and JSON lines of another shape count alike.
    """
    if first_bad:
        return "its first line is not a recording line"
    if bad and bad * BAD_SHARE >= bad + good:
        return f"{bad} of its {bad + good} lines are not recording lines (one in {BAD_SHARE} or more)"
    return None


def compare_plays(held: CardState, imported: CardState, guids: set[str], *, resets: bool = True) -> list[str]:
    """Where the plays of ``guids`` differ between the card the ledger holds and the one a recording makes.

    Per game and guid: the number of plays, then each play's actions, levels completed and state (and resets when
    the recording tells them). Empty when they agree.
    """
    out: list[str] = []
    fields = ("actions", "levels_completed", "state") + (("resets",) if resets else ())
    for game_id in sorted(set(held.games) | set(imported.games)):
        for guid in sorted(guids):
            a = [p for p in held.games.get(game_id, []) if p.guid == guid]
            b = [p for p in imported.games.get(game_id, []) if p.guid == guid]
            if not a and not b:
                continue
            if len(a) != len(b):
                out.append(f"{game_id} {guid}: {len(a)} play(s) on the card, {len(b)} in the recording")
                continue
            for i, (pa, pb) in enumerate(zip(a, b, strict=True), 1):
                for f in fields:
                    va, vb = getattr(pa, f), getattr(pb, f)
                    if va != vb:
                        out.append(f"{game_id} {guid} play {i}: {f} {va!r} on the card, {vb!r} in the recording")
    return out
