"""Game states to search over: run an action on a copy of a state and compare states, at about a game step's cost."""

from __future__ import annotations

import copyreg
import hashlib
import io
import pickle
import time
import weakref
from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple

from ledger.toolkit.game_pickle import (
    _ARRAYS,
    _INTO,
    _array,
    _by_number,
    _own_classes,
    _Pickler,
    _sets_loader,
    _the_game,
    by_value,
    functions_by_code,
    game_module,
)
from ledger.toolkit.game_walk import _clone, fingerprint, reads_action_count
from ledger.toolkit.search_budget import SearchSpent

__all__ = ["Choice", "Engine", "StateNotCopied", "fingerprint", "frame_digest", "frame_key", "keyed"]

#: Transitions remembered (state fingerprint, action) -> result.
CACHE_SIZE = 50_000


class StateNotCopied(Exception):
    """A game state the engine could not copy or compare: the search cannot go on from it."""


class Choice(NamedTuple):
    """An action: 0 RESET, 1..7 ACTION1..7; x/y for ACTION6."""

    action: int
    x: int | None = None
    y: int | None = None


def frame_digest(frame_bytes: bytes) -> str:
    """The digest :class:`~ledger.domain.events.FramesNoted` keeps of a signature's frame bytes."""
    return hashlib.blake2b(frame_bytes, digest_size=16).hexdigest()


def frame_key(frame_bytes: bytes) -> bytes:
    """Its :func:`frame_digest` as bytes (``b""`` for an empty answer), not the 8 KB a frame."""
    return hashlib.blake2b(frame_bytes, digest_size=16).digest() if frame_bytes else b""


def keyed(sig: tuple[str, int, bool, bytes]) -> tuple[str, int, bool, bytes]:
    """A signature of frame bytes (``line_signature``) as the engine's answers hold it (:func:`frame_key`)."""
    return sig[0], sig[1], sig[2], frame_key(sig[3])


def answer_signature(resp: Any) -> tuple[str, int, bool, bytes]:
    """A game's answer as the engine keeps it: (state, levels_completed, full_reset, :func:`frame_key`)."""
    import numpy as np

    state = resp.state.name if isinstance(resp.state, Enum) else str(resp.state)
    frames = resp.frame
    if len(frames) == 0:
        return state, int(resp.levels_completed), False, b""
    arr = np.stack([np.asarray(f, dtype=np.int16) for f in frames])
    return state, int(resp.levels_completed), bool(resp.full_reset), frame_key(arr.tobytes() + str(arr.shape).encode())


#: Games kept beside the snapshots frozen from them (:meth:`Engine.hand`).
SPARE_GAMES = 4
#: Bytes of snapshots and answers the transition cache may hold; it is emptied when they would exceed it.
CACHE_BYTES = 16 << 20

#: (response signature, fingerprint, snapshot); fingerprint and snapshot are None for an answer that was not kept.
Result = tuple[Any, bytes | None, Any]


def perform(game: Any, action: int, x: int | None = None, y: int | None = None) -> Any:
    from arcengine import ActionInput, GameAction

    data = {k: v for k, v in (("x", x), ("y", y)) if v is not None}
    return game.perform_action(ActionInput(id=GameAction.from_id(action), data=data), raw=True)


class Snap(NamedTuple):
    """A pickled state, the arrays it names by position (in-band costs several times a copy), the shared levels."""

    blob: bytes
    arrays: tuple[Any, ...]
    levels: tuple[Any, ...] = ()

    def size(self) -> int:
        return len(self.blob) + sum(a.nbytes + 128 for a in self.arrays)


