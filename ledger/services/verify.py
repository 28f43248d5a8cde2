"""Verification of the whole log: every link of every stream's hash chain, recomputed from the stored bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from ledger.core import chain
from ledger.core.events import decode, type_of
from ledger.storage.store import APPEND_ONLY_TRIGGERS, Store


@dataclass
class StreamCheck:
    """The chain of one stream: its head and the first problem found, if any."""

    stream: str
    events: int = 0
    version: int = 0
    head: str = chain.GENESIS
    error: str | None = None


@dataclass
class VerifyReport:
    """The result of :func:`verify_ledger`."""

    events: int = 0
    streams: list[StreamCheck] = field(default_factory=list)
    missing_triggers: list[str] = field(default_factory=list)
    expected_triggers: list[str] = field(default_factory=list)
    revision: str | None = None
    head_revision: str | None = None
    head: str = ""

    @property
    def errors(self) -> list[str]:
        """Every problem, one line each."""
        out = [f"{s.stream}: {s.error}" for s in self.streams if s.error]
        out += [f"append-only trigger missing: {t}" for t in self.missing_triggers]
        if self.revision != self.head_revision:
            out.append(f"schema at revision {self.revision}, migrations are at {self.head_revision}")
        return out

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        """The stable ``ledger verify --json`` shape (documented in the README)."""
        return {
            "ok": self.ok,
            "events": self.events,
            "streams": len(self.streams),
            "head": self.head,
            "revision": self.revision,
            "head_revision": self.head_revision,
            "migrations_at_head": self.revision == self.head_revision,
            "triggers": {"expected": self.expected_triggers, "missing": self.missing_triggers},
            "chains_ok": not any(s.error for s in self.streams),
            "errors": self.errors,
            "stream_checks": [
                {"stream": s.stream, "events": s.events, "version": s.version, "head": s.head, "error": s.error}
                for s in self.streams
            ],
        }

    def summary(self) -> str:
        """One line: ``OK: ...`` or ``FAILED: ...``."""
        bad_chains = sum(1 for s in self.streams if s.error)
        chains = "every chain verified" if not bad_chains else f"{bad_chains} broken chain(s)"
        triggers = (
            "append-only triggers present"
            if not self.missing_triggers
            else f"{len(self.missing_triggers)} append-only trigger(s) missing"
        )
        at_head = "head" if self.revision == self.head_revision else f"migrations are at {self.head_revision}"
        return (
            f"{'OK' if self.ok else 'FAILED'}: {self.events} events in {len(self.streams)} streams, {chains}, "
            f"{triggers}, schema {self.revision} ({at_head})"
        )


def check_event(
    check: StreamCheck,
    version: int,
    type_: str,
    body: bytes,
    prev_hash: str,
    hash_: str,
    *,
    ts: str | None = None,
) -> None:
    """Advance ``check`` by one stored event, recording the first problem.

    ``ts`` is the row's ``ts`` column: it is not hashed (the body's own ts is), so it must equal the body's.
    """
    if check.error:
        return
    check.events += 1
    if version != check.version + 1:
        check.error = f"version {version} follows version {check.version} (an event is missing or moved)"
        return
    if prev_hash != check.head:
        check.error = f"version {version}: prev_hash does not link to version {check.version}"
        return
    if chain.event_hash(prev_hash, check.stream, version, type_, body) != hash_:
        check.error = f"version {version}: hash does not match the stored bytes (event changed)"
        return
    try:
        ev = decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        check.error = f"version {version}: body does not decode: {e}"
        return
    if type_of(ev) != type_:
        check.error = f"version {version}: type column {type_!r} but body is {type_of(ev)!r}"
        return
    if ts is not None and _ts_differs(ts, ev.ts):
        check.error = f"version {version}: ts column {ts!r} differs from the event's ts {ev.ts.isoformat()}"
        return
    check.version = version
    check.head = hash_


def _ts_differs(column: str, ts: datetime) -> bool:
    try:
        return datetime.fromisoformat(column) != ts
    except ValueError:
        return True


def verify_ledger(store: Store, *, progress: object = None) -> VerifyReport:
    """Walk every event in ``seq`` order and check each stream's chain link by link."""
    report = VerifyReport()
    checks: dict[str, StreamCheck] = {}
    for row in store.scan():
        c = checks.get(row.stream)
        if c is None:
            c = checks[row.stream] = StreamCheck(row.stream)
        check_event(c, row.version, row.type, row.body, row.prev_hash, row.hash, ts=row.ts)
        report.events += 1
        if progress is not None:
            progress(1)  # type: ignore[operator]
    report.streams = list(checks.values())
    report.missing_triggers = store.missing_triggers()
    report.expected_triggers = list(APPEND_ONLY_TRIGGERS[store.dialect])
    report.revision = store.revision()
    report.head_revision = store.head_revision()
    report.head = chain.ledger_head((s.stream, s.version, s.head) for s in report.streams)
    return report
