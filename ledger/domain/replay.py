"""Replaying a long card straight from its stored bytes, equal to :func:`~ledger.domain.projection.fold`. Action bodies
are decoded with the card's games and guids as ``Literal`` values, so a million actions allocate no string; a chunk with
an unknown one is decoded again with plain ``str`` fields."""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from itertools import compress, count, groupby, islice, repeat
from operator import attrgetter, is_not
from typing import Any

import msgspec

from ledger.domain.events import ActionTaken, AnyEvent
from ledger.domain.projection import CardState, apply, new_card


class _Action(msgspec.Struct, frozen=True, gc=False, tag_field="type", tag="action_taken"):
    # gc=False: a million of these must not make the garbage collector walk them (two strings cannot form a cycle).
    game_id: str
    guid: str


_OTHERS = tuple(t for t in typing.get_args(AnyEvent) if t is not ActionTaken)
#: Every event type, with ``_Action`` in place of ``ActionTaken`` (built from AnyEvent, so new types are in it).
_lines_decoder = msgspec.json.Decoder(typing.Union[(_Action, *_OTHERS)])
_play_of = attrgetter("game_id", "guid")
_Known = tuple[type, "msgspec.json.Decoder[Any]", tuple[str, str] | None]
_known: dict[tuple[frozenset[str], frozenset[str]], _Known] = {}


def _known_decoder(card: CardState) -> _Known | None:
    """A decoder whose action type accepts only the card's games and guids (None before its first play)."""
    games = frozenset(card.games)
    guids = frozenset(p.guid for plays in card.games.values() for p in plays)
    if not games:
        return None
    got = _known.get((games, guids))
    if got is None:
        action = msgspec.defstruct(
            "_KnownAction",
            [("game_id", typing.Literal[tuple(sorted(games))]), ("guid", typing.Literal[tuple(sorted(guids))])],
            frozen=True,
            gc=False,
            tag_field="type",
            tag="action_taken",
        )
        if len(_known) > 64:  # a cache, not a leak: long-lived processes replay many cards
            _known.clear()
        decoder = msgspec.json.Decoder(typing.Union[(action, *_OTHERS)])
        single = (next(iter(games)), next(iter(guids))) if len(games) == len(guids) == 1 else None
        got = _known[(games, guids)] = (action, decoder, single)
    return got


class ChunkMismatch(ValueError):
    """A joined chunk did not decode to as many events as it holds."""


def _decode_chunk(card: CardState, joined: bytes, n: int) -> tuple[list[Any], type, tuple[str, str] | None]:
    """The chunk's events, the type its actions decoded to, and their one (game_id, guid) if they can have only one."""
    known = _known_decoder(card)
    events: list[Any] | None = None
    action: type = _Action
    single = None
    if known is not None:
        try:
            events = known[1].decode_lines(joined)
            action, _, single = known
        except msgspec.ValidationError:
            events = None  # an action on a game or guid not seen before this chunk (or a bad body): decode as str
    if events is None:
        events = _lines_decoder.decode_lines(joined)
        action = _Action
    if len(events) != n:
        raise ChunkMismatch(f"{n} stored bodies decoded to {len(events)} events")
    return events, action, single


def fold_joined(
    card_id: str,
    chunks: Iterable[tuple[bytes, int]],
    card: CardState | None = None,
    *,
    last_event: Callable[[], AnyEvent],
) -> CardState:
    """Fold ``(bodies as JSON lines, count)`` chunks in order; on a bad body ``card`` is left partly advanced."""
    c = card if card is not None else new_card(card_id)
    ended_on_action = False
    for joined, n in chunks:
        events, action, single = _decode_chunk(c, joined, n)
        ended_on_action = _fold_events(c, events, action, single)
    if ended_on_action:
        c.last_ts = last_event().ts
    return c


def _fold_events(c: CardState, events: list[Any], action: type, single: tuple[str, str] | None) -> bool:
    """Fold one decoded chunk (True if it ends with an action), runs of actions counted by C-level iteration."""
    others = list(compress(count(), map(is_not, map(type, events), repeat(action))))
    start = 0
    for i in (*others, len(events)):
        if i > start:  # events[start:i] are actions; between two other events no play starts, so one lookup a key
            if single is not None:
                _add_actions(c, *single, i - start)
            else:
                for (gid, guid), run in groupby(islice(events, start, i), _play_of):
                    _add_actions(c, gid, guid, len(list(run)))
            c.events += i - start
        if i < len(events):
            apply(c, events[i])
        start = i + 1
    return bool(events) and (not others or others[-1] != len(events) - 1)


def _add_actions(c: CardState, gid: str, guid: str, run: int) -> None:
    play = c.play_for(gid, guid)
    if play is not None:
        play.actions += run
