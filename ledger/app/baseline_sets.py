"""Baseline sets as versioned data: import, label, resolve, list, show and diff them (see docs/baselines.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import zip_longest
from pathlib import Path
from typing import Any, Literal

import msgspec

from ledger.domain import baselines as bl
from ledger.domain.events import (
    LABEL_STREAM,
    BaselineEntry,
    BaselinesRecorded,
    LabelSet,
    baselines_stream,
    decode,
    label_stream,
)
from ledger.errors import BaselinesInputError, LabelConflict, UnknownBaselines, VersionConflict
from ledger.ledger import Ledger
from ledger.toolkit.game_files import scan_environments

#: Labels are short names; one that could read as a set id (or a prefix of one) is refused, see check_label.
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,63}$")
#: A label made only of hex digits, as long as an id prefix: `baselines show` would resolve it instead of the set.
_ID_LIKE_RE = re.compile(r"^[0-9a-fA-F]{4,}$")
#: Shortest id prefix accepted as a reference (shorter ones match too much to be meant).
MIN_PREFIX = 4


class UnknownBaselineRef(UnknownBaselines):
    """No label, set id or unique id prefix matches the reference."""


@dataclass(frozen=True, slots=True)
class Source:
    entries: list[BaselineEntry]
    warnings: list[str] = field(default_factory=list)


class _Wrapped(msgspec.Struct, forbid_unknown_fields=False):
    entries: list[BaselineEntry]


_list_decoder = msgspec.json.Decoder(list[BaselineEntry])
_wrapped_decoder = msgspec.json.Decoder(_Wrapped)
_single_decoder = msgspec.json.Decoder(BaselineEntry)


def parse_json(data: bytes, name: str = "input") -> list[BaselineEntry]:
    """Entries from a JSON list of entries (extra fields ignored), an object with an ``entries`` list (``ledger
    baselines show --json``), or one ``metadata.json`` object."""
    try:
        top = msgspec.json.decode(data)
    except msgspec.DecodeError as e:
        raise BaselinesInputError(f"{name} is not valid JSON: {e}") from e
    try:
        if isinstance(top, list):
            entries = _list_decoder.decode(data)
        elif isinstance(top, dict) and "entries" in top:
            entries = _wrapped_decoder.decode(data).entries
        elif isinstance(top, dict) and "game_id" in top:
            entries = [_single_decoder.decode(data)]
        else:
            raise BaselinesInputError(
                f"{name}: expected a JSON list of game entries, an object with 'entries', or one metadata.json object"
            )
    except msgspec.ValidationError as e:
        raise BaselinesInputError(f"{name}: {e}") from e
    return entries


def check_entries(entries: Iterable[BaselineEntry], name: str = "input") -> list[str]:
    """Raise :class:`BaselinesInputError` for entries no scoring could use; return warnings for duplicates."""
    seen: dict[str, int] = {}
    for i, e in enumerate(entries):
        if not e.game_id.strip():
            raise BaselinesInputError(f"{name}: entry {i} has an empty game_id")
        if e.baseline_actions is not None and any(b < 0 for b in e.baseline_actions):
            raise BaselinesInputError(f"{name}: {e.game_id} has a negative baseline_actions value")
        seen[e.game_id] = seen.get(e.game_id, 0) + 1
    zeros = [
        f"{e.game_id} has a baseline of 0 for level(s) {', '.join(str(i + 1) for i in idx)}: every completion of "
        "such a level scores 0 ((0/actions)^2, as the toolkit computes it); is the baseline missing?"
        for e in entries
        if (idx := [i for i, b in enumerate(e.baseline_actions or []) if b == 0])
    ]
    return [
        f"{gid} appears {n} times in {name}; the last one is used (as the toolkit does)"
        for gid, n in seen.items()
        if n > 1
    ] + zeros


def read_source(path: str | Path, *, skip_invalid: bool = False) -> Source:
    """The entries of an ``environment_files`` folder (every ``metadata.json`` under it) or a JSON file."""
    p = Path(path)
    if p.is_dir():
        entries, problems = scan_environments(p)
        warnings: list[str] = []
        if problems:
            if not skip_invalid:
                raise BaselinesInputError(
                    f"{len(problems)} metadata.json file(s) could not be read (use --skip-invalid to leave them out): "
                    + problems[0]
                )
            warnings += [f"skipped {m}" for m in problems]
        if not entries:
            raise BaselinesInputError(f"no readable metadata.json under {p}")
        return Source(entries, warnings + check_entries(entries, str(p)))
    if not p.exists():
        raise BaselinesInputError(f"{p} does not exist")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise BaselinesInputError(f"cannot read {p}: {e}") from e
    entries = parse_json(data, str(p))
    if not entries:
        raise BaselinesInputError(f"{p} holds no game entries")
    return Source(entries, check_entries(entries, str(p)))


@dataclass(frozen=True, slots=True)
class Label:
    label: str
    set_id: str
    ts: datetime
    history: tuple[str, ...] = ()


def _label_events(ledger: Ledger, label: str | None = None) -> tuple[list[LabelSet], int]:
    """LabelSet events of one label (with its stream's last version), or of every label (version 0)."""
    streams = [label_stream(label)] if label is not None else [s.stream for s in ledger.store.streams(LABEL_STREAM)]
    out: list[LabelSet] = []
    version = 0
    for stream in streams:
        bodies, version, _ = ledger.store.read_bodies(stream)
        out.extend(ev for ev in (decode(b) for b in bodies) if isinstance(ev, LabelSet))
    return out, version if label is not None else 0


def _fold_labels(events: Iterable[LabelSet]) -> dict[str, Label]:
    out: dict[str, Label] = {}
    for ev in events:
        prev = out.get(ev.label)
        if prev is None:
            out[ev.label] = Label(ev.label, ev.set_id, ev.ts)
        elif prev.set_id != ev.set_id:
            out[ev.label] = Label(ev.label, ev.set_id, ev.ts, (*prev.history, prev.set_id))
    return out


def labels(ledger: Ledger) -> dict[str, Label]:
    return _fold_labels(_label_events(ledger)[0])


def check_label(label: str) -> None:
    """Raise :class:`BaselinesInputError` for a label that could not be told apart from an id or is unusual."""
    if not LABEL_RE.match(label):
        raise BaselinesInputError(
            f"bad label {label!r}: use up to 64 letters, digits and . _ : @ + -, starting with a letter or digit"
        )
    if _ID_LIKE_RE.match(label):
        raise BaselinesInputError(
            f"bad label {label!r}: it looks like a baseline set id or id prefix (only 0-9 and a-f, 4 or more "
            "characters), so it could hide a set; add another character (say 'v' or '-')"
        )


def set_label(ledger: Ledger, label: str, set_id: str, *, move: bool = False) -> tuple[bool, str | None]:
    """Point ``label`` at ``set_id``; (changed, previous set id). Optimistic concurrency on the label's own stream."""
    check_label(label)
    while True:
        events, version = _label_events(ledger, label)
        current = _fold_labels(events).get(label)
        if current is not None and current.set_id == set_id:
            return False, current.set_id
        if current is not None and not move:
            raise LabelConflict(label, current.set_id, set_id)
        ev = LabelSet(ts=datetime.now(UTC), label=label, set_id=set_id)
        try:
            ledger.append(label_stream(label), [ev], expected_version=version)
        except VersionConflict:
            continue
        return True, current.set_id if current is not None else None


@dataclass(frozen=True, slots=True)
class ImportResult:
    set_id: str
    new: bool
    games: int
    label: str | None = None
    label_changed: bool = False
    label_previous: str | None = None
    warnings: list[str] = field(default_factory=list)


def import_set(
    ledger: Ledger,
    entries: Iterable[BaselineEntry],
    *,
    label: str | None = None,
    move: bool = False,
    warnings: Iterable[str] = (),
) -> ImportResult:
    """Store the set and optionally label it; a label conflict is refused before anything is written."""
    canon = bl.canonical(entries)
    sid = bl.set_id(canon)
    if label is not None:
        check_label(label)
        current = labels(ledger).get(label)
        if current is not None and current.set_id != sid and not move:
            raise LabelConflict(label, current.set_id, sid)
    new = not ledger.store.stream_exists(baselines_stream(sid))
    ledger.record_baselines(canon)
    changed, previous = False, None
    if label is not None:
        changed, previous = set_label(ledger, label, sid, move=move)
    return ImportResult(sid, new, len(canon), label, changed, previous if changed else None, list(warnings))


def resolve(ledger: Ledger, ref: str) -> str:
    """The set id a reference names: a label, then a full set id, then a unique id prefix (>= 4 characters)."""
    lab = labels(ledger).get(ref)
    if lab is not None:
        return lab.set_id
    ids = ledger.baseline_set_ids()
    if ref in ids:
        return ref
    low = ref.lower()
    if len(low) >= MIN_PREFIX and re.fullmatch(r"[0-9a-f]+", low):
        hits = [i for i in ids if i.startswith(low)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise UnknownBaselineRef(
                f"{ref!r} is ambiguous: {len(hits)} baseline sets start with it ({', '.join(h[:12] for h in hits)})"
            )
    raise UnknownBaselineRef(f"no baseline set or label {ref!r} in this ledger (see `ledger baselines list`)")


@dataclass(frozen=True, slots=True)
class SetInfo:
    set_id: str
    recorded: datetime
    labels: list[str]
    entries: list[BaselineEntry]

    @property
    def levels(self) -> int:
        return sum(len(e.baseline_actions or []) for e in self.entries)

    @property
    def named(self) -> str:
        return f"{self.set_id[:12]} ({', '.join(self.labels)})" if self.labels else self.set_id[:12]

    def to_json(self) -> SetInfo:
        return self

    def lines(self) -> list[str]:
        """`ledger baselines show`: the set, then each game's baselines and tags."""
        out = [
            f"set {self.set_id}",
            f"  recorded {self.recorded.isoformat()}, {len(self.entries)} games, "
            f"labels: {', '.join(self.labels) or '-'}",
        ]
        for e in self.entries:
            base = "none" if e.baseline_actions is None else "[" + ", ".join(map(str, e.baseline_actions)) + "]"
            out.append(f"  {e.game_id:<24} baselines {base}   tags {', '.join(e.tags or []) or '-'}")
            extra = []
            if e.private_tags:
                extra.append("private " + ", ".join(e.private_tags))
            if e.level_tags:
                extra.append("levels " + " | ".join(",".join(t) for t in e.level_tags))
            if extra:
                out.append(f"  {'':<24} {'   '.join(extra)}")
        return out


@dataclass(frozen=True, slots=True)
class SetList:
    """`ledger baselines list`: every stored set, oldest first."""

    sets: list[SetInfo]

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "set_id": s.set_id,
                "recorded": s.recorded,
                "games": len(s.entries),
                "levels": s.levels,
                "labels": s.labels,
            }
            for s in self.sets
        ]

    def lines(self) -> list[str]:
        if not self.sets:
            return ["no baseline sets in this ledger (see `ledger baselines import`)"]
        return [f"{'set':<12}  {'recorded':<19}  {'games':>5}  {'levels':>6}  labels"] + [
            f"{s.set_id[:12]:<12}  {s.recorded.isoformat()[:19]:<19}  {len(s.entries):>5}  {s.levels:>6}  "
            + ", ".join(s.labels)
            for s in self.sets
        ]


