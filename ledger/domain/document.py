"""The scorecard document: the toolkit's ``EnvironmentScorecard.model_dump_json()`` (``exclude_none``), key for key."""

from __future__ import annotations

from typing import Any

import msgspec


class _Doc(msgspec.Struct, frozen=True, omit_defaults=True):
    pass


class RunDoc(_Doc, frozen=True):
    """One play's score: the toolkit's ``EnvironmentScore`` (also used for tag scores)."""

    id: str | None = None
    guid: str | None = None
    score: float = 0.0
    levels_completed: int = 0
    actions: int = 0
    resets: int | None = None
    state: str | None = None
    completed: bool | None = None
    level_scores: list[float] | None = None
    level_actions: list[int] | None = None
    level_baseline_actions: list[int] | None = None
    number_of_levels: int | None = None
    number_of_environments: int | None = None
    message: str | None = None


class EnvironmentDoc(_Doc, frozen=True):
    """One game's plays and their aggregates: the toolkit's ``EnvironmentScoreList``."""

    id: str
    runs: list[RunDoc]
    score: float
    actions: int
    levels_completed: int
    completed: bool
    level_count: int
    resets: int


class ScorecardDoc(_Doc, frozen=True):
    """The whole card: the toolkit's ``EnvironmentScorecard``."""

    source_url: str | None = None
    tags: list[str] | None = None
    opaque: Any = None
    card_id: str = ""
    score: float = 0.0
    environments: list[EnvironmentDoc] = msgspec.field(default_factory=list)
    tags_scores: list[RunDoc] = msgspec.field(default_factory=list)
    competition_mode: bool | None = None
    total_environments_completed: int = 0
    total_environments: int = 0
    total_levels_completed: int = 0
    total_levels: int = 0
    total_actions: int = 0


# omit_defaults would drop a score of 0.0 or an empty list; pydantic keeps every non-None value, so encode
# through builtins with only the None values removed.
_enc = msgspec.json.Encoder()


def _strip_none(obj: Any) -> Any:
    if isinstance(obj, msgspec.Struct):
        out = {}
        for name in obj.__struct_fields__:
            v = getattr(obj, name)
            if v is not None:
                out[name] = _strip_none(v)
        return out
    if isinstance(obj, list):
        return [_strip_none(v) for v in obj]
    return obj  # opaque data and scalars are written as given (pydantic keeps None inside them)


def to_json(doc: ScorecardDoc, indent: int | None = None) -> str:
    raw = _enc.encode(_strip_none(doc))
    if indent is not None and indent > 0:
        raw = msgspec.json.format(raw, indent=indent)
    return raw.decode("utf-8")


def sha256(doc: ScorecardDoc) -> str:
    import hashlib

    return hashlib.sha256(to_json(doc).encode("utf-8")).hexdigest()


def rest_answer(doc: ScorecardDoc) -> bytes:
    """The document as the toolkit's REST server sends it: Flask's ``jsonify`` (sorted, compact, ASCII, newline)."""
    import json

    values = json.loads(to_json(doc))
    return (json.dumps(values, sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n").encode("ascii")
