"""The hash chain: each event's hash covers the previous hash of its stream and the event's stored bytes.

The chain is per stream and covers (stream, version), not the global ``seq``, so an event keeps its hash when
it is copied into another ledger (``ledger copy``) where it gets a different ``seq``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

DOMAIN = b"arc-scorecard-ledger/event/v1"
GENESIS = "0" * 64


def _field(data: bytes) -> bytes:
    # Length-prefixing every field makes the hashed message unambiguous whatever the fields contain.
    return len(data).to_bytes(8, "big") + data


def event_hash(prev_hash: str, stream: str, version: int, type_: str, body: bytes) -> str:
    """sha256 (hex) over the domain tag, prev_hash, stream, version, type and the body bytes as stored."""
    p, s, v, t = prev_hash.encode("ascii"), stream.encode("utf-8"), str(version).encode("ascii"), type_.encode()
    return hashlib.sha256(
        b"".join(
            (
                DOMAIN,
                len(p).to_bytes(8, "big"),
                p,
                len(s).to_bytes(8, "big"),
                s,
                len(v).to_bytes(8, "big"),
                v,
                len(t).to_bytes(8, "big"),
                t,
                len(body).to_bytes(8, "big"),
                body,
            )
        )
    ).hexdigest()


def ledger_head(stream_heads: Iterable[tuple[str, int, str]]) -> str:
    """One hash for a whole ledger: sha256 over every stream's (name, last version, head hash), sorted by name.

    Keep it outside the database: if any stream later differs (an event changed, removed or added), so does this.
    """
    h = hashlib.sha256(b"arc-scorecard-ledger/head/v1")
    for stream, version, head in sorted(stream_heads):
        h.update(_field(stream.encode("utf-8")))
        h.update(_field(str(version).encode("ascii")))
        h.update(_field(head.encode("ascii")))
    return h.hexdigest()