def _recorded(ledger: Ledger, set_id: str) -> BaselinesRecorded:
    bodies, _, _ = ledger.store.read_bodies(baselines_stream(set_id))
    if not bodies:
        raise UnknownBaselineRef(f"baseline set {set_id} is not in this ledger")
    ev = decode(bodies[0])
    assert isinstance(ev, BaselinesRecorded)
    return ev


def set_info(ledger: Ledger, set_id: str, all_labels: Mapping[str, Label] | None = None) -> SetInfo:
    labs = all_labels if all_labels is not None else labels(ledger)
    ev = _recorded(ledger, set_id)
    return SetInfo(set_id, ev.ts, sorted(k for k, v in labs.items() if v.set_id == set_id), list(ev.entries))


def list_sets(ledger: Ledger) -> SetList:
    labs = labels(ledger)
    return SetList([set_info(ledger, sid, labs) for sid in ledger.baseline_set_ids()])


GameStatus = Literal["added", "removed", "changed", "same"]


class LevelDiff(msgspec.Struct, frozen=True):
    level: int
    old: int | None
    new: int | None


class GameDiff(msgspec.Struct, frozen=True):
    """One game: ``game_id`` in A and ``game_id_new`` in B (they differ only with ``match='base'``)."""

    game_id: str
    game_id_new: str | None
    status: GameStatus
    levels_old: int
    levels_new: int
    levels_added: int
    levels_removed: int
    levels: list[LevelDiff]
    fields: list[str]


