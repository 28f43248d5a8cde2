"""What a harness import reports beside the card: lines it skipped, read problems, the final scorecard line.

Split from :mod:`ledger.imports.importing_harness` so that each module reads in one sitting.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ledger.domain.events import SkippedLine
from ledger.formats.harness import HarnessRead
from ledger.formats.recordings import MAX_LISTED, Problem
from ledger.imports.import_cards import CardResult


def report_read(read: HarnessRead, done: int, problems: list[Problem], result: CardResult) -> None:
    """Add to ``problems`` and ``result`` what reading lines past ``done`` skipped or found impossible."""
    new_skips = [s for s in read.skipped if s.lineno > done]
    for s in new_skips[:MAX_LISTED]:
        kind = "not_json" if s.reason == "not JSON" else "wrong_type"
        problems.append(Problem(str(read.path), s.lineno, kind, f"{s.reason}: skipped"))  # type: ignore[arg-type]
    for ln, msg in [i for i in read.impossible if i[0] > done][:MAX_LISTED]:
        problems.append(Problem(str(read.path), ln, "impossible", f"{msg}: the harness cannot write it"))
    for ln, msg in [c for c in read.cuts if c[0] > done]:
        problems.append(Problem(str(read.path), ln, "cut_line", msg))
    if read.truncated_tail:
        problems.append(
            Problem(str(read.path), read.lines + 1, "truncated", "truncated last line (no newline): read next time")
        )
    for s in new_skips:
        result.skipped[s.reason] = result.skipped.get(s.reason, 0) + 1
    late = [s for s in read.after_close if s.lineno > done]
    if late:
        more = f" (lines {late[0].lineno} to {late[-1].lineno})" if len(late) > 1 else ""
        msg = f"{len(late)} frame line(s){more} {late[0].reason}"
        problems.append(Problem(str(read.path), late[0].lineno, "not_counted", msg))
        result.skipped["after the card's close"] = len(late)
    if read.side_lines and done == 0:
        result.skipped["side lines (not frames)"] = read.side_lines


def skipped_lines(read: HarnessRead, unreproduced: list[int], done: int) -> list[SkippedLine]:
    """The lines past ``done`` not imported (unreadable, after the card's close, or no action reproduces them), with
    their bytes' sha256."""
    kept = (*read.skipped, *read.after_close)
    out = [SkippedLine(s.lineno, s.reason, s.sha256, s.size) for s in kept if s.lineno > done]
    if unreproduced:
        wanted = {ln for ln in unreproduced if ln > done}
        with open(read.path, "rb") as f:
            for i, raw in enumerate(f, 1):
                if i in wanted:
                    body = raw.rstrip(b"\r\n")
                    out.append(SkippedLine(i, "no action reproduces it", hashlib.sha256(body).hexdigest(), len(body)))
    return sorted(out, key=lambda s: s.line)


def tail_sha256(path: Path, end: int) -> str:
    """The sha256 of the (up to) 4 KiB of ``path`` before offset ``end``: how a grown file is told from a new one."""
    with open(path, "rb") as f:
        start = max(0, end - 4096)
        f.seek(start)
        return hashlib.sha256(f.read(end - start)).hexdigest()


def cross_check(read: HarnessRead, doc: Any, method: str, problems: list[Problem]) -> None:
    """The final ``scorecard.get(game_id)`` line against the card: it is the toolkit's *first* run of the game on
    its card, which is another agent's when several played the game (then there is nothing to compare)."""
    final = read.final
    if not final or "actions" not in final:
        return
    guid = final.get("guid")
    runs = [r for env in doc.environments for r in env.runs if r.guid == guid]
    if not runs:
        return
    run = runs[0]
    fields = ["actions", "levels_completed", "state"] + (["resets"] if method != "frames" else [])
    diffs = [
        f"{k} {final.get(k)!r} (its scorecard line) vs {getattr(run, k)!r} (imported)"
        for k in fields
        if k in final and final.get(k) != getattr(run, k)
    ]
    if diffs:
        problems.append(Problem(str(read.path), read.final_lineno, "cross_check", "; ".join(diffs)))
    else:
        problems.append(Problem(str(read.path), read.final_lineno, "harness", "its final scorecard line agrees"))
