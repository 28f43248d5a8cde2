"""``ledger copy``: every event, with its hash, from one ledger into another (only ``seq`` is new). Idempotent: each
stream continues from the destination's head; a diverged stream stops the copy before any write, except a baseline set
or label history recorded on both sides. A finished copy is remembered at the destination."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger.domain.events import BASELINES_STREAM, LABEL_STREAM, BaselinesRecorded, LabelSet, decode
from ledger.errors import HistoryConflict, SameLedger
from ledger.ledger import Ledger
from ledger.store.backends import open_store
from ledger.store.base import CopyBatch, Durability, LogStore, StoredEvent
from ledger.store.read_ahead import Put, ReadAhead
from ledger.store.tracking import read_mark, write_mark

#: Rows per destination transaction: fewer, larger batches copy faster, but each holds the destination's append lock.
BATCH = 20_000


@dataclass(frozen=True, slots=True)
class CopyPlan:
    after_version: dict[str, int]
    events: int
    new_streams: int
    extended_streams: int
    current_streams: int
    start_seq: int
    until_seq: int
    until_hash: str | None = None


@dataclass(frozen=True, slots=True)
class CopyReport:
    source: str
    destination: str
    events: int
    new_streams: int
    extended_streams: int
    current_streams: int
    seconds: float
    summary_seconds: float = 0.0
    #: The whole command's: opening both ledgers (the destination's schema), reading every stream's head on both
    #: sides and comparing them, then the copy; set by the caller that timed it.
    total_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.destination,
            "events": self.events,
            "new_streams": self.new_streams,
            "extended_streams": self.extended_streams,
            "current_streams": self.current_streams,
            "seconds": round(self.total_seconds, 3),
            "copy_seconds": round(self.seconds, 3),
            "summary_seconds": round(self.summary_seconds, 3),
        }

    def lines(self) -> list[str]:
        total = self.total_seconds
        if self.events == 0:
            return [
                f"nothing to copy: {self.destination} already holds every event of {self.source} "
                f"(checked in {total:.2f} s)"
            ]
        rate = self.events / total if total > 0 else float("inf")
        return [
            f"copied {self.events} events ({self.new_streams} new streams, {self.extended_streams} extended, "
            f"{self.current_streams} already up to date) from {self.source} to {self.destination} "
            f"in {total:.2f} s, the whole command ({rate:,.0f} events/s; the copy itself {self.seconds:.2f} s, then "
            f"the cards summary caught up in {self.summary_seconds:.2f} s)"
        ]


def open_source(path_or_url: str) -> LogStore:
    return open_store(path_or_url, readonly=True)


def open_destination(path_or_url: str, *, durability: Durability = "normal") -> LogStore:
    return Ledger.open(path_or_url, durability=durability).store


def plan_copy(src: LogStore, dst: LogStore) -> CopyPlan:
    """Compare every stream of ``src`` with ``dst``; raise :class:`HistoryConflict` if any stream diverges."""
    if src.same_database(dst):
        raise SameLedger(f"the source and the destination are the same ledger ({src.describe()})")
    until = src.max_seq()  # events appended to the source while copying are left for the next copy
    last = ev.hash if (ev := _at_seq(src, until)) is not None else None
    mark = read_mark(dst, src.describe())
    if mark is not None and last is not None and mark[:2] == (until, last):
        current: int | None = mark[2]  # the source's last event is the one the last finished copy ended on
    else:
        current = _all_current(src, dst)
    if current is not None:  # nothing to copy
        return CopyPlan({}, 0, 0, 0, current, until + 1, until, last)
    there = {s.stream: s for s in dst.streams()}
    after: dict[str, int] = {}
    events = new = extended = current = 0
    start = until + 1
    conflicts = []
    for s in src.streams():
        if s.first_seq > until:
            continue
        d = there.get(s.stream)
        if d is None:
            after[s.stream] = 0
            events += s.count
            new += 1
            start = min(start, s.first_seq)
            continue
        if d.version >= s.version:
            # Up to date, or the destination is ahead: fine if it holds the source's head at that version.
            mine = d.head if d.version == s.version else _hash_at(dst, s.stream, s.version)
            if mine == s.head or _same_baseline_set(src, dst, s.stream) or _same_label_history(src, dst, s.stream):
                current += 1
            else:
                conflicts.append(_conflict(s.stream, s.version, mine, s.head))
            continue
        theirs = src.event_at(s.stream, d.version)
        if theirs is None or theirs.hash != d.head:
            conflicts.append(_conflict(s.stream, d.version, d.head, theirs.hash if theirs else None))
            continue
        after[s.stream] = d.version
        events += s.version - d.version
        extended += 1
        start = min(start, theirs.seq + 1)
    if conflicts:
        shown = "; ".join(conflicts[:3]) + (f" (+{len(conflicts) - 3} more)" if len(conflicts) > 3 else "")
        raise HistoryConflict(
            f"{dst.describe()} already holds a different history for {len(conflicts)} stream"
            f"{'s' if len(conflicts) != 1 else ''} of {src.describe()}: {shown}. Nothing was copied."
        )
    return CopyPlan(after, events, new, extended, current, start, until, last)


def copy_ledger(
    src: LogStore,
    dst: LogStore,
    *,
    plan: CopyPlan | None = None,
    progress: Callable[[int], None] | None = None,
    batch: int = BATCH,
) -> CopyReport:
    """Copy every event ``dst`` lacks, a transaction a batch (an interrupted copy leaves ``dst`` consistent)."""
    t0 = time.perf_counter()
    plan = plan if plan is not None else plan_copy(src, dst)
    copied = 0
    if plan.events:
        with _prepared_batches(src, dst, plan, batch) as batches:
            for prepared in batches:
                copied += dst.insert_copied(prepared)
                if progress is not None:
                    progress(len(prepared.rows))
    seconds = time.perf_counter() - t0
    if copied:
        # The copy folds no summary per batch: it is caught up once, then the planner's statistics are taken.
        dst.catch_up_summary()
        dst.analyze()
    if plan.until_hash is not None and _holds(src, dst, plan.until_seq, plan.until_hash):
        # A mark names an event this ledger holds (``verify`` checks it): a source that ends on a baseline set or
        # label the destination keeps in its own version is planned in full next time instead.
        streams = plan.new_streams + plan.extended_streams + plan.current_streams
        write_mark(dst, src.describe(), plan.until_seq, plan.until_hash, streams)
    return CopyReport(
        source=src.describe(),
        destination=dst.describe(),
        events=copied,
        new_streams=plan.new_streams,
        extended_streams=plan.extended_streams,
        current_streams=plan.current_streams,
        seconds=seconds,
        summary_seconds=time.perf_counter() - t0 - seconds if copied else 0.0,
    )


def _prepared_batches(src: LogStore, dst: LogStore, plan: CopyPlan, batch: int) -> ReadAhead[CopyBatch]:
    """The batches to copy, read ahead in a second thread while the destination writes (drivers release the GIL)."""

    def produce(put: Put[CopyBatch]) -> None:
        buf: list[StoredEvent] = []
        for row in src.scan(after_seq=plan.start_seq - 1, batch=max(batch, 10_000)):
            if row.seq > plan.until_seq:
                break
            after = plan.after_version.get(row.stream)
            if after is None or row.version <= after:
                continue
            buf.append(row)
            if len(buf) >= batch:
                if not put(dst.prepare_copied(buf)):
                    return
                buf = []
        if buf:
            put(dst.prepare_copied(buf))

    return ReadAhead(produce, name="ledger-copy-read", ahead=2)


def _all_current(src: LogStore, dst: LogStore) -> int | None:
    from ledger.store.summary import stream_heads

    mine = stream_heads(src)
    theirs = stream_heads(dst)
    if all(theirs.get(stream) == head for stream, head in mine.items()):
        return len(mine)
    return None


def _same_baseline_set(src: LogStore, dst: LogStore, stream: str) -> bool:
    if not stream.startswith(BASELINES_STREAM):
        return False
    a, b = src.read_stream(stream), dst.read_stream(stream)
    if len(a) != 1 or len(b) != 1:
        return False
    ea, eb = decode(a[0].body), decode(b[0].body)
    return (
        isinstance(ea, BaselinesRecorded)
        and isinstance(eb, BaselinesRecorded)
        and ea.set_id == eb.set_id == stream[len(BASELINES_STREAM) :]
        and ea.entries == eb.entries
    )


def _same_label_history(src: LogStore, dst: LogStore, stream: str) -> bool:
    if not stream.startswith(LABEL_STREAM):
        return False

    def sets(store: LogStore) -> list[tuple[str, str]]:
        evs = [decode(r.body) for r in store.read_stream(stream)]
        return [(e.label, e.set_id) for e in evs if isinstance(e, LabelSet)]

    mine, theirs = sets(dst), sets(src)
    return len(theirs) > 0 and mine[: len(theirs)] == theirs


def _at_seq(store: LogStore, seq: int) -> StoredEvent | None:
    ev = next(iter(store.scan(after_seq=seq - 1, batch=1)), None) if seq > 0 else None
    return ev if ev is not None and ev.seq == seq else None


def _holds(src: LogStore, dst: LogStore, seq: int, hash_: str) -> bool:
    ev = _at_seq(src, seq)
    return ev is not None and _hash_at(dst, ev.stream, ev.version) == hash_


def _hash_at(store: LogStore, stream: str, version: int) -> str | None:
    ev = store.event_at(stream, version)
    return ev.hash if ev else None


def _conflict(stream: str, version: int, dst_hash: str | None, src_hash: str | None) -> str:
    return (
        f"{stream} at version {version} (destination {(dst_hash or 'nothing')[:12]}, "
        f"source {(src_hash or 'nothing')[:12]})"
    )
