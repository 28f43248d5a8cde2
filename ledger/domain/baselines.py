"""Baseline sets: the per-game scoring data a card is scored under, content-addressed (see docs/baselines.md). One entry
per game id (the last given wins, as in the toolkit's lookup); the id hashes the sorted canonical form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import msgspec

from ledger.domain.events import BaselineEntry

_enc = msgspec.json.Encoder()


def entry_from_info(info: Any) -> BaselineEntry:
    return BaselineEntry(
        game_id=info.game_id,
        title=getattr(info, "title", None),
        baseline_actions=_list(getattr(info, "baseline_actions", None)),
        tags=_list(getattr(info, "tags", None)),
        private_tags=_list(getattr(info, "private_tags", None)),
        level_tags=[list(x) for x in info.level_tags] if getattr(info, "level_tags", None) is not None else None,
    )


def _list(v: Any) -> list[Any] | None:
    return list(v) if v is not None else None


def canonical(entries: Iterable[BaselineEntry]) -> list[BaselineEntry]:
    by_id: dict[str, BaselineEntry] = {}
    for e in entries:
        by_id[e.game_id] = e
    return [by_id[k] for k in sorted(by_id)]


def set_id(entries: Iterable[BaselineEntry]) -> str:
    import hashlib  # here: it loads OpenSSL (about 2 ms), which listing cards never needs

    return hashlib.sha256(b"arc-scorecard-ledger/baselines/v1\0" + _enc.encode(canonical(entries))).hexdigest()


def as_map(entries: Iterable[BaselineEntry]) -> dict[str, BaselineEntry]:
    return {e.game_id: e for e in canonical(entries)}


def by_base_id(entries: Mapping[str, BaselineEntry]) -> dict[str, list[BaselineEntry]]:
    out: dict[str, list[BaselineEntry]] = {}
    for gid, e in entries.items():
        out.setdefault(gid.split("-", 1)[0], []).append(e)
    return out


#: A baseline beyond int64 cannot be scored ((baseline / actions) ** 2 overflows a float, in the toolkit too).
_Baseline = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


# BaselineEntry's fields again, not the event struct itself: a file's baselines are bounded to int64 and decoded as
# laxly as the toolkit's pydantic model reads them; ``entry_from_metadata`` copies them over by name.
class _Metadata(msgspec.Struct, forbid_unknown_fields=False):
    game_id: str
    title: str | None = None
    baseline_actions: list[_Baseline] | None = None
    tags: list[str] | None = None
    private_tags: list[str] | None = None
    level_tags: list[list[str]] | None = None


# Lax, like the toolkit's pydantic EnvironmentInfo: "22", 22.0 and 1e2 are the baseline 22, 22 and 100 there too.
_meta_decoder = msgspec.json.Decoder(_Metadata, strict=False)


def entry_from_metadata(data: bytes) -> BaselineEntry:
    """One ``metadata.json``'s entry; raises ``msgspec.DecodeError``/``ValidationError`` on bad content."""
    try:
        m = _meta_decoder.decode(data)
    except RecursionError:
        # Skipping an unknown field recurses into its value: deeply nested JSON there exhausts the stack.
        raise msgspec.DecodeError("JSON is nested too deeply") from None
    return BaselineEntry(**msgspec.structs.asdict(m))
