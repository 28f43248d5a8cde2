"""The fold is exhaustive: every member of the event union is handled by ``projection.apply`` (the type checker's
``assert_never`` closes the match), and the fast ``fold`` gives what ``apply`` gives, event by event."""

from __future__ import annotations

import ast
import inspect
from datetime import UTC, datetime
from typing import Any, get_args

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.domain import projection
from ledger.domain.events import AnyEvent, PlayStarted
from ledger.domain.projection import apply, fold, new_card

EVENT_TYPES = get_args(AnyEvent)


def _event(t: type) -> st.SearchStrategy[Any]:
    """Any instance of event type ``t`` (a field typed ``Any``, such as ``opaque``, holds None; a document, {})."""
    loose = {
        f.name: st.none() if f.type is Any else st.just({}) for f in msgspec.structs.fields(t) if "Any" in repr(f.type)
    }
    return st.builds(t, **loose)


EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
EVENTS = st.one_of(*(_event(t) for t in EVENT_TYPES))


def _matched_names() -> set[str]:
    """The event classes named in a ``case`` of ``apply`` (class patterns, alone or in an or-pattern)."""
    tree = ast.parse(inspect.getsource(projection.apply))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.MatchClass) and isinstance(node.cls, ast.Name):
            names.add(node.cls.id)
    return names


def test_every_event_type_has_a_case_in_apply() -> None:
    missing = sorted(t.__name__ for t in EVENT_TYPES if t.__name__ not in _matched_names())
    assert not missing, f"projection.apply has no case for: {', '.join(missing)}"


def test_the_match_ends_in_assert_never() -> None:
    # Without it a new event type would fall through silently (and the type checker would not say so).
    assert "assert_never(e)" in inspect.getsource(projection.apply)


@settings(max_examples=60, deadline=None)
@given(EVENTS)
def test_apply_takes_every_event_type(event: AnyEvent) -> None:
    card = new_card("c")
    apply(card, event)
    assert card.events == 1 and card.last_ts == event.ts


@settings(max_examples=60, deadline=None)
@given(st.lists(EVENTS, max_size=12))
def test_fold_equals_apply_one_by_one(events: list[AnyEvent]) -> None:
    # A play first, so that actions land somewhere and fold's run of actions is exercised.
    start = PlayStarted(ts=events[0].ts if events else EPOCH, game_id="g", guid="u")
    stream = [start, *events]
    by_apply = new_card("c")
    for e in stream:
        apply(by_apply, e)
    assert fold("c", stream) == by_apply


def test_no_event_type_is_tracked_by_the_collector() -> None:
    # A cold read decodes a million events: tracked, they would set off the collector's passes over the process.
    import gc

    from ledger.domain.events import decode, encode

    tracked = [t.__name__ for t in EVENT_TYPES if t.__struct_config__.gc]
    assert not tracked, f"event types tracked by the garbage collector: {', '.join(tracked)}"
    started = PlayStarted(ts=EPOCH, game_id="g", guid="u")
    assert not gc.is_tracked(decode(encode(started)))