class Engine:
    """Runs actions on copies of game states, remembering each transition. A state is the pickle of the game's
    attributes with its numpy arrays beside it; their digest is its fingerprint. Levels the game is not on are shared by
    content, so a copy costs the current level only (a level moved onto is made private first). An answer is checked
    before its state is kept. Failing the pickle, states are deep-copied."""

    def __init__(self, game: Any) -> None:
        from arcengine import ActionInput, GameAction

        self._input = ActionInput
        self._actions = {a.value: a for a in GameAction}
        self.cache: dict[tuple[bytes, Choice], Result | None] = {}
        self._cache_bytes = 0
        self.cls = type(game)
        self.clean = getattr(game, "_clean_levels", None)
        self.action0 = getattr(game, "_action", None)
        self._cells: dict[bytes, list[tuple[int, int]]] = {}
        self.steps = 0
        self.copies = 0
        #: The step count, and the CPU time, at which a step raises :class:`SearchSpent` instead (the allowance).
        self.stop_at: float = float("inf")
        self.deadline: float = float("inf")
        #: digest -> the shared level of that content, for as long as a snapshot names it.
        self._masters: weakref.WeakValueDictionary[bytes, _Master] = weakref.WeakValueDictionary()
        #: id of a level object once shared -> its digest (the entry goes when the object does, so ids stay theirs).
        self._ids: dict[int, bytes] = {}
        self._naming: list[_Master] = []
        self.shared = isinstance(getattr(game, "_levels", None), list) and isinstance(
            getattr(game, "_current_level_index", None), int
        )
        #: id(snapshot) -> (snapshot, the game it was frozen from, not acted on since): the last few only.
        self._spare: dict[int, tuple[Any, Any]] = {}
        #: The game being frozen, which its own state may refer to: pickled as a reference, not a second copy.
        self._freezing: Any = None
        self._arrays: list[Any] = []
        self._table: dict[Any, Any] = dict(copyreg.dispatch_table)
        self._table.update(self._array_table())
        # By name: an action's value is set in its __init__, and GameAction(6) finds no member.
        self._table[GameAction] = lambda a: (getattr, (GameAction, a.name))
        own = _own_classes(game)
        if own:
            self._table.update((c, _by_number(c)) for c in own)
            if type(game) in self._table:
                as_copy = self._table[type(game)]
                self._table[type(game)] = lambda o: (_the_game, ()) if o is self._freezing else as_copy(o)
        #: Whether the game reads its action count (then it is state, not the engine's bookkeeping).
        self.counts = reads_action_count(game)
        #: Whether sets are pickled sorted and the game's own functions by their code.
        self.extended = False
        self._functions: Callable[[Any], Any] | None = None
        #: Whether equal states pickle alike. A search that merges no states may turn it off: equal fingerprints
        #: still mean equal states, but equal states may not have equal fingerprints.
        self.canonical = True
        for extended in (False, True):
            self.extended, self.fast = extended, True  # freeze and thaw take the fast way while it is tried
            if extended:
                self._functions = functions_by_code(game_module(game)[1])
            self._masters.clear()  # levels shared by a failed try were pickled the other way
            self._ids.clear()
            try:
                fp, snap = self.freeze(game)
                self.fast = self.freeze(self.thaw(snap))[0] == fp
            except Exception:
                self.fast = False
            if self.fast:
                break
        if not self.fast:
            self.shared = self.extended = False
            self._functions = None

    def _share(self, game: Any) -> list[Any]:
        """The game's levels with every level it is not on as a :class:`_Shared` reference."""
        cur = game._current_level_index
        levels = game._levels
        out: list[Any] = []
        for i, lv in enumerate(levels):
            if i == cur:
                out.append(lv)
                continue
            d = self._ids.get(id(lv))
            m = self._masters.get(d) if d is not None else None
            if m is None or m.level is not lv:
                blob = self._dumps(lv)
                d = self._digest(blob)
                m = self._masters.get(d)
                if m is not None:
                    levels[i] = m.level
                else:
                    m = self._masters[d] = _Master(lv, blob, d)
                    self._known(lv, d)
            self._naming.append(m)
            # The master's own digest object: an equal one computed again is another bytes object, which would
            # pickle apart where a copy (whose levels name one master) shares it.
            out.append(_Shared(m.digest))
        return out

    def _known(self, lv: Any, d: bytes) -> None:
        """Remember that ``lv`` holds content ``d`` until it goes (one that cannot be watched is not remembered)."""
        if id(lv) not in self._ids:
            try:
                weakref.finalize(lv, self._ids.pop, id(lv), None)
            except TypeError:
                return
        # Known already: under its digest of another pickling (see ``canonical``), whose master may be gone.
        self._ids[id(lv)] = d

    def freeze(self, game: Any) -> tuple[bytes, Any]:
        """(fingerprint, snapshot) of a game state; :class:`StateNotCopied` if it cannot be copied."""
        try:
            return self._freeze(game)
        except Exception as e:  # what pickle, a deep copy or the walk raised on the game's own objects
            raise StateNotCopied(f"{type(e).__name__}: {e}") from e

    def _freeze(self, game: Any) -> tuple[bytes, Any]:
        if not self.fast:
            return fingerprint(game, self.counts), game
        st = {k: v for k, v in vars(game).items() if k != "_clean_levels" and k != "_action"}
        self._naming = []
        if self.shared:
            st["_levels"] = self._share(game)
        if "_action_count" in st and not self.counts:
            st["_action_count"] = min(int(st["_action_count"]), 1)
        st["_full_reset"] = False
        st["_action_complete"] = True
        self._freezing = game
        try:
            snap = self._dumps(st)
        finally:
            self._freezing = None
        if self._naming:
            snap = Snap(snap.blob, snap.arrays, tuple(self._naming))
            self._naming = []
        return self._digest(snap), snap

    def _array_table(self) -> dict[Any, Any]:
        """numpy arrays pickled by position in the snapshot's own list of array copies."""
        try:
            import numpy as np
        except ImportError:
            return {}
        arrays = self._arrays
        kinds: dict[Any, str] = {}

        def reduce(a: Any) -> Any:
            d = a.dtype
            kind = kinds.get(d)
            if kind is None:
                if d.hasobject:
                    return a.__reduce_ex__(5)
                kind = kinds[d] = d.str if d.names is None else str(d)
            arrays.append(a.copy())
            return _array, (len(arrays) - 1, kind, a.shape, a.flags.writeable)

        return {np.ndarray: reduce}

    def _dumps(self, obj: Any) -> Snap:
        buf = io.BytesIO()
        p = _Pickler(buf, self._functions) if self._functions is not None else pickle.Pickler(buf, protocol=5)
        p.dispatch_table = self._table
        # Equal strings are written once whichever objects hold them (pickle shares by identity): a copy holds fresh
        # strings where the game held its code's constants, and must pickle the same.
        if self.canonical:
            strings: dict[str, str] = {}
            p.persistent_id = by_value(strings.setdefault, sets=self.extended)  # type: ignore[method-assign]
        self._arrays.clear()
        try:
            p.dump(obj)
            return Snap(buf.getvalue(), tuple(self._arrays))
        finally:
            self._arrays.clear()

    @staticmethod
    def _digest(snap: Snap) -> bytes:
        h = hashlib.blake2b(snap.blob, digest_size=20)
        for a in snap.arrays:
            h.update(a.tobytes())
        return h.digest()

    def _loads(self, snap: Snap) -> Any:
        _ARRAYS.append(snap.arrays)
        try:
            u = pickle.Unpickler(io.BytesIO(snap.blob))
            u.persistent_load = _sets_loader() if self.extended else str  # type: ignore[method-assign]
            return u.load()
        finally:
            _ARRAYS.pop()

    def thaw(self, snap: Any, private: frozenset[int] = frozenset()) -> Any:
        """A game to act on, from a snapshot; levels in ``private`` are its own (else StateNotCopied)."""
        try:
            return self._thaw(snap, private)
        except Exception as e:  # what unpickling or a deep copy raised on the game's own objects
            raise StateNotCopied(f"{type(e).__name__}: {e}") from e

    def _thaw(self, snap: Any, private: frozenset[int]) -> Any:
        self.copies += 1
        if not self.fast:
            return _clone(snap)
        game = object.__new__(self.cls)
        _INTO.append(game)
        try:
            d = self._loads(snap)
            d["_clean_levels"] = self.clean
            d["_action"] = self.action0
            if self.shared:
                masters = self._masters
                d["_levels"] = [
                    lv
                    if type(lv) is not _Shared
                    else (self._loads(masters[lv.digest].blob) if i in private else masters[lv.digest].level)
                    for i, lv in enumerate(d["_levels"])
                ]
        finally:
            _INTO.pop()
        game.__dict__.update(d)
        return game

    def take(self, snap: Any) -> Any:
        """The game ``snap`` was frozen from, if it has not been acted on since, else a thawed copy."""
        spare = self._spare.pop(id(snap), None)
        if spare is not None and spare[0] is snap:
            return spare[1]
        return self.thaw(snap)

    def hand(self, snap: Any, game: Any) -> None:
        """``game`` is in the state ``snap`` holds: the next action from ``snap`` may use it."""
        if self.fast:
            if len(self._spare) >= SPARE_GAMES:
                del self._spare[next(iter(self._spare))]
            self._spare[id(snap)] = (snap, game)

    def release(self) -> None:
        """Let go of the states and games kept (they would live until a cyclic collection)."""
        self.cache.clear()
        self._cells.clear()
        self._spare.clear()

    def cells(self, node: Any) -> list[tuple[int, int]]:
        found = self._cells.get(node.fp)
        if found is None:
            found = self._cells[node.fp] = _cells(self.thaw(node.game) if self.fast else node.game)
        return found

    def step(self, node: Any, c: Choice, keep: Callable[[Any], bool] | None = None) -> Result | None:
        """(signature, fingerprint, snapshot) after ``c`` from ``node`` (None: raised); ``keep`` may refuse it."""
        key = (node.fp, c)
        if key in self.cache:
            hit = self.cache[key]
            if hit is None:
                return None
            if keep is not None and not keep(hit[0]):
                return hit[0], None, None
            if hit[1] is not None:
                return hit  # an answer kept before; else one rejected before, wanted now: run it again
        out = self._run(node.game, c, keep)
        size = 0 if out is None or not isinstance(out[2], Snap) else out[2].size()
        if len(self.cache) >= CACHE_SIZE or self._cache_bytes + size > CACHE_BYTES:
            self.cache.clear()
            self._cache_bytes = 0
            # Each state met adds its click cells too: let them go with the cache (found again with a copy).
            self._cells.clear()
        self.cache[key] = out
        self._cache_bytes += size
        return out

    def _run(self, snap: Any, c: Choice, keep: Callable[[Any], bool] | None) -> Result | None:
        data = {k: v for k, v in (("x", c.x), ("y", c.y)) if v is not None}
        private: frozenset[int] = frozenset()
        while True:
            game = self.thaw(snap, private) if private else self.take(snap)
            before = game._current_level_index if self.shared else 0
            if self.steps >= self.stop_at or time.process_time() > self.deadline:
                raise SearchSpent(f"{self.steps:,} game steps")
            self.steps += 1
            try:
                resp = game.perform_action(self._input(id=self._actions[c.action], data=data), raw=True)
            except Exception:  # the game raised: no match from here
                return None
            if self.shared:
                moved = self._moved_onto_shared(game, before)
                if moved is not None and moved not in private:
                    private = private | {moved}
                    continue
            sig = answer_signature(resp)
            if keep is not None and not keep(sig):
                return sig, None, None
            fp, out = self.freeze(game)
            if fp not in self._cells:
                self._cells[fp] = _cells(game)
            self.hand(out, game)
            return sig, fp, out

    def _moved_onto_shared(self, game: Any, before: int) -> int | None:
        """The index of a shared level the action moved the game onto (restored, it may have changed), else None."""
        cur = game._current_level_index
        lv = game._levels[cur] if 0 <= cur < len(game._levels) else None
        d = self._ids.get(id(lv))
        m = self._masters.get(d) if d is not None else None
        if cur == before or m is None or m.level is not lv:
            return None
        assert lv is not None
        _INTO.append(game)
        try:
            again = self._loads(m.blob)
        finally:
            _INTO.pop()
        lv.__dict__.clear()
        lv.__dict__.update(again.__dict__)
        return cur


class _Shared(NamedTuple):
    digest: bytes


class _Master:
    """A level kept once by content: the object every state that names it shares, and its pickle."""

    __slots__ = ("__weakref__", "blob", "digest", "level")

    def __init__(self, level: Any, blob: Snap, digest: bytes) -> None:
        self.level = level
        self.blob = blob
        self.digest = digest


def _cells(game: Any) -> list[tuple[int, int]]:
    """One display coordinate per grid cell (the cell's top-left pixel), as the camera maps clicks to cells."""
    cam = game.camera
    try:
        scale, xo, yo = cam._calculate_scale_and_offset()
        key = (scale, xo, yo, cam.width, cam.height)
    except Exception:
        key = (1, 0, 0, 64, 64)
    cells = _CELLS.get(key)
    if cells is None:
        scale, xo, yo, w, h = key
        cells = _CELLS[key] = [(xo + gx * scale, yo + gy * scale) for gy in range(h) for gx in range(w)]
    return cells


_CELLS: dict[tuple[int, int, int, int, int], list[tuple[int, int]]] = {}
