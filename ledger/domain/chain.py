"""The hash chain, per stream over (stream, version) so an event keeps its hash when copied (different ``seq``)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple, Protocol

DOMAIN = b"arc-scorecard-ledger/event/v1"
_HEX64 = re.compile(r"[0-9a-f]{64}\Z").match
GENESIS = "0" * 64


def _field(data: bytes) -> bytes:
    # Length-prefixing every field makes the hashed message unambiguous whatever the fields contain.
    return len(data).to_bytes(8, "big") + data


def event_hash(prev_hash: str, stream: str, version: int, type_: str, body: bytes) -> str:
    """sha256 (hex) over the domain tag, prev_hash, stream, version, type and the body bytes as stored."""
    return chain_hashes(prev_hash, stream, version - 1, ((type_, body),))[0]


@functools.lru_cache(maxsize=4096)
def _part(text: str) -> bytes:
    # A stream's or a type's length-prefixed part of the message: the same for every event of a card, so built
    # once per process (live capture hashes one event per toolkit step).
    return _field(text.encode("utf-8"))


def chain_hashes(prev_hash: str, stream: str, version: int, rows: Iterable[tuple[str, bytes]]) -> list[str]:
    """:func:`event_hash` of consecutive events of ``stream``, each part built once (batch appends spend time here)."""
    import hashlib  # here: it loads OpenSSL (about 2 ms), which listing cards never needs

    stream_part = _part(stream)
    sha256 = hashlib.sha256
    out = []
    for type_, body in rows:
        version += 1
        p = prev_hash.encode("ascii")
        v = str(version).encode("ascii")
        prev_hash = sha256(
            b"".join(
                (
                    DOMAIN,  # the message up to prev_hash's length field, then prev_hash; then the stream's part
                    len(p).to_bytes(8, "big"),
                    p,
                    stream_part,
                    len(v).to_bytes(8, "big"),
                    v,
                    _part(type_),
                    len(body).to_bytes(8, "big"),
                    body,
                )
            )
        ).hexdigest()
        out.append(prev_hash)
    return out


def first_unhashed(rows: Sequence[StreamLink]) -> int | None:
    """The index of the first row whose ``hash`` or column types do not hold (None: all do; see :func:`check_link`)."""
    import hashlib

    head = DOMAIN + (64).to_bytes(8, "big")
    streams: dict[str, bytes] = {}
    types: dict[str, bytes] = {}
    sha256 = hashlib.sha256
    join = b"".join
    for i, r in enumerate(rows):
        prev, body, version = r.prev_hash, r.body, r.version
        if (
            type(body) is not bytes
            or type(version) is not int
            or type(prev) is not str
            or len(prev) != 64
            or not prev.isascii()
            or type(r.ts) is not str
            or type(r.seq) is not int
        ):
            return i
        stream = r.stream
        s = streams.get(stream) if type(stream) is str else None
        if s is None:
            if type(stream) is not str:
                return i
            sb = stream.encode("utf-8")
            s = streams[stream] = len(sb).to_bytes(8, "big") + sb
        t = types.get(r.type) if type(r.type) is str else None
        if t is None:
            if type(r.type) is not str:
                return i
            tb = r.type.encode()
            t = types[r.type] = len(tb).to_bytes(8, "big") + tb
        v = str(version).encode("ascii")
        digest = sha256(
            join((head, prev.encode("ascii"), s, len(v).to_bytes(8, "big"), v, t, len(body).to_bytes(8, "big"), body))
        ).hexdigest()
        if digest != r.hash:
            return i
    return None


def ledger_head(stream_heads: Iterable[tuple[str, int, str]]) -> str:
    """One hash for a whole ledger: sha256 over every stream's (name, last version, head hash), sorted by name."""
    import hashlib

    h = hashlib.sha256(b"arc-scorecard-ledger/head/v1")
    for stream, version, head in sorted(stream_heads):
        h.update(_field(stream.encode("utf-8")))
        h.update(_field(str(version).encode("ascii")))
        h.update(_field(head.encode("ascii")))
    return h.hexdigest()


