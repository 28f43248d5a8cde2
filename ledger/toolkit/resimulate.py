"""Re-simulation: execute a card's recorded plays again against the real game code and compare, action by action.

A play's record is its PlayStarted (with the seed the game was made with), then the inputs the agent sent:
ActionTaken (ACTION1..7, with x/y for ACTION6), LevelReset (a RESET that restarted the level) and ActionIgnored
(an action the game answered with an empty frame), interleaved across the card's guids in stream order; each guid
is its own game instance, and a later PlayStarted of the same guid is a RESET that the game turned into a full
reset. Each input is sent to a fresh instance of the game (``arc_agi.LocalEnvironmentWrapper`` over the game
files, exactly what ``Arcade.make`` builds in OFFLINE mode), the response goes through the same translator live
capture uses, and the events it yields must equal the recorded ones (timestamps and reasoning aside). So the check
covers the frame's state and levels_completed after every action and every derived event (level completed, game
over, win): a run that was fabricated or edited diverges at the first event the game does not produce.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ledger.core.events import (
    ActionIgnored,
    ActionTaken,
    AnyEvent,
    GameOver,
    LevelCompleted,
    LevelReset,
    Numbered,
    ObservationReapplied,
    PlayStarted,
    Win,
    type_of,
)
from ledger.core.projection import CardState, apply, new_card
from ledger.core.translator import translate
from ledger.toolkit.environments import scan_games
from ledger.toolkit.observation import observation

#: Events that record what the agent sent (each one is replayed).
INPUTS = (PlayStarted, ActionTaken, LevelReset, ActionIgnored)
#: Events the translator derives from a response (compared, not replayed).
DERIVED = (GameOver, Win, LevelCompleted)
#: Fields that are not the game's output: never compared.
_NOT_COMPARED = frozenset({"ts", "reasoning"})

_quiet = logging.getLogger("ledger.resimulate.toolkit")
_quiet.setLevel(logging.CRITICAL)


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first point where the game and the recording disagree.

    ``version``/``seq`` name the recorded event (for a missing event: the last recorded event before the point).
    ``expected`` is what the game produced, ``recorded`` what the log holds (``None`` when one side has no event).
    """

    version: int
    seq: int
    game_id: str | None
    guid: str | None
    action: str | None
    field: str
    expected: Any
    recorded: Any
    message: str


