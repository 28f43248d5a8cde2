"""Replaying a long card straight from its stored bytes (a cold export of a million events).

The store hands over the bodies of many events as JSON lines (stored bodies hold no raw newline) with how many
there are, so a chunk decodes in one msgspec call instead of one call (and one row object) per event. An
``action_taken`` body, nearly every event of a long card, is decoded only as far as the fold needs it: its play
(``game_id``, ``guid``); only the card's very last event needs its ``ts``. Every other event decodes to its own
type and goes through :func:`~ledger.core.projection.apply`, so the result equals
:func:`~ledger.core.projection.fold` over the decoded events (a test checks it).
Pure: no I/O.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable

import msgspec

from ledger.core.events import ActionTaken, AnyEvent, PlayStarted
from ledger.core.projection import CardState, Play, apply, new_card


class _Action(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="action_taken"):
    """An ``action_taken`` body as the fold sees it (its other fields are skipped, not decoded)."""

    # gc=False: a million of these must not make the garbage collector walk them (two strings cannot form a cycle).
    game_id: str
    guid: str


#: Every event type, with ``_Action`` in place of ``ActionTaken`` (built from AnyEvent, so new types are in it).
_FoldEvent = typing.Union[(_Action, *(t for t in typing.get_args(AnyEvent) if t is not ActionTaken))]  # type: ignore[valid-type]
_lines_decoder = msgspec.json.Decoder(_FoldEvent)


class ChunkMismatch(ValueError):
    """A joined chunk did not decode to as many events as it holds (a body that is not one JSON object)."""


def fold_joined(
    card_id: str,
    chunks: Iterable[tuple[bytes, int]],
    card: CardState | None = None,
    *,
    last_event: Callable[[], AnyEvent],
) -> CardState:
    """Fold events given as ``(bodies as JSON lines, number of bodies)`` chunks, in stream order.

    ``last_event`` gives the last of them decoded in full (asked for only if it is an action, for its ``ts``).
    Raises ``msgspec.DecodeError``/``ValidationError`` or :class:`ChunkMismatch` on a body that does not decode
    (``card``, if given, is then partly advanced: start again from a fresh copy).
    """
    c = card if card is not None else new_card(card_id)
    gid: str | None = None
    guid: str | None = None
    play: Play | None = None
    n = 0
    tail: _Action | None = None
    for joined, count in chunks:
        events = _lines_decoder.decode_lines(joined)
        if len(events) != count:
            raise ChunkMismatch(f"{count} stored bodies decoded to {len(events)} events")
        for e in events:
            if type(e) is _Action:
                # Runs of actions on one play (nearly all of a long card) skip the play lookup.
                if e.guid != guid or e.game_id != gid:
                    gid, guid = e.game_id, e.guid
                    play = c.play_for(gid, guid)
                if play is not None:
                    play.actions += 1
                n += 1
                tail = e
                continue
            if type(e) is PlayStarted:
                gid = guid = play = None  # a new play may now receive this guid's actions
            c.events += n
            n = 0
            tail = None
            apply(c, e)
    c.events += n
    if tail is not None:
        c.last_ts = last_event().ts
    return c