#: What a change lists besides the baselines themselves: every other field of an entry but its id.
_COMPARED = tuple(f for f in BaselineEntry.__struct_fields__ if f not in ("game_id", "baseline_actions"))


def _game_diff(old: BaselineEntry | None, new: BaselineEntry | None) -> GameDiff:
    a = list(old.baseline_actions or []) if old is not None else []
    b = list(new.baseline_actions or []) if new is not None else []
    if old is None or new is None:
        status: GameStatus = "added" if old is None else "removed"
        fields: list[str] = []
    else:
        fields = [f for f in _COMPARED if getattr(old, f) != getattr(new, f)]
        if old.baseline_actions != new.baseline_actions:
            fields.insert(0, "baseline_actions")
        status = "changed" if fields or old.game_id != new.game_id else "same"
    levels = [LevelDiff(i + 1, x, y) for i, (x, y) in enumerate(zip_longest(a, b)) if x != y]
    ref = old if old is not None else new
    assert ref is not None
    return GameDiff(
        game_id=ref.game_id,
        game_id_new=new.game_id if new is not None else None,
        status=status,
        levels_old=len(a),
        levels_new=len(b),
        levels_added=max(0, len(b) - len(a)),
        levels_removed=max(0, len(a) - len(b)),
        levels=levels,
        fields=fields,
    )


