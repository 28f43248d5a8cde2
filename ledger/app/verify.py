"""Verification of the whole log (every chain link, from the stored bytes) and each derived table against a rebuild."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import islice
from typing import Any

import msgspec

from ledger.domain import chain
from ledger.domain.events import CARD_STREAM, decode, type_of
from ledger.errors import StoreError
from ledger.store.base import APPEND_ONLY_TRIGGERS, LogStore, StoredEvent, head_tables


@dataclass
class StreamCheck:
    stream: str
    events: int = 0
    version: int = 0
    head: str = chain.GENESIS
    error: str | None = None


@dataclass
class VerifyReport:
    events: int = 0
    streams: list[StreamCheck] = field(default_factory=list)
    missing_triggers: list[str] = field(default_factory=list)
    #: Tables the schema's revision has that the database lacks (dropped by hand: a rebuild cannot write them).
    missing_tables: list[str] = field(default_factory=list)
    expected_triggers: list[str] = field(default_factory=list)
    revision: str | None = None
    head_revision: str | None = None
    head: str = ""
    summary_differences: list[str] = field(default_factory=list)
    snapshot_differences: list[str] = field(default_factory=list)
    tree_problem: str | None = None
    copy_mark_differences: list[str] = field(default_factory=list)
    card_differences: list[str] = field(default_factory=list)
    #: 1 when every snapshot was compared; n when one in n was (``--quick``).
    snapshot_sample: int = 1
    snapshots_checked: int = 0
    #: The --expect-head given and its check (status, message), and the --checkpoint check, when asked for.
    expected: str | None = None
    head_check: tuple[str, str] | None = None
    checkpoint: Any = None

    @property
    def errors(self) -> list[str]:
        out = [f"{s.stream}: {s.error}" for s in self.streams if s.error]
        out += [f"append-only trigger missing: {t}" for t in self.missing_triggers]
        out += [
            f"table missing: {t} (schema {self.revision} has it; `ledger copy --to NEW` copies the log into a new "
            "ledger with every table)"
            for t in self.missing_tables
        ]
        out += [f"cards summary: {d}" for d in self.summary_differences]
        out += [f"card {d}" for d in self.card_differences]
        out += [f"cached card state: {d}" for d in self.snapshot_differences]
        out += [f"Merkle tree: {self.tree_problem}"] if self.tree_problem else []
        out += [f"copy mark: {d}" for d in self.copy_mark_differences]
        if self.revision != self.head_revision:
            out.append(f"schema at revision {self.revision}, migrations are at {self.head_revision}")
        return out

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        out = {
            "ok": self.ok,
            "events": self.events,
            "streams": len(self.streams),
            "head": self.head,
            "revision": self.revision,
            "head_revision": self.head_revision,
            "migrations_at_head": self.revision == self.head_revision,
            "triggers": {"expected": self.expected_triggers, "missing": self.missing_triggers},
            "chains_ok": not any(s.error for s in self.streams),
            "derived": {
                "cards": self.card_differences,
                "summary": self.summary_differences,
                "snapshots": self.snapshot_differences,
                "snapshots_checked": self.snapshots_checked,
                "snapshot_sample": self.snapshot_sample,
                "tree": self.tree_problem,
                "copy_marks": self.copy_mark_differences,
            },
            "errors": self.errors,
            "stream_checks": self.streams,
        }
        if self.head_check is not None:
            out["expected_head"] = {"hash": self.expected, "status": self.head_check[0], "message": self.head_check[1]}
        if self.checkpoint is not None:
            out["checkpoint"] = self.checkpoint.to_json()
        return out

    def summary(self) -> str:
        bad_chains = sum(1 for s in self.streams if s.error)
        chains = "every chain verified" if not bad_chains else f"{bad_chains} broken chain(s)"
        triggers = (
            "append-only triggers present"
            if not self.missing_triggers
            else f"{len(self.missing_triggers)} append-only trigger(s) missing"
        )
        at_head = "head" if self.revision == self.head_revision else f"migrations are at {self.head_revision}"
        derived = sum(
            map(len, (self.summary_differences, self.snapshot_differences, self.copy_mark_differences))
        ) + bool(self.tree_problem)
        closes = f", {len(self.card_differences)} card(s) differ from their closes" if self.card_differences else ""
        what = "derived tables match the log" if not derived else f"{derived} derived row(s) differ from the log"
        if self.missing_tables:
            what = f"{len(self.missing_tables)} table(s) missing, {what}"
        if self.snapshot_sample > 1:
            what += f" (cached card states sampled: 1 in {self.snapshot_sample})"
        return (
            f"{'OK' if self.ok else 'FAILED'}: {self.events} events in {len(self.streams)} streams, {chains}{closes}, "
            f"{triggers}, {what}, schema {self.revision} ({at_head})"
        )

    def lines(self) -> list[str]:
        out = [f"FAIL {err}" for err in self.errors]
        out.append(self.summary())
        out.append(f"ledger head {self.head}  (all streams; keep it, check later with `ledger verify --expect-head`)")
        if self.head_check is not None:
            status, message = self.head_check
            out.append(f"{'NOTE' if status == 'CARD' else status} expected head: {message}")
        if self.checkpoint is not None:
            out.append(self.checkpoint.line())
        return out

    @property
    def exit_code(self) -> int:
        status = self.head_check[0] if self.head_check is not None else None
        if not self.ok or status == "FAIL" or (self.checkpoint is not None and not self.checkpoint.ok):
            return 1
        return 2 if status == "CARD" else 0


def check_event(check: StreamCheck, row: StoredEvent) -> None:
    """Advance ``check`` by one stored event; the ``ts`` column is not hashed (the body's is), so it must match."""
    if check.error:
        return
    check.events += 1
    version, type_, body, ts = row.version, row.type, row.body, row.ts
    broken = chain.check_link(check.stream, row, check.version, check.head)
    if broken is not None:
        if broken.kind == "column":
            where = f"version {version}" if isinstance(version, int) else f"the event after version {check.version}"
            check.error = f"{where} (seq {row.seq!r}): {broken.message}"
        else:
            check.error = broken.message if broken.kind == "gap" else f"version {version}: {broken.message}"
        return
    try:
        ev = decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        check.error = f"version {version}: body does not decode: {e}"
        return
    if type_of(ev) != type_:
        check.error = f"version {version}: type column {type_!r} but body is {type_of(ev)!r}"
        return
    if _ts_differs(ts, ev.ts):
        check.error = f"version {version}: ts column {ts!r} differs from the event's ts {ev.ts.isoformat()}"
        return
    check.version = version
    check.head = row.hash


def _ts_differs(column: str, ts: datetime) -> bool:
    try:
        return datetime.fromisoformat(column) != ts
    except ValueError:
        return True


#: ``verify --quick`` compares one cached card state in this many with a replay.
QUICK_SAMPLE = 10
#: Lines listed per derived table before "+N more".
LIMIT = 10


def verify_ledger(
    store: LogStore, *, progress: Callable[[int], None] | None = None, quick: bool = False
) -> VerifyReport:
    """Check each stream's chain in ``seq`` order, then every derived table against a rebuild."""
    from ledger.store.summary import SUMMARY, SummaryUnbound, check
    from ledger.store.tracking import TABLE, marks

    report = VerifyReport(snapshot_sample=QUICK_SAMPLE if quick else 1)
    checks: dict[str, StreamCheck] = {}
    tracked = store.has_table(TABLE)
    copied = marks(store) if tracked else []
    wanted = {h for _, _, h, _ in copied}
    seen: set[str] = set()
    for row in store.scan():
        if row.hash in wanted:
            seen.add(row.hash)
        # A stream column of another type (a tampered row) is a stream of its own, named as text, that fails.
        key = row.stream if isinstance(row.stream, str) else repr(row.stream)
        c = checks.get(key)
        if c is None:
            c = checks[key] = StreamCheck(key)
        if key is not row.stream and not c.error:
            c.events += 1
            c.error = f"seq {row.seq!r}: {chain.stream_problem(row.stream)}"
        else:
            check_event(c, row)
        report.events += 1
        if progress is not None:
            progress(1)
    report.streams = list(checks.values())
    report.missing_triggers = store.missing_triggers()
    report.expected_triggers = list(APPEND_ONLY_TRIGGERS[store.dialect])
    report.revision = store.revision()
    report.head_revision = store.head_revision()
    if report.revision == report.head_revision:
        report.missing_tables = [t for t in head_tables() if not store.has_table(t)]
    report.head = chain.ledger_head((s.stream, s.version, s.head) for s in report.streams)
    if store.has_table(SUMMARY) and "card_summary_keys" not in report.missing_tables:
        # A card whose chain is broken is reported as such; its summary is compared only once the chain holds.
        # A second read, in the order of the (stream, version) index, one card at a time: memory stays bounded.
        broken = frozenset(s.stream[len(CARD_STREAM) :] for s in report.streams if s.error)
        try:
            report.summary_differences = check(store, skip=broken)[1]
        except SummaryUnbound as e:
            report.summary_differences = [str(e)]
    report.card_differences = _closes(store, [s.stream for s in report.streams if not s.error])
    report.snapshot_differences, report.snapshots_checked = _snapshots(store, report.snapshot_sample)
    report.tree_problem = _tree(store)
    report.copy_mark_differences = [
        f"from {source}: its last event (seq {seq} there, hash {h}) is not in this ledger"
        for source, seq, h, _ in copied
        if h not in seen
    ][:LIMIT]
    return report


def _closes(store: LogStore, streams: list[str]) -> list[str]:
    from ledger.domain.baselines import as_map
    from ledger.domain.events import BaselinesRecorded, Numbered, baselines_stream
    from ledger.rules.audit_checks import check_consistency
    from ledger.store.cards import apply_events

    sets: dict[str, dict[str, Any] | None] = {}
    out: list[str] = []
    for stream in streams:
        if not stream.startswith(CARD_STREAM):
            continue
        card_id = stream[len(CARD_STREAM) :]
        try:
            events = [Numbered(r.version, r.seq, decode(r.body)) for r in store.read_stream(stream)]
        except (msgspec.DecodeError, msgspec.ValidationError, TypeError):
            continue  # the chain walk already said which event does not decode
        card = apply_events(card_id, (n.event for n in events))
        set_id = card.baselines_id
        if set_id is not None and set_id not in sets:
            bodies = store.read_bodies(baselines_stream(set_id))[0]
            rec = decode(bodies[0]) if bodies else None
            sets[set_id] = as_map(rec.entries) if isinstance(rec, BaselinesRecorded) else None
        baselines = sets.get(set_id) if set_id is not None else {}
        problem = None if baselines is not None else f"its baseline set {set_id} is not in this ledger"
        got = check_consistency(
            card_id, events, baselines, baselines_problem=problem, folded=card, rest_answer=card.captured_via == "serve"
        )
        if got.status == "FAIL":
            out.append(f"{card_id}: {got.message}")
            if len(out) == LIMIT:
                break
    return out


def _snapshots(store: LogStore, every: int) -> tuple[list[str], int]:
    from ledger.store.cards import CardRepository

    if not store.has_table("snapshots"):
        return [], 0  # a ledger at the first revision, read as it is: it has no cached states

    repo = CardRepository(store)
    found = repo.snapshot_problems(every=every)
    out = list(islice(found, LIMIT))
    more = sum(1 for _ in found)
    return out + ([f"+{more} more"] if more else []), repo.snapshots_checked


def _tree(store: LogStore) -> str | None:
    from ledger.store.tracking import READ_SQL, TABLE, TREE

    if not store.has_table(TABLE):
        return None
    seq, tracked, size = store.rows(READ_SQL, [TREE])[0]
    if not int(size):
        return None  # never built: a checkpoint or a proof builds it
    held = store.rows("SELECT hash FROM events WHERE seq = ?", [seq])
    if not held or held[0][0] != tracked:
        return f"the tree's position names event seq {seq} with hash {tracked}, which the log does not hold"
    from ledger.store.merkle_store import TreeStore, tree_problem

    tree = TreeStore(store)
    try:
        return tree_problem(tree, tree.stored_head())
    except StoreError as e:
        return str(e)


def check_expected_head(report: VerifyReport, expected: str) -> tuple[str, str]:
    """Compare the ledger head with one the user kept: ``PASS``, ``FAIL``, or ``CARD`` (a stream's own head)."""
    if expected == report.head:
        return "PASS", f"the ledger's head is still {expected}: no event was added, removed or changed since"
    for s in report.streams:
        if s.head == expected:
            what, hint = s.stream, "a stream's head"
            if s.stream.startswith(CARD_STREAM):
                card = s.stream[len(CARD_STREAM) :]
                what, hint = f"card {card}", f"check it with `ledger audit {card} --expect-head HASH`"
            return (
                "CARD",
                f"{expected} is the head of {what} (its last event, version {s.version}, as `ledger audit` prints "
                f"it), not the ledger's head: {hint}",
            )
    return (
        "FAIL",
        f"the ledger's head is now {report.head}, not the expected {expected}: events were added, removed or "
        "changed since that head was printed (audit each card with its own head to see which)",
    )


def card_head_check(ledger: Any, integrity: Any, expected: str | None) -> Any:
    """The audit's integrity check, where a ``--expect-head`` that is the ledger's head is not a tampered card."""
    details = integrity.details
    if expected is None or expected == details.get("head") or details.get("expected_head_version") is not None:
        return integrity
    streams = ledger.store.streams()
    if expected == chain.ledger_head((s.stream, s.version, s.head) for s in streams):
        note = (
            f"the expected head {expected} is the ledger's head (as `ledger verify` prints it), not this card's, "
            "and the whole ledger still ends there: nothing was added, removed or changed anywhere since"
        )
        if details.get("problems"):
            return replace(integrity, message=f"{integrity.message}; {note}")
        n = details.get("events", 0)
        return replace(
            integrity,
            status="PASS",
            message=f"{n} events, versions 1..{n}, hash chain unbroken; card head {details.get('head')}; {note}",
            details={**details, "expected_head_is_ledger_head": True},
        )
    hint = (
        "; if that hash came from `ledger verify`, it is a ledger head, not a card's: check it with "
        "`ledger verify --expect-head`"
    )
    return replace(integrity, message=integrity.message + hint)


def verify_outcome(report: VerifyReport, expect_head: str | None, checkpoint: Any) -> VerifyReport:
    """The report with the --expect-head and --checkpoint checks asked for: what `ledger verify` prints."""
    report.expected, report.checkpoint = expect_head, checkpoint
    report.head_check = check_expected_head(report, expect_head) if expect_head is not None else None
    return report
