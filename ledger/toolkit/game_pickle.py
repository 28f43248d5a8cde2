"""Pickling a game's state for :mod:`ledger.toolkit.game_states`: the game file's own classes named by number.

The toolkit runs a game file as a module it does not register, so pickle cannot find that module's classes by name;
a snapshot names them by a number instead, and the arrays and the game object itself travel beside the pickle.
"""

from __future__ import annotations

import copyreg
import sys
from collections.abc import Callable
from typing import Any

#: Classes a snapshot names by number, not by name: those of a game file, which the toolkit runs as a module it
#: does not register, so pickle cannot find them (the public games keep objects of their own classes: displays,
#: helpers). Process-wide and append-only, so a number means one class for as long as a snapshot lives.
_CLASSES: list[type] = []
_NUMBERS: dict[type, int] = {}
#: The game a snapshot is being loaded into: what the snapshot's references to its own game become.
_INTO: list[Any] = []


def _new(i: int, *args: Any) -> Any:
    cls = _CLASSES[i]
    return cls.__new__(cls, *args)


def _new_ex(i: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    cls = _CLASSES[i]
    return cls.__new__(cls, *args, **kwargs)


def _call(i: int, *args: Any) -> Any:
    return _CLASSES[i](*args)


def _the_game() -> Any:
    return _INTO[-1]


#: The arrays of the snapshot being loaded (see :meth:`Engine._dumps`).
_ARRAYS: list[tuple[Any, ...]] = []


def _array(i: int, _dtype: str, _shape: Any, writeable: bool) -> Any:
    a = _ARRAYS[-1][i].copy()
    if not writeable:
        a.flags.writeable = False
    return a


def _named(c: type) -> bool:
    """Whether pickle finds ``c`` by its module and name."""
    obj: Any = sys.modules.get(c.__module__)
    for part in c.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is c


def game_module(game: Any) -> tuple[list[type], dict[str, Any]]:
    """The classes of the game's own module (its class and the bases defined there first, then every class the
    module holds) and the module's globals, as a method of the game's class sees them ({} if it has none)."""
    cls = type(game)
    found = dict.fromkeys(c for c in cls.__mro__ if c.__module__ == cls.__module__)
    module_globals = next((g for v in vars(cls).values() if isinstance(g := getattr(v, "__globals__", None), dict)), {})
    found.update((x, None) for x in module_globals.values() if isinstance(x, type) and x.__module__ == cls.__module__)
    return list(found), module_globals


def _own_classes(game: Any) -> list[type]:
    """The classes of the game's own module that pickle cannot find by name (the game's class among them)."""
    return [c for c in game_module(game)[0] if not _named(c)]


def _by_number(c: type) -> Callable[[Any], Any]:
    """A reducer that pickles an object of ``c`` as pickle would, naming ``c`` by its number."""
    i = _NUMBERS.get(c)
    if i is None:
        i = _NUMBERS[c] = len(_CLASSES)
        _CLASSES.append(c)

    def reduce(obj: Any) -> Any:
        rv = obj.__reduce_ex__(5)
        if isinstance(rv, str):
            return rv
        func, args, *rest = rv
        if func is copyreg.__newobj__ and args and args[0] is c:  # type: ignore[attr-defined]
            return (_new, (i, *args[1:]), *rest)
        if func is copyreg.__newobj_ex__ and args and args[0] is c:  # type: ignore[attr-defined]
            return (_new_ex, (i, args[1], args[2]), *rest)
        if func is c:
            return (_call, (i, *args), *rest)
        return rv

    return reduce