@dataclass(slots=True)
class ResimResult:
    """What the re-simulation replayed, and the first divergence (None when everything matched)."""

    guids: int = 0
    plays: int = 0
    inputs: int = 0
    default_seed_plays: int = 0
    divergence: Divergence | None = None
    #: Problems that stopped the re-simulation before it could compare (a game missing from the folder...).
    error: str | None = None
    games: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every recorded event was reproduced."""
        return self.divergence is None and self.error is None


def action_name(action: int) -> str:
    """RESET, ACTION1 ... ACTION7."""
    return "RESET" if action == 0 else f"ACTION{action}"


def _describe(n: Numbered) -> str:
    e = n.event
    if isinstance(e, ActionTaken):
        what = action_name(e.action) + (f" at ({e.x},{e.y})" if e.x is not None or e.y is not None else "")
    elif isinstance(e, ActionIgnored):
        what = action_name(e.action) + " (ignored)"
    elif isinstance(e, LevelReset):
        what = "RESET (level reset)"
    elif isinstance(e, PlayStarted):
        what = f"RESET (full reset, seed {e.seed})"
    else:
        what = type_of(e)
    return what


def _fields(e: AnyEvent) -> dict[str, Any]:
    return {k: v for k, v in msgspec.structs.asdict(e).items() if k not in _NOT_COMPARED}


def _compare(
    expected: AnyEvent | None, recorded: Numbered | None, last: Numbered, input_: Numbered
) -> Divergence | None:
    """The divergence between one expected and one recorded event, or None if they are the same fact.

    ``input_`` is the recorded input the events follow; ``last`` the last recorded event before a missing one.
    """
    gid = getattr(input_.event, "game_id", None)
    guid = getattr(input_.event, "guid", None)
    act = _describe(input_)
    who = f"{act} on {gid} guid {guid[:8] if guid else '?'}"

    def at(n: Numbered) -> str:
        if n is input_:
            return f"version {n.version} (seq {n.seq}) {who}"
        return f"version {n.version} (seq {n.seq}) {type_of(n.event)} after {who} (version {input_.version})"

    def div(n: Numbered, field: str, exp: Any, rec: Any, message: str) -> Divergence:
        return Divergence(n.version, n.seq, gid, guid, act, field, exp, rec, message)

    if expected is not None and recorded is not None:
        rec = recorded.event
        if type(expected) is not type(rec):
            return div(
                recorded,
                "type",
                type_of(expected),
                type_of(rec),
                f"{at(recorded)}: the game produces {_summary(expected)}, the recording has {_summary(rec)}",
            )
        if expected == rec:
            return None
        exp_f, rec_f = _fields(expected), _fields(rec)
        diffs = [k for k in exp_f if exp_f[k] != rec_f.get(k)]
        if not diffs:  # only the timestamps or the reasoning differ: not the game's output
            return None
        exp_txt = ", ".join(f"{d}={exp_f[d]!r}" for d in diffs)
        rec_txt = ", ".join(f"{d}={rec_f.get(d)!r}" for d in diffs)
        k = diffs[0]
        return div(
            recorded, k, exp_f[k], rec_f.get(k), f"{at(recorded)}: expected {exp_txt} (the game), recorded {rec_txt}"
        )
    if expected is not None:
        return div(
            last,
            "type",
            type_of(expected),
            None,
            f"after version {last.version} (seq {last.seq}), {who} (version {input_.version}): the game produces "
            f"{_summary(expected)}, the recording has no such event",
        )
    assert recorded is not None
    return div(
        recorded,
        "type",
        None,
        type_of(recorded.event),
        f"{at(recorded)}: the recording has {_summary(recorded.event)}, the game produces no such event",
    )


def _summary(e: AnyEvent) -> str:
    f = _fields(e)
    f.pop("game_id", None)
    f.pop("guid", None)
    inner = ", ".join(f"{k}={v!r}" for k, v in f.items() if v is not None)
    return f"{type_of(e)}({inner})"


class _Games:
    """One game instance per guid, built the way ``Arcade.make`` builds it."""

    def __init__(self, infos: dict[str, Any]) -> None:
        from arc_agi import LocalEnvironmentWrapper

        self._wrapper = LocalEnvironmentWrapper
        self.infos = infos
        self.by_guid: dict[str, tuple[Any, int | None]] = {}

    def make(self, game_id: str, guid: str, seed: int | None) -> Any:
        info = self.infos[game_id]
        # seed=None makes the wrapper build the game with its own default seed, as the toolkit does.
        w = self._wrapper(environment_info=info, logger=_quiet, scorecard_id="ledger-audit", seed=seed)
        self.by_guid[guid] = (w, seed)
        return w


def resimulate(events: Sequence[Numbered], environments_dir: str | os.PathLike[str]) -> ResimResult:
    """Replay every play of the card (``events`` in stream order) against the games under ``environments_dir``."""
    result = ResimResult()
    infos = scan_games(environments_dir)
    needed = sorted({e.event.game_id for e in events if isinstance(e.event, PlayStarted)})
    result.games = needed
    missing = [g for g in needed if g not in infos]
    if missing:
        result.error = (
            f"game {', '.join(missing)} not found under {environments_dir} (no metadata.json with that game_id)"
        )
        return result
    games = _Games(infos)
    try:
        _replay(events, games, result)
    finally:
        result.guids = len(games.by_guid)
    return result


def _replay(events: Sequence[Numbered], games: _Games, result: ResimResult) -> None:
    from arcengine import GameAction

    card = new_card("resimulation")
    reset = GameAction.RESET
    n = len(events)
    i = 0
    while i < n:
        cur = events[i]
        # Dispatched on the exact type, which a type checker cannot follow: ``ev`` is untyped.
        ev: Any = cur.event
        t = type(ev)
        if t is ObservationReapplied:
            # The REST server counted the last observation again (competition RESET): the card moves, the game
            # does not. What it derived follows it.
            i = _apply_reapplied(card, events, i)
            continue
        if t not in INPUTS and t not in DERIVED:
            # card_opened, card_closed (and anything integrity already reports as out of place): no game input.
            i += 1
            continue
        if t in DERIVED:
            result.divergence = _compare(None, cur, cur, cur)
            return
        # Send this input to the guid's game instance.
        guid = ev.guid
        inst = games.by_guid.get(guid)
        if t is PlayStarted:
            result.plays += 1
            if inst is None:
                started = _start_play(games, cur, result)
                if started is None:
                    return
                frame, inst = started
            else:
                frame = inst[0].step(reset)
        elif inst is None:
            result.divergence = _no_play_for_guid(cur)
            return
        elif t is LevelReset:
            frame = inst[0].step(reset)
        else:
            frame = _send_action(inst[0], ev, t)
        result.inputs += 1
        if frame is None:
            result.divergence = _no_response(cur)
            return
        frame.guid = guid
        empty = len(frame.frame) == 0
        obs = observation(frame, False if empty else bool(frame.full_reset), with_reasoning=False, ts=ev.ts)
        expected = translate(card, obs, seed=inst[1])
        # The recorded events for this input: the input itself and what was derived from it.
        j = i + 1
        while j < n and type(events[j].event) in DERIVED:
            j += 1
        d = _first_mismatch(expected, events[i:j], cur)
        if d is not None:
            result.divergence = d
            return
        i = j


def _apply_reapplied(card: CardState, events: Sequence[Numbered], i: int) -> int:
    """Apply the ObservationReapplied at ``i`` and the events derived from it; the index after them."""
    n = len(events)
    apply(card, events[i].event)
    i += 1
    while i < n and type(events[i].event) in DERIVED:
        apply(card, events[i].event)
        i += 1
    return i


def _start_play(games: _Games, cur: Numbered, result: ResimResult) -> tuple[Any, tuple[Any, int | None]] | None:
    """A first PlayStarted for its guid: build the game with the recorded seed; its first frame and instance.

    None (with ``result.error`` set) if the game's code fails to load or reset.
    """
    ev: Any = cur.event
    seed = ev.seed
    if seed is None:
        result.default_seed_plays += 1
    try:
        w = games.make(ev.game_id, ev.guid, seed)
    except Exception as e:  # a game whose code fails to load or reset
        result.error = f"version {cur.version}: cannot start {ev.game_id}: {e}"
        return None
    return w.observation_space, (w, seed)


def _send_action(game: Any, ev: Any, t: type) -> Any:
    """Send a recorded ACTION1..7 to the game (x/y with ACTION6); its frame, or None for an unknown action."""
    from arcengine import GameAction

    a = ev.action
    try:
        ga = GameAction.from_id(a)
    except ValueError:
        ga = None
    if ga is None:
        return None
    if a == 6 and t is ActionTaken:
        data = {}
        if ev.x is not None:
            data["x"] = ev.x
        if ev.y is not None:
            data["y"] = ev.y
        return game.step(ga, data=data)
    return game.step(ga)


def _no_play_for_guid(cur: Numbered) -> Divergence:
    """An input for a guid that no PlayStarted began."""
    ev: Any = cur.event
    guid = ev.guid
    return Divergence(
        cur.version,
        cur.seq,
        ev.game_id,
        guid,
        _describe(cur),
        "guid",
        None,
        guid,
        f"version {cur.version} (seq {cur.seq}) {type_of(ev)} for guid {guid}, which no play_started began",
    )


def _no_response(cur: Numbered) -> Divergence:
    """The game gave no frame for the input (it raised or the action does not exist)."""
    ev: Any = cur.event
    return Divergence(
        cur.version,
        cur.seq,
        getattr(ev, "game_id", None),
        ev.guid,
        _describe(cur),
        "response",
        None,
        type_of(ev),
        f"version {cur.version} (seq {cur.seq}) {_describe(cur)}: the game returned no response (it raised "
        f"an error or the action does not exist)",
    )


def _first_mismatch(expected: list[AnyEvent], recorded: Sequence[Numbered], cur: Numbered) -> Divergence | None:
    """The first event where what the game produced and what the log holds for this input differ (None if none)."""
    for k in range(max(len(expected), len(recorded))):
        exp = expected[k] if k < len(expected) else None
        rec = recorded[k] if k < len(recorded) else None
        d = _compare(exp, rec, recorded[min(k, len(recorded)) - 1], cur)
        if d is not None:
            return d
    return None
