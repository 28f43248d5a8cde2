"""The slow way to copy and compare game states that do not pickle: a deep copy and a walk's digest."""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Iterator
from enum import Enum
from types import CodeType, FunctionType
from typing import Any

from ledger.toolkit.game_pickle import game_module

#: The engine's bookkeeping that every action overwrites (and the never-changed clean levels).
_SKIP_ATTRS = frozenset(("_action", "_full_reset", "_action_complete", "_clean_levels"))


def reads_action_count(game: Any) -> bool:
    """Whether code of the game's own module reads ``_action_count``: then the number is part of its state
    (arcengine itself reads only whether it is zero)."""
    classes, module_globals = game_module(game)
    mod = type(game).__module__
    found = [f for c in classes for f in vars(c).values()]
    found += [v for v in module_globals.values() if isinstance(v, FunctionType) and v.__module__ == mod]
    for f in found:
        f = f.fget if isinstance(f, property) else getattr(f, "__func__", f)  # a property, a static or class method
        code = getattr(f, "__code__", None)
        if isinstance(code, CodeType) and any(
            "_action_count" in c.co_names or "_action_count" in c.co_consts for c in _codes(code)
        ):
            return True
    return False


def _codes(code: CodeType) -> Iterator[CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, CodeType):
            yield from _codes(c)


def fingerprint(game: Any, counts: bool = False) -> bytes:
    """A digest of a game's state without per-action bookkeeping (``_action_count``: zero or not, unless ``counts``)."""
    h = hashlib.blake2b(digest_size=20)
    seen: dict[int, int] = {}
    up = h.update

    def walk(o: Any) -> None:
        t = type(o)
        if o is None or t is bool or t is int or t is float or t is str:
            up(t.__name__.encode())
            up(repr(o).encode())
            return
        oid = id(o)
        if oid in seen:
            up(b"@%d" % seen[oid])
            return
        seen[oid] = len(seen)
        if t is list or t is tuple:
            up(b"[%d" % len(o))
            for v in o:
                walk(v)
        elif t is dict:
            up(b"{%d" % len(o))
            for k, v in o.items():
                walk(k)
                walk(v)
        elif t is set or t is frozenset:
            up(b"<%d" % len(o))
            for v in sorted(o, key=repr):
                walk(v)
        elif hasattr(o, "tobytes") and hasattr(o, "dtype"):
            up(f"nd{o.dtype}{o.shape}".encode())
            up(o.tobytes())
        elif isinstance(o, Enum):
            up(f"E{t.__qualname__}.{o.name}".encode())
        elif isinstance(o, random.Random):
            walk(o.getstate())
        elif hasattr(o, "bit_generator"):
            walk(o.bit_generator.state)
        elif isinstance(o, bytes | bytearray):
            up(bytes(o))
        else:
            up(t.__qualname__.encode())
            d = getattr(o, "__dict__", None)
            if d is not None:
                walk(d)
            for s in getattr(t, "__slots__", ()):
                if hasattr(o, s):
                    walk(s)
                    walk(getattr(o, s))

    state = {k: v for k, v in vars(game).items() if k not in _SKIP_ATTRS}
    if "_action_count" in state and not counts:
        state["_action_count"] = min(int(state["_action_count"]), 1)
    walk(state)
    return h.digest()


def _clone(game: Any) -> Any:
    # The clean levels are never changed (levels are cloned from them): share them instead of copying.
    clean = getattr(game, "_clean_levels", None)
    memo = {id(clean): clean} if clean is not None else {}
    return copy.deepcopy(game, memo)
