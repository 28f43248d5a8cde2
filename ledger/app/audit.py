"""The audit of one card (``ledger audit``): the checks that back a disputed score, in order (see docs/audit.md)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.app.card_rows import CardEvents, card_rows
from ledger.domain import document
from ledger.domain.events import ActionTaken, BaselineEntry, Numbered
from ledger.domain.projection import CardState
from ledger.domain.scoring import score_card
from ledger.resim.resimulate import ResimResult, resimulate
from ledger.rules.audit_checks import Check, Status, check_consistency, check_import, check_integrity, check_lifecycle
from ledger.rules.postmortem import PostMortem, postmortem
from ledger.rules.server import baselines_source, server_check
from ledger.rules.timeline import limits
from ledger.store.cards import apply_events


def stale_minutes(environ: Mapping[str, str] | None = None) -> int:
    """STALE_MINUTES as the toolkit reads it (default: this process's environment): default 15, clamped to 1..60."""
    return limits(os.environ if environ is None else environ)[0]


def max_open_minutes(environ: Mapping[str, str] | None = None) -> int:
    """MAX_OPEN_FOR_MINUTES as the toolkit reads it: default 4320 (3 days), clamped to 60..10080."""
    return limits(os.environ if environ is None else environ)[1]


def check_resimulation(
    events: Sequence[Numbered], environments_dir: str | os.PathLike[str] | None, decide: bool = False
) -> Check:
    """Replay the card's plays against the game code (``decide``: try every open candidate); FAIL only on mismatch."""
    open_actions = sum(1 for n in events if type(n.event) is ActionTaken and n.event.candidates)
    if environments_dir is None:
        details = _resim_details(ResimResult(open_actions=open_actions, searched=decide), None)
        if open_actions:
            return Check(
                "resimulation",
                "UNKNOWN",
                f"{open_actions} action(s) the recording did not decide (several actions give the same frames); "
                "give --environments DIR (the game files) to decide them against the game code",
                details,
            )
        return Check(
            "resimulation",
            "SKIP",
            "not run: give --environments DIR (the game files) to replay every action against the game code",
            details,
        )
    res = resimulate(events, environments_dir, decide=decide)
    return Check("resimulation", *_resim_verdict(res), _resim_details(res, environments_dir))


def _resim_details(res: ResimResult, environments_dir: str | os.PathLike[str] | None) -> dict[str, Any]:
    div = res.divergence
    return {
        "environments": None if environments_dir is None else os.fspath(environments_dir),
        "games": res.games,
        "skipped_games": res.skipped,
        "guids": res.guids,
        "plays": res.plays,
        "inputs": res.inputs,
        "default_seed_plays": res.default_seed_plays,
        "seeds_found": res.seeds_found,
        "undecided_actions": res.open_actions,
        "decided_actions": res.decided,
        "searched": res.searched,
        "reproduced_actions": res.reproduced,
        "error": res.error,
        "unknown": res.unknown,
        "divergence": None if div is None else dataclasses.asdict(div),
    }


def _resim_verdict(res: ResimResult) -> tuple[Status, str]:
    skipped = "; ".join(res.skipped.values())
    if res.unknown:
        return "UNKNOWN", res.unknown + (f"; not checked: {skipped}" if skipped else "")
    if res.divergence is not None:
        return "FAIL", f"first divergence at {res.divergence.message}"
    if res.error:
        return "UNKNOWN", f"not checked: {res.error}"
    if res.skipped and res.plays == 0:
        return "SKIP", f"no game of the card could be checked: {skipped}"
    notes = []
    if res.default_seed_plays:
        found = len(res.seeds_found)
        notes.append(
            f"{res.default_seed_plays} play(s) had no recorded seed and used the game's default"
            if not found
            else f"{res.default_seed_plays} play(s) had no recorded seed: the default reproduced "
            f"{res.default_seed_plays - found}, seed(s) {_seeds_text(res.seeds_found)} the others"
        )
    if res.open_actions and not res.searched:
        notes.append(
            f"{res.open_actions} action(s) the recording did not decide: the game reproduced every one along one "
            "path, taking the first action that fits each (the agent's last, then its most used); --decide tries "
            "the others too, to tell which ones the game decides"
        )
    elif res.open_actions:
        notes.append(
            f"{res.open_actions} action(s) the recording did not decide: the game decided {res.decided}"
            + (f", {res.still_open} fit either way (the same outcome)" if res.still_open else "")
        )
    if skipped:
        notes.append(f"not checked: {skipped}")
    tail = "".join(f"; {n}" for n in notes)
    msg = (
        f"{res.plays} play(s) on {res.guids} guid(s), {res.inputs} inputs replayed against the game code: "
        f"every state, levels_completed and derived event matches{tail}"
    )
    return "PASS", msg


def _seeds_text(found: Mapping[str, int]) -> str:
    return ", ".join(f"{s} (guid {g[:8]})" for g, s in sorted(found.items()))


@dataclass
class AuditReport:
    card_id: str
    head: str
    events: int
    checks: list[Check]
    card: CardState | None = None
    doc: document.ScorecardDoc | None = None
    postmortem: PostMortem | None = None
    #: The card's retraction, and the --environments folder given (`ledger audit` says both).
    retracted: dict[str, str] | None = None
    environments: str | os.PathLike[str] | None = None

    @property
    def ok(self) -> bool:
        return all(c.status != "FAIL" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "card_id": self.card_id,
            "ok": self.ok,
            "head": self.head,
            "events": self.events,
            "checks": [{"name": c.name, "status": c.status, "message": c.message, **c.details} for c in self.checks],
            "postmortem": self.postmortem,
            "retracted": self.retracted,
        }

    def lines(self) -> list[str]:
        from ledger.rules.text import postmortem_text

        out = [
            f"audit of card {self.card_id}: {self.events} events, card head {self.head} (this card's last event; "
            "`ledger verify` prints the ledger's head)"
        ]
        if self.retracted is not None:
            out.append(f"NOTE this card was {self.retracted['note']}")
        out += [f"{c.status} {c.name}: {c.message}" for c in self.checks]
        if self.postmortem is not None:
            out += ["", postmortem_text(self.postmortem)]
        return out

    @property
    def usage_error(self) -> str | None:
        """A folder that holds none of the card's games checked nothing: bad usage (the JSON says it already)."""
        resim = next(c for c in self.checks if c.name == "resimulation")
        if self.ok and self.environments is not None and resim.status == "SKIP":
            return f"{self.environments} holds none of the games of card {self.card_id}"
        return None

    @property
    def exit_code(self) -> int:
        return 1 if not self.ok else 2 if self.usage_error else 0


def _with_summary_row(
    ledger: Any, card: CardState, version: int, baselines: Mapping[str, BaselineEntry], consistency: Check
) -> Check:
    """The consistency check, failed when the card's cards-summary row is not the one a replay makes."""
    from ledger.store import summary as s

    if not ledger.store.has_table(s.SUMMARY):
        return consistency
    sql = s.SELECT_ROWS_SQL + " WHERE card_id = ?"
    try:
        got = s.query(ledger.store, sql, [card.card_id])
    except s.SummaryUnbound:
        # The summary no longer follows the log (verify says so); this card's row is compared as it is stored.
        got = ledger.store.rows(sql, [card.card_id])
    want = s.row_of(card, version, s.card_score(card, baselines))
    have = s.SummaryRow(*got[0]) if got else None
    if have == want:
        return consistency
    if have is None:
        said = "the cards summary has no row for it"
    else:
        fields = [f for f in s.SummaryRow.__struct_fields__ if getattr(have, f) != getattr(want, f)]
        said = (
            "its row in the cards summary differs from a replay ("
            + ", ".join(f"{f} {getattr(have, f)!r}, log {getattr(want, f)!r}" for f in fields)
            + ")"
        )
    return _failed(consistency, said)


def _failed(consistency: Check, said: str) -> Check:
    message = said if consistency.status == "PASS" else f"{consistency.message}; {said}"
    return dataclasses.replace(consistency, status="FAIL", message=message)


def audit_card(
    ledger: Any,
    card_id: str,
    *,
    environments: str | os.PathLike[str] | None = None,
    expect_head: str | None = None,
    decide: bool = False,
) -> AuditReport:
    from ledger.app.verify import card_head_check
    from ledger.errors import UnknownBaselines

    # A page of rows at a time, for every check: a long session's card is more than the audit may hold.
    rows = card_rows(ledger, card_id)
    integrity, missing = check_integrity(card_id, rows, expect_head)
    integrity = card_head_check(ledger, integrity, expect_head)  # a ledger head is not a tampered card
    events = CardEvents(ledger.store, rows.stream, rows.read, missing, rows.page)
    complete = not missing
    card = apply_events(card_id, (n.event for n in events))
    baselines: Mapping[str, BaselineEntry] | None
    problem = None
    try:
        baselines = ledger.card_baselines(card)
    except UnknownBaselines as e:
        baselines, problem = None, str(e)
    consistency = check_consistency(
        card_id,
        events,
        baselines,
        cached=ledger.cached_card(card_id),
        complete=complete,
        baselines_problem=problem,
        folded=card,
        rest_answer=card.captured_via == "serve",
    )
    if complete and baselines is not None and integrity.status != "FAIL":
        consistency = _with_summary_row(ledger, card, rows.read, baselines, consistency)
    # A cached state that was compared is said above; one reads ignore (not bound, changed by hand) is said here.
    compared = consistency.details.get("cached_projection") is not None
    cache = ledger.repository.snapshot_problem(card_id) if complete and not compared else None
    if cache is not None:
        consistency = _failed(consistency, f"its cached state {cache}")
    resim = check_resimulation(events, environments, decide)
    lifecycle = check_lifecycle(events, stale_minutes(), max_open_minutes())
    doc = score_card(card, baselines) if baselines is not None else None
    checks = [integrity, consistency, resim, lifecycle]
    imported = check_import(n.event for n in events)
    if imported is not None:  # imported cards only: what the import skipped or could not know
        checks.append(Check("import", imported[0], imported[1], imported[2]))  # type: ignore[arg-type]
    ours = json.loads(document.to_json(doc)) if doc is not None else None
    server = server_check(
        ours,
        card.server_document,
        card.requests_failed,
        on_server=card.server is not None,
        baselines_source=baselines_source(card),
    )
    if server is not None:  # cards played against an ARC server (ONLINE/COMPETITION capture)
        checks.append(Check("server", server[0], server[1]))  # type: ignore[arg-type]
    return AuditReport(
        card_id=card_id,
        head=rows.last_hash,
        events=rows.read,
        checks=checks,
        card=card,
        doc=doc,
        postmortem=postmortem(card, doc) if doc is not None else None,
        environments=environments,
    )


def audit_outcome(
    ledger: Any,
    ref: str,
    *,
    environments: str | os.PathLike[str] | None = None,
    expect_head: str | None = None,
    decide: bool = False,
) -> AuditReport:
    """The audit of the card ``ref`` names (an id or a unique prefix), with its retraction."""
    from ledger.app.retract import retraction_of

    card_id = ledger.resolve_card(ref)
    rep = audit_card(ledger, card_id, environments=environments, expect_head=expect_head, decide=decide)
    rep.retracted = retraction_of(ledger, card_id)
    return rep
