"""Re-simulation: execute a card's recorded plays again against the real game code and compare, event by event. Each
response goes through live capture's translator; its events must equal the recorded ones (timestamps and reasoning
aside), so a fabricated or edited run diverges at the first event the game does not produce."""

from __future__ import annotations

import os
from collections import ChainMap, Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

import msgspec

from ledger.domain.events import (
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
from ledger.domain.projection import apply, new_card
from ledger.domain.translator import Observation, translate
from ledger.resim.resim_branches import (
    INPUTS,
    MAX_STATES,
    Instance,
    agrees,
    choices_for,
    copy_before,
    noted_frames,
)
from ledger.resim.state_search import Signature
from ledger.toolkit.game_files import LocalGame, scan_games
from ledger.toolkit.game_states import StateNotCopied
from ledger.toolkit.search_budget import STATE_BYTES, SearchSpent, allowance, deadline, step_limit
from ledger.toolkit.seeds import SEED_TRIES, seed_classes


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first point where the game and the recording disagree (for a missing event: the last one before it)."""

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
    guids: int = 0
    plays: int = 0
    inputs: int = 0
    default_seed_plays: int = 0
    divergence: Divergence | None = None
    error: str | None = None
    games: list[str] = field(default_factory=list)
    #: game_id -> why its plays were not checked.
    skipped: dict[str, str] = field(default_factory=dict)
    #: Why a mismatch does not prove the record wrong (a seed not recorded, too many open states); else None.
    unknown: str | None = None
    #: Inputs the record leaves open (actions with candidates), those the game decided, those still open.
    open_actions: int = 0
    decided: int = 0
    still_open: int = 0
    seeds_found: dict[str, int] = field(default_factory=dict)
    #: version -> (action, x, y) the game took for an undecided action: the instances' own maps, not a copy.
    choices: Mapping[int, tuple[int, int | None, int | None]] = field(default_factory=dict)
    #: Whether every candidate of the open inputs was tried, or the first path the game agreed on was taken
    #: (``reproduced`` counts the open inputs it took an action for).
    searched: bool = True
    reproduced: int = 0
    steps: int = 0
    copies: int = 0
    spent: bool = False

    @property
    def ok(self) -> bool:
        return self.divergence is None and self.error is None


#: Events the translator derives from a response (compared, not replayed).
DERIVED = (GameOver, Win, LevelCompleted)
#: Fields that are not the game's output: never compared.
_NOT_COMPARED = frozenset({"ts", "reasoning", "candidates"})


def action_name(action: int) -> str:
    return "RESET" if action == 0 else f"ACTION{action}"


def _describe(n: Numbered) -> str:
    e = n.event
    if isinstance(e, ActionTaken):
        return action_name(e.action) + (f" at ({e.x},{e.y})" if e.x is not None or e.y is not None else "")
    if isinstance(e, ActionIgnored):
        return action_name(e.action) + " (ignored)"
    if isinstance(e, LevelReset):
        return "RESET (level reset)"
    if isinstance(e, PlayStarted):
        return f"RESET (full reset, seed {e.seed})"
    return type_of(e)


def _fields(e: AnyEvent) -> dict[str, Any]:
    return {k: v for k, v in msgspec.structs.asdict(e).items() if k not in _NOT_COMPARED}


def _compare(
    expected: AnyEvent | None, recorded: Numbered | None, last: Numbered, input_: Numbered
) -> Divergence | None:
    """The divergence between one expected and one recorded event after ``input_``, or None if the same fact."""
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
    """One game instance per guid (``seeds`` overrides unrecorded seeds)."""

    def __init__(
        self,
        infos: dict[str, Any],
        seeds: dict[str, int] | None = None,
        first: bool = False,
        limits: dict[str, int] | None = None,
        until: float = float("inf"),
    ) -> None:
        self.infos = infos
        self.seeds = seeds or {}
        self.first = first
        #: guid -> the game steps its searches may take (none: no limit, as --decide asks).
        self.limits: dict[str, int] = limits or {}
        self.deadline = until
        self.by_guid: dict[str, Instance] = {}
        self.unseeded: set[str] = set()

    def make(self, game_id: str, guid: str, seed: int | None) -> tuple[Any, Instance]:
        used = self.seeds.get(guid, seed) if seed is None else seed
        if seed is None:
            self.unseeded.add(guid)
        # seed=None makes the wrapper build the game with its own default seed, as the toolkit does.
        w = LocalGame(self.infos[game_id], used)
        inst = Instance(
            w.game, seed, first=self.first, stop_at=self.limits.get(guid, float("inf")), deadline=self.deadline
        )
        self.by_guid[guid] = inst
        return w.observation_space, inst


def resimulate(
    events: Sequence[Numbered], environments_dir: str | os.PathLike[str], decide: bool = False
) -> ResimResult:
    """Replay every play of the card (``events`` in stream order) against the games under ``environments_dir``. See
    docs/audit.md for unrecorded seeds and open actions; ``decide`` searches every path, to tell which of them the game
    decides."""
    infos = scan_games(environments_dir)
    needed = sorted({e.event.game_id for e in events if isinstance(e.event, PlayStarted)})
    skipped = {g: f"game {g} not found under {environments_dir} (no metadata.json with that game_id)" for g in needed}
    for g in needed:
        if g in infos:
            try:
                LocalGame(infos[g], None)
                del skipped[g]
            except Exception as e:  # a game whose code fails to load: nothing to check it against
                skipped[g] = f"game {g} under {environments_dir} does not start: {e}"

    inputs = Counter(getattr(n.event, "guid", "") for n in events if type(n.event) in INPUTS)
    limits = None if decide else {g: step_limit(k) for g, k in inputs.items()}
    until = float("inf") if decide else deadline(sum(inputs.values()))
    if not decide and any(type(n.event) is ActionTaken and n.event.candidates for n in events):
        # One path through the open inputs proves the record; only where none is found is every path searched
        # (not where the path spent the allowance: the search would spend more).
        found = _seeded(events, infos, needed, skipped, True, limits, until)
        if (found.ok and not found.unknown) or found.spent:
            return found
    return _seeded(events, infos, needed, skipped, False, limits, until)


def _seeded(
    events: Sequence[Numbered],
    infos: dict[str, Any],
    needed: list[str],
    skipped: dict[str, str],
    first: bool,
    limits: dict[str, int] | None,
    until: float,
) -> ResimResult:
    """The replay, trying unrecorded seeds until one reproduces each play (not on the first path: it may diverge)."""
    seeds: dict[str, int] = {}
    tried: dict[str, list[int]] = {}
    while True:
        result = ResimResult(games=needed, skipped=dict(skipped), searched=not first)
        games = _Games(infos, seeds, first, limits, until)
        try:
            _replay(events, games, result)
        finally:
            result.guids = len(games.by_guid)
            for guid, inst in games.by_guid.items():
                result.steps += inst.steps + (inst.engine.steps if inst.engine else 0)
                result.copies += inst.engine.copies if inst.engine else 0
                if limits is not None and inst.engine is not None:  # what the next try (seed, search) has left
                    limits[guid] = max(limits[guid] - inst.engine.steps, 0)
        d = result.divergence
        if first or d is None or d.guid is None or d.guid not in games.unseeded or result.unknown:
            break
        gid = d.game_id or ""
        left = tried.setdefault(d.guid, seed_classes(infos[gid]) if gid in infos else [])
        if not left:
            if d.guid in seeds:  # else every seed starts the game alike: the seed is not why it disagrees
                result.unknown = (
                    f"seed not recorded: no seed of 0..{SEED_TRIES - 1} reproduces the play of {gid} guid "
                    f"{d.guid[:8]} ({d.message})"
                )
            break
        seeds[d.guid] = left.pop(0)
    result.seeds_found = {g: s for g, s in seeds.items() if g in games.by_guid}
    return result


def _replay(events: Sequence[Numbered], games: _Games, result: ResimResult) -> None:
    card = new_card("resimulation")
    frames = noted_frames(events)
    n = len(events)
    i = 0
    skipped_guids: set[str] = set()
    while i < n:
        cur = events[i]
        # Dispatched on the exact type, which a type checker cannot follow: ``ev`` is untyped.
        ev: Any = cur.event
        t = type(ev)
        guid: str = getattr(ev, "guid", "")
        if guid in skipped_guids or (t is PlayStarted and ev.game_id in result.skipped):
            # A game the folder cannot check: its plays are left out, the card's translator never sees them.
            skipped_guids.add(guid)
            i += 1
            continue
        if t is ObservationReapplied:
            # The REST server counted the last observation again (competition RESET): the card moves, the game
            # does not. What it derived follows it.
            apply(card, ev)
            i += 1
            while i < n and type(events[i].event) in DERIVED:
                apply(card, events[i].event)
                i += 1
            continue
        if t not in INPUTS and t not in DERIVED:
            i += 1
            continue
        if t in DERIVED:
            result.divergence = _compare(None, cur, cur, cur)
            return
        inst = games.by_guid.get(guid)
        if t is PlayStarted:
            result.plays += 1
        if t is PlayStarted and inst is None:
            if ev.seed is None:
                result.default_seed_plays += 1
            try:
                first, inst = games.make(ev.game_id, guid, ev.seed)
            except Exception as e:  # the game's code refuses this seed: nothing to compare with
                result.error = f"version {cur.version}: cannot start {ev.game_id} with seed {ev.seed}: {e}"
                return
            sig: Signature | None = _sig(first)
        elif inst is None:
            result.divergence = _at_input(
                cur, "guid", guid, f"{type_of(ev)} for guid {guid}, which no play_started began"
            )
            return
        else:
            choices, open_ = choices_for(ev, t)
            result.open_actions += open_
            try:
                sig = inst.send(cur.version, choices, open_, agrees(ev, t, frames.get(cur.version)))
            except StateNotCopied as e:
                result.error = (
                    f"version {cur.version}: the state of {getattr(ev, 'game_id', guid[:8])} "
                    f"could not be copied to try the actions the record leaves open ({e})"
                )
                return
            except SearchSpent as e:
                result.spent = True
                result.unknown = (
                    f"the search of the actions the record leaves open was given up at version {cur.version}, after "
                    f"{e} of its guid: its allowance ({allowance()}) is spent; too many of those actions give the same "
                    "frames and leave different states (a click on nothing that still counts, say); --decide searches "
                    "without a limit"
                )
                return
        result.inputs += 1
        if sig is None:
            result.divergence = _at_input(
                cur,
                "response",
                type_of(ev),
                f"{_describe(cur)}: the game returned no response (it raised an error or the action does not exist)",
            )
            return
        expected = translate(card, _observation(ev, t, sig), seed=inst.seed)
        j = i + 1
        while j < n and type(events[j].event) in DERIVED:
            j += 1
        d = _first_mismatch(expected, events[i:j], cur)
        if d is None and not inst.agreed:
            frame = frames.get(cur.version)
            what = (
                f"the frame the import noted ({frame[:12]}...)" if frame else "the recorded state and levels_completed"
            )
            d = _at_input(
                cur,
                "frame" if frame else "state",
                frame,
                f"{_describe(cur)} on {ev.game_id} guid {guid[:8]}: none of the candidate actions {ev.candidates} "
                f"gives {what}",
            )
        if d is not None:
            result.divergence = d
            if inst.cut:
                result.unknown = (
                    f"more game states fit the undecided actions of guid {guid[:8]} than are kept ({MAX_STATES}, "
                    f"{STATE_BYTES >> 20} MB): "
                    f"some were dropped, so a mismatch proves nothing ({d.message})"
                )
            elif t is PlayStarted and (copy := copy_before(events, i, guid, frames)) is not None:
                # A full reset follows no counted action: the line before it was a RESET or never reached the
                # game. Imported from the frames alone, a copy of the line before is counted as an action.
                result.unknown = (
                    f"version {copy} repeats the input before it (the same frame): a copy a harness writes for an "
                    f"action it did not send, which the import without the game code counted as an action; the "
                    f"full reset after it says no action was taken there ({d.message})"
                )
            return
        i = j
    maps: list[Any] = []  # of version -> Choice
    for guid, inst in games.by_guid.items():
        try:
            inst.finish()
        except StateNotCopied as e:
            result.error = f"the state of guid {guid[:8]} could not be copied at the end of the record ({e})"
            return
        result.decided += inst.decided_count
        maps += [inst.taken, inst.decided]  # a version taken on the path is the one its play went on with
        result.choices = ChainMap(*maps)  # a Choice is an (action, x, y); each guid's versions are its own
        result.reproduced += len(inst.taken)
        result.still_open += inst.still_open_count


def _sig(resp: Any) -> Signature:
    state = resp.state
    return (str(getattr(state, "name", state)), int(resp.levels_completed), bool(resp.full_reset), b"x")


def _observation(ev: Any, t: type, sig: Signature) -> Observation:
    empty = sig[3] == b""
    action = 0 if t is PlayStarted or t is LevelReset else ev.action
    return Observation(
        ts=ev.ts,
        game_id=ev.game_id,
        guid=ev.guid,
        action=action,
        state=sig[0],  # type: ignore[arg-type]
        levels_completed=sig[1],
        full_reset=False if empty else sig[2],
        frame_empty=empty,
        x=getattr(ev, "x", None) if action == 6 else None,
        y=getattr(ev, "y", None) if action == 6 else None,
    )


def _at_input(cur: Numbered, field: str, recorded: Any, message: str) -> Divergence:
    ev: Any = cur.event
    where = f"version {cur.version} (seq {cur.seq})"
    return Divergence(
        cur.version,
        cur.seq,
        getattr(ev, "game_id", None),
        ev.guid,
        _describe(cur),
        field,
        None,
        recorded,
        f"{where} {message}",
    )


def _first_mismatch(expected: list[AnyEvent], recorded: Sequence[Numbered], cur: Numbered) -> Divergence | None:
    for k, (exp, rec) in enumerate(zip_longest(expected, recorded)):
        d = _compare(exp, rec, recorded[min(k, len(recorded)) - 1], cur)
        if d is not None:
            return d
    return None