class Link(Protocol):
    """A stored event as the chain and the audit see it (read-only properties: a frozen row satisfies them)."""

    @property
    def version(self) -> int: ...
    @property
    def ts(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def prev_hash(self) -> str: ...
    @property
    def hash(self) -> str: ...


class StreamLink(Link, Protocol):
    @property
    def stream(self) -> str: ...


class BrokenLink(NamedTuple):
    """Why a stored event does not continue its stream's chain: ``kind`` for code, ``message`` for people."""

    kind: Literal["column", "gap", "order", "prev_hash", "hash"]
    message: str


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"


def column_problem(row: Link) -> str | None:
    """What is wrong with the type or shape of a column the chain reads (None: nothing; SQLite stores anything)."""
    prev, h = row.prev_hash, row.hash
    if (
        type(row.seq) is int
        and type(row.version) is int
        and type(row.type) is str
        and type(row.ts) is str
        and type(row.body) is bytes
        and type(prev) is str
        and type(h) is str
        and len(prev) == 64
        and len(h) == 64
        and prev.isascii()
        and h.isascii()
    ):
        return None  # a hash of other digits than lowercase hex shows when its link fails: see check_link
    return _column_detail(row)


def stream_problem(stream: object) -> str:
    return f"stream column holds {_shown(stream)}, not text"


def _column_detail(row: Link) -> str | None:
    stream = getattr(row, "stream", "")  # a stored event has one; a row read for one stream may not
    if not isinstance(stream, str):
        return stream_problem(stream)
    for name in ("seq", "version"):
        value = getattr(row, name)
        if not _is_int(value) or value < 0:
            return f"{name} column holds {_shown(value)}, not a whole number"
    for name in ("type", "ts"):
        value = getattr(row, name)
        if not isinstance(value, str):
            return f"{name} column holds {_shown(value)}, not text"
    if not isinstance(row.body, bytes | bytearray | memoryview):
        return f"body column holds {_shown(row.body)}, not the stored bytes (a blob)"
    for name in ("prev_hash", "hash"):
        problem = column_problem_of_hash(getattr(row, name), name)
        if problem is not None:
            return problem
    return None


def column_problem_of_hash(value: object, name: str = "hash") -> str | None:
    if isinstance(value, str) and _HEX64(value) is not None:
        return None
    return f"{name} column holds {_shown(value)}, not a sha256 (64 lowercase hex digits)"


def check_link(
    stream: str, row: Link, prev_version: int, prev_hash: str, prev_seq: int | None = None
) -> BrokenLink | None:
    """The first thing that breaks the link from the stream's previous event to ``row`` (None: the link holds).
    ``prev_seq``: ``row`` must also have been stored after it. Only a ``gap`` message names ``row``'s version."""
    problem = column_problem(row) if isinstance(stream, str) else stream_problem(stream)
    if problem is not None:
        return BrokenLink("column", problem)
    if row.version != prev_version + 1:
        missing = row.version - prev_version - 1
        tail = f": {missing} event(s) missing" if missing > 0 else ""
        return BrokenLink("gap", f"version {row.version} follows version {prev_version}{tail}")
    if prev_seq is not None and row.seq <= prev_seq:
        return BrokenLink(
            "order", f"stored before version {prev_version} (seq {row.seq} < {prev_seq}): events reordered"
        )
    if row.prev_hash != prev_hash:
        why = f"prev_hash does not link to version {prev_version}'s hash (an event before it was replaced)"
        broken = BrokenLink("prev_hash", why)
    elif event_hash(prev_hash, stream, row.version, row.type, row.body) != row.hash:
        broken = BrokenLink("hash", "the stored bytes do not match the event's hash (the event was changed)")
    else:
        return None
    detail = _column_detail(row)
    return broken if detail is None else BrokenLink("column", detail)