def diff_sets(
    a: Mapping[str, BaselineEntry], b: Mapping[str, BaselineEntry], *, match: Literal["exact", "base"] = "exact"
) -> list[GameDiff]:
    """Per game of A and B: added, removed, changed (fields; per-level old -> new baseline) or same. ``match='base'``
    pairs a game missing from B with B's first unheld version of its base id (a version bump)."""
    out: list[GameDiff] = []
    paired_b: set[str] = set()
    b_by_base = bl.by_base_id(b)
    for gid in sorted(a):
        other = b.get(gid)
        if other is None and match == "base":
            cands = sorted(
                e.game_id
                for e in b_by_base.get(gid.split("-", 1)[0], [])
                if e.game_id not in a and e.game_id not in paired_b
            )
            other = b[cands[0]] if cands else None
        if other is not None:
            paired_b.add(other.game_id)
        out.append(_game_diff(a[gid], other))
    for gid in sorted(b):
        if gid not in paired_b and gid not in a:
            out.append(_game_diff(None, b[gid]))
    order = {"changed": 0, "added": 1, "removed": 2, "same": 3}
    out.sort(key=lambda d: (order[d.status], d.game_id))
    return out


@dataclass(frozen=True, slots=True)
class SetDiff:
    """`ledger baselines diff A B`: every game's difference (``show_all``: the games that did not change too)."""

    a: SetInfo
    b: SetInfo
    match: str
    games: list[GameDiff]
    show_all: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a.set_id, "b": self.b.set_id, "match": self.match, "games": self.games}

    def lines(self) -> list[str]:
        out = [f"A {self.a.named}   B {self.b.named}"]
        same = 0
        for d in self.games:
            if d.status == "same":
                same += 1
                if self.show_all:
                    out.append(f"  same     {d.game_id}")
            elif d.status == "changed":
                renamed = f" -> {d.game_id_new}" if d.game_id_new != d.game_id else ""
                fields = ", ".join(d.fields) if d.fields else "version id only"
                counts = (
                    f"levels {d.levels_old} -> {d.levels_new}"
                    if d.levels_old != d.levels_new
                    else f"{d.levels_new} level(s)"
                )
                out.append(f"  changed  {d.game_id}{renamed}   {fields}   {counts}")
                for lv in d.levels:
                    old, new = ("-" if x is None else x for x in (lv.old, lv.new))
                    out.append(f"      level {lv.level}: {old} -> {new}")
            else:
                n = d.levels_new if d.status == "added" else d.levels_old
                out.append(f"  {d.status:<8} {d.game_id}   {n} level(s)")
        if not self.show_all:
            out.append(f"  {same} game(s) the same" if same else "  no game is the same in both sets")
        return out


def diff(
    ledger: Ledger, a: str, b: str, *, match: Literal["exact", "base"] = "exact", show_all: bool = False
) -> SetDiff:
    """The sets ``a`` and ``b`` name (labels or ids) and what changed from one to the other."""
    labs = labels(ledger)
    ia, ib = (set_info(ledger, resolve(ledger, ref), labs) for ref in (a, b))
    games = diff_sets({e.game_id: e for e in ia.entries}, {e.game_id: e for e in ib.entries}, match=match)
    return SetDiff(ia, ib, match, games, show_all)
